"""mcpwire's version, and the distribution that installs it.

The distribution is ``handwired-mcp``: the name ``mcpwire`` on PyPI belongs to an unrelated project
whose wheel also installs an import package called ``mcpwire``, so the two cannot share an
environment. ``mcpwire --version`` says which distribution the running code comes from, read from
the installed metadata, and warns when the other one is installed beside it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from importlib.metadata import Distribution

__version__ = "0.1.0"

#: The name pip installs this project by (its import package and command are ``mcpwire``).
DISTRIBUTION: Final = "handwired-mcp"


def install_hint(extra: str) -> str:
    """How to add an extra, in the words an error message uses."""
    return f"pip install '{DISTRIBUTION}[{extra}]' (from a clone: pip install -e '.[{extra}]')"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _left_by_a_build(found: Distribution) -> bool:
    """Metadata that a build left beside ``pyproject.toml`` in a checkout (``mcpwire.egg-info``
    from before the distribution was renamed): seen when the checkout is on ``sys.path``, and
    not an installed distribution."""
    from pathlib import Path

    folder = Path(str(found.locate_file("")))
    return (folder / "pyproject.toml").is_file() and (folder / "mcpwire" / "_version.py").is_file()


def version_lines() -> tuple[str, list[str]]:
    """What ``mcpwire --version`` says: a line for stdout, and warnings for stderr.

    The version and the distribution's name come from the installed metadata; run from a source
    tree that was never installed, the line says so and gives the source's version and folder.
    """
    from importlib import metadata
    from pathlib import Path

    warnings: list[str] = []
    providers = {_normalized(name): name for name in metadata.packages_distributions().get("mcpwire", [])}
    others = sorted(
        name
        for key, name in providers.items()
        if key != DISTRIBUTION and not all(_left_by_a_build(found) for found in metadata.distributions(name=name))
    )
    if others:
        warnings.append(
            f"mcpwire: warning: the distribution {', '.join(others)} is installed here too and provides another "
            f"'mcpwire' import package; it cannot share an environment with {DISTRIBUTION} "
            f"(pip uninstall {' '.join(others)}, then reinstall {DISTRIBUTION})"
        )
    try:
        installed = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        folder = Path(__file__).resolve().parent
        return f"mcpwire {__version__} (not installed as {DISTRIBUTION}; run from {folder})", warnings
    return f"mcpwire {installed.version} (the {installed.metadata['Name']} distribution)", warnings

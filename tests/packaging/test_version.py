"""``mcpwire --version`` names the distribution the running code comes from, from the installed
metadata, and warns when the unrelated ``mcpwire`` distribution shares the environment."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from mcpwire._version import DISTRIBUTION, __version__

REPO = Path(__file__).resolve().parents[2]


def _version(*, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "mcpwire", "--version"], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_distribution_name_and_version_are_the_ones_pyproject_declares() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION != "mcpwire"
    assert "version" in project["dynamic"]  # read from mcpwire/_version.py, the one place it is written
    installed = metadata.distribution(DISTRIBUTION)
    assert (installed.metadata["Name"], installed.version) == (DISTRIBUTION, __version__)
    assert installed.entry_points.select(group="console_scripts", name="mcpwire")


def test_every_self_reference_of_the_extras_names_this_distribution() -> None:
    """An extra that pulls in another (``check = ["...[http,schema]"]``) names this project, not
    the unrelated ``mcpwire`` on PyPI, which pip would otherwise fetch."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    nested = [req for reqs in extras.values() for req in reqs if "[" in req and not req.startswith("psycopg")]
    assert nested and all(req.startswith(DISTRIBUTION + "[") for req in nested), nested


def test_version_names_the_distribution() -> None:
    proc = _version()
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0,
        f"mcpwire {__version__} (the {DISTRIBUTION} distribution)\n",
        "",
    )


def test_version_warns_when_the_unrelated_mcpwire_distribution_is_installed_too(tmp_path: Path) -> None:
    info = tmp_path / "mcpwire-0.5.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mcpwire\nVersion: 0.5.1\n")
    (info / "top_level.txt").write_text("mcpwire\n")
    proc = _version(extra_path=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == f"mcpwire {__version__} (the {DISTRIBUTION} distribution)\n"
    assert proc.stderr == (
        f"mcpwire: warning: the distribution mcpwire is installed here too and provides another 'mcpwire' import "
        f"package; it cannot share an environment with {DISTRIBUTION} (pip uninstall mcpwire, then reinstall "
        f"{DISTRIBUTION})\n"
    )


def test_version_from_a_source_tree_that_was_never_installed_says_so(tmp_path: Path) -> None:
    """Without site-packages (``-S``), no metadata is found: the line gives the source's version and
    folder (``_version`` needs the standard library only, so it is loaded by its path)."""
    code = (
        "import importlib.util, sys; spec = importlib.util.spec_from_file_location('v', sys.argv[1]); "
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
        "line, warnings = module.version_lines(); print(line); print(warnings)"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code, str(REPO / "mcpwire" / "_version.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert proc.stdout == f"mcpwire {__version__} (not installed as {DISTRIBUTION}; run from {REPO / 'mcpwire'})\n[]\n"


def test_metadata_a_build_left_in_a_checkout_is_not_taken_for_the_other_distribution(tmp_path: Path) -> None:
    """``mcpwire.egg-info`` beside pyproject.toml (an older build of this checkout, seen when the
    checkout is the working directory) is no installed distribution; the same metadata in a
    site-packages folder is."""
    from mcpwire._version import _left_by_a_build

    checkout, site = tmp_path / "checkout", tmp_path / "site-packages"
    for folder in (checkout, site):
        (folder / "mcpwire").mkdir(parents=True)
        (folder / "mcpwire" / "_version.py").write_text('__version__ = "0.0.1"\n')
        (folder / "mcpwire.egg-info").mkdir()
        (folder / "mcpwire.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: mcpwire\nVersion: 0.0.1\n")
    (checkout / "pyproject.toml").write_text("[project]\nname = 'mcpwire'\n")
    assert _left_by_a_build(metadata.PathDistribution(checkout / "mcpwire.egg-info"))
    assert not _left_by_a_build(metadata.PathDistribution(site / "mcpwire.egg-info"))

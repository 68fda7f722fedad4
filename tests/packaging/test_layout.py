"""Packaging: every package of the tree is listed, and nothing but ``mcpwire`` is installed."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _configured() -> tuple[list[str], dict[str, str]]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    setuptools = data["tool"]["setuptools"]
    return list(setuptools["packages"]), dict(setuptools["package-dir"])


def test_every_package_directory_is_listed_under_mcpwire() -> None:
    packages, package_dir = _configured()
    assert all(p == "mcpwire" or p.startswith("mcpwire.") for p in packages)
    roots = {name: REPO / folder for name, folder in package_dir.items()}
    found: set[str] = set()
    for name, root in roots.items():
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            if "__pycache__" in rel.parts:
                continue
            dotted = ".".join((name, *rel.parts)) if rel.parts else name
            # a folder mapped on its own (mcpwire.conformance) is found from its own root only
            nested = [other for other in roots if other != name and len(other) > len(name)]
            if any(dotted == other or dotted.startswith(other + ".") for other in nested):
                continue
            found.add(dotted)
    assert sorted(found) == sorted(packages)


def test_conformance_and_fuzz_install_inside_mcpwire() -> None:
    import mcpwire.conformance.cli
    import mcpwire.fuzz.cli

    assert Path(mcpwire.conformance.cli.__file__).resolve().parent == REPO / "conformance"
    assert Path(mcpwire.fuzz.cli.__file__).resolve().parent == REPO / "fuzz"


def test_the_wheel_holds_only_mcpwire_and_runs_check_and_fuzz(tmp_path: Path) -> None:
    """``pip install .`` puts only ``mcpwire`` into site-packages; check and fuzz work from it."""
    import subprocess
    import sys
    import zipfile

    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("handwired_mcp-*.whl")  # the distribution's name, not the import package's
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(tmp_path / "site")
    tops = {name.split("/", 1)[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"mcpwire"}
    assert not [n for n in names if "/tests/" in n or n.startswith("tests/")]
    assert "mcpwire/conformance/cli.py" in names
    assert "mcpwire/fuzz/cli.py" in names
    assert "mcpwire/py.typed" in names
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site"), "PYTHONNOUSERSITE": "1"}
    for command in (["check", "--list"], ["fuzz", "--help"]):
        proc = subprocess.run(
            [sys.executable, "-m", "mcpwire", *command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip()
    proc = subprocess.run(
        [sys.executable, "-c", "import mcpwire.conformance, mcpwire.fuzz; print(mcpwire.conformance.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.startswith(str(tmp_path / "site")), proc.stderr


def test_no_two_test_modules_share_a_name() -> None:
    """Test folders are not packages: pytest imports each file by its bare name, so two helpers
    called ``_harness.py`` in two folders would shadow each other."""
    from collections import Counter

    names = Counter(p.name for p in (REPO / "tests").rglob("*.py") if p.name != "conftest.py")
    assert [name for name, count in names.items() if count > 1] == []

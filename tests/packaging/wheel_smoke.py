"""Build the sdist and the wheel as a release would, install the wheel into a clean venv outside the
checkout, and use it there as a user would.

    python tests/packaging/wheel_smoke.py [--python PYTHON] [--work DIR] [--keep]

``--python`` is the interpreter to build, install and run with (default: this one). Standard
library only, so any supported Python runs it without installing anything first. Steps, each
bounded in time and said before it runs:

1. ``python -m build`` (in its own venv) makes the sdist and, from it, the wheel.
2. The wheel holds ``mcpwire`` and its dist-info and nothing else, and exactly the files the
   source tree says it should (every module of every package in pyproject.toml, and the package
   data: schemas, console templates and static files, the report's schema); its metadata names
   the distribution and the ``mcpwire`` command.
3. A venv outside the checkout gets the wheel with ``[serve,check,fuzz,agent]``; from an empty
   folder, with a fresh HOME and nothing of the checkout on any path: ``mcpwire --version``,
   ``mcpwire check`` (exit 0), ``mcpwire serve`` (a console page and its static files, the API, a
   call through the MCP gateway, all with a token), and ``mcpwire fuzz`` for a few seconds.

Exits 0 when every step passed; otherwise 1, with the step and what went wrong.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[2]
EXTRAS = "serve,check,fuzz,agent"
TOKEN = "wheel-smoke-token"  # a throwaway token for the one serve process below


class SmokeError(Exception):
    """A step failed; the message says which and why."""


def say(message: str) -> None:
    print(f"{Path(sys.argv[0]).stem}: {message}", flush=True)


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    expect: int | None = 0,
) -> subprocess.CompletedProcess[str]:
    shown = " ".join(str(a) for a in argv)
    try:
        proc = subprocess.run(
            [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise SmokeError(f"{shown}: no exit within {timeout:.0f}s") from exc
    if expect is not None and proc.returncode != expect:
        raise SmokeError(
            f"{shown}: exit {proc.returncode}, expected {expect}\n--- stdout\n{proc.stdout[-3000:]}"
            f"\n--- stderr\n{proc.stderr[-3000:]}"
        )
    return proc


# -- 1. build --------------------------------------------------------------------------------------


def build(python: str, work: Path) -> tuple[Path, Path]:
    """The sdist and the wheel, built by ``python -m build`` (the wheel from the sdist)."""
    tools = work / "build-env"
    say(f"building the sdist and the wheel with {python} (the build frontend goes into {tools})")
    run([python, "-m", "venv", tools], timeout=120)
    run([tools / "bin" / "python", "-m", "pip", "install", "-q", "build"], timeout=600)
    out = work / "dist"
    run([tools / "bin" / "python", "-m", "build", "--outdir", out, REPO], timeout=600)
    sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        raise SmokeError(f"expected one sdist and one wheel in {out}, found {[p.name for p in out.iterdir()]}")
    say(f"built {sdists[0].name} and {wheels[0].name}")
    return sdists[0], wheels[0]


# -- 2. what the wheel holds -----------------------------------------------------------------------


def expected_files(pyproject: Mapping[str, object]) -> set[str]:
    """What the wheel must hold besides its dist-info, from pyproject.toml and the source tree:
    the modules of every listed package, and the files its package-data globs match."""
    tool = pyproject["tool"]
    assert isinstance(tool, dict)
    setuptools = tool["setuptools"]
    packages: list[str] = setuptools["packages"]
    package_dir: dict[str, str] = setuptools.get("package-dir", {})
    package_data: dict[str, list[str]] = setuptools.get("package-data", {})

    def folder(package: str) -> Path:
        parts = package.split(".")
        for n in range(len(parts), 0, -1):  # the longest mapped prefix decides
            prefix = ".".join(parts[:n])
            if prefix in package_dir:
                return REPO / package_dir[prefix] / Path(*parts[n:])
        return REPO / Path(*parts)

    files: set[str] = set()
    for package in packages:
        source = folder(package)
        target = PurePosixPath(*package.split("."))
        files.update(str(target / p.name) for p in source.glob("*.py"))
        for pattern in package_data.get(package, []):
            files.update(str(target / p.relative_to(source).as_posix()) for p in source.glob(pattern) if p.is_file())
    return files


def check_wheel(wheel: Path, sdist: Path) -> str:
    """Checks what the wheel holds; returns the distribution's name as its metadata says."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    name = pyproject["project"]["name"]
    say(f"checking what {wheel.name} holds")
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
        dist_info = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
        if len(dist_info) != 1:
            raise SmokeError(f"the wheel has {len(dist_info)} dist-info folders: {sorted(dist_info)}")
        (info,) = dist_info
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    tops = {n.split("/", 1)[0] for n in names}
    if tops != {"mcpwire", info}:
        raise SmokeError(f"the wheel's top level should be mcpwire and {info}, not {sorted(tops)}")
    held = {n for n in names if n.startswith("mcpwire/")}
    wanted = expected_files(pyproject)
    missing, extra = sorted(wanted - held), sorted(held - wanted)
    if missing or extra:
        raise SmokeError(f"the wheel misses {missing[:20]} and holds unexpected {extra[:20]}")
    for kind in ("schemas/", "service/console/templates/", "service/console/static/", "conformance/report/schema.json"):
        if not any(n.startswith("mcpwire/" + kind) for n in held):
            raise SmokeError(f"the wheel holds no mcpwire/{kind}")
    found = re.search(r"^Name: (.+)$", metadata, re.M)
    if found is None or found.group(1).strip() != name:
        raise SmokeError(f"the wheel's METADATA names {found.group(1) if found else 'nothing'}, not {name}")
    if not re.search(r"^mcpwire = mcpwire\.cli:main$", entry_points, re.M):
        raise SmokeError(f"the wheel's entry points have no 'mcpwire = mcpwire.cli:main':\n{entry_points}")
    if not sdist.name.startswith(name.replace("-", "_") + "-"):
        raise SmokeError(f"the sdist {sdist.name} is not named for {name}")
    say(f"the wheel holds mcpwire ({len(held)} files, as pyproject.toml lists them) and {info}, nothing else")
    return name


# -- 3. install and use --------------------------------------------------------------------------


def install(python: str, wheel: Path, work: Path) -> Path:
    venv = work / "venv"
    say(f"installing {wheel.name}[{EXTRAS}] into a new venv, {venv}")
    run([python, "-m", "venv", venv], timeout=120)
    run([venv / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[{EXTRAS}]"], timeout=900)
    return venv


def user_env(venv: Path, home: Path) -> dict[str, str]:
    """A user's shell with the venv activated: its bin first on PATH, a fresh HOME, nothing of the
    checkout."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONNOUSERSITE": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "VIRTUAL_ENV": str(venv),
    }
    for name in ("PIP_CACHE_DIR", "TMPDIR"):  # kept: where downloads and temporary files go
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def check_version(name: str, venv: Path, cwd: Path, env: Mapping[str, str]) -> None:
    say("mcpwire --version")
    proc = run(["mcpwire", "--version"], cwd=cwd, env=env, timeout=60)
    version = run(
        [venv / "bin" / "python", "-c", "import mcpwire; print(mcpwire.__version__)"], cwd=cwd, env=env, timeout=60
    ).stdout.strip()
    expected = f"mcpwire {version} (the {name} distribution)"
    if proc.stdout.strip() != expected or proc.stderr:
        raise SmokeError(f"mcpwire --version said {proc.stdout!r} (stderr {proc.stderr!r}), expected {expected!r}")
    where = run(
        [venv / "bin" / "python", "-c", "import mcpwire; print(mcpwire.__file__)"], cwd=cwd, env=env, timeout=60
    ).stdout.strip()
    if not where.startswith(str(venv)):
        raise SmokeError(f"mcpwire was imported from {where}, not from the venv {venv}")
    say(f"  {proc.stdout.strip()}, imported from {where}")


def check_check(cwd: Path, env: Mapping[str, str]) -> None:
    say("mcpwire check (the bundled reference server against the specification)")
    proc = run(["mcpwire", "check"], cwd=cwd, env=env, timeout=600)
    tail = [line for line in proc.stdout.splitlines() if line.strip()][-1:]
    say(f"  exit 0: {tail[0] if tail else ''}")


def fetch(
    opener: urllib.request.OpenerDirector,
    method: str,
    url: str,
    *,
    body: object = None,
    form: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30,
) -> tuple[int, dict[str, str], bytes]:
    """One request (redirects followed, cookies kept by ``opener``): status, headers, body."""
    data = None
    request = urllib.request.Request(url, method=method, headers=dict(headers or {}))
    if body is not None:
        data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    elif form is not None:
        data = urllib.parse.urlencode(form).encode()
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
    request.data = data
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def jsonrpc_result(headers: Mapping[str, str], body: bytes) -> dict[str, object]:
    """The JSON-RPC response in a Streamable HTTP answer (one JSON body, or SSE events)."""
    if headers.get("content-type", "").startswith("text/event-stream"):
        for line in body.decode().splitlines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if "result" in message or "error" in message:
                    return dict(message)
        raise SmokeError(f"no JSON-RPC response in the event stream: {body[:500]!r}")
    return dict(json.loads(body))


@contextmanager
def serving(cwd: Path, env: Mapping[str, str], work: Path) -> Iterator[str]:
    """``mcpwire serve`` on a free loopback port with a token; yields its base URL."""
    argv = ["mcpwire", "serve", "--port", "0", "--db", f"sqlite:///{work / 'serve.db'}"]
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env={**env, "MCPWIRE_TOKEN": TOKEN},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    output = b""
    try:
        deadline = time.monotonic() + 120
        while b"Ctrl+C stops." not in output:
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None and proc.stderr else ""
                raise SmokeError(
                    f"mcpwire serve did not start within 120s: {output.decode(errors='replace')}\n{err[-2000:]}"
                )
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                output += os.read(fd, 65536)
        lines = output.decode(errors="replace").splitlines()
        url = next((m.group(1) for m in map(re.compile(r"^API\s+(http://\S+)/api/v1\b").match, lines) if m), "")
        if not url:
            raise SmokeError(f"mcpwire serve printed no API URL: {lines}")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise SmokeError("mcpwire serve did not stop within 60s of SIGTERM") from None
        if code != 0 and sys.exc_info()[0] is None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise SmokeError(f"mcpwire serve exited {code} after SIGTERM:\n{err[-2000:]}")


def check_serve(cwd: Path, env: Mapping[str, str], work: Path) -> None:
    say("mcpwire serve (a token in MCPWIRE_TOKEN; every request below sends it)")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    client = urllib.request.build_opener()
    with serving(cwd, env, work) as base:
        say(f"  serving at {base}")
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        status, _, body = fetch(browser, "GET", base + "/")
        if status != 200 or b'action="/login"' not in body:
            raise SmokeError(f"GET / without a session answered {status}, not the sign-in page: {body[:300]!r}")
        status, headers, body = fetch(browser, "POST", base + "/login", form={"token": TOKEN, "next": "/"})
        page = body.decode(errors="replace")
        if status != 200 or not headers.get("content-type", "").startswith("text/html") or "demo" not in page:
            raise SmokeError(f"signing in to the console answered {status} {headers.get('content-type')}: {page[:500]}")
        assets = re.findall(r'(?:href|src)="(/console/static/[^"]+)"', page)
        if not assets:
            raise SmokeError(f"the console page links no static files: {page[:500]}")
        for asset in assets:
            status, _, body = fetch(browser, "GET", base + asset)
            if status != 200 or not body:
                raise SmokeError(f"GET {asset} answered {status} with {len(body)} bytes")
        say(
            f"  the console: signed in with the token, the servers page ({len(page)} characters) and its "
            f"{len(assets)} static files"
        )

        status, _, body = fetch(client, "GET", base + "/api/v1/tools?q=echo", headers=auth)
        if status != 200 or b"demo__echo" not in body:
            raise SmokeError(f"GET /api/v1/tools?q=echo answered {status}: {body[:500]!r}")
        status, _, _ = fetch(client, "GET", base + "/api/v1/tools")
        if status != 401:
            raise SmokeError(f"GET /api/v1/tools without the token answered {status}, not 401")

        mcp = base + "/mcp"
        accept = {**auth, "Accept": "application/json, text/event-stream"}
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "wheel-smoke", "version": "1"},
            },
        }
        status, headers, body = fetch(client, "POST", mcp, body=init, headers=accept)
        if status != 200:
            raise SmokeError(f"initialize through the gateway answered {status}: {body[:500]!r}")
        session = {"Mcp-Session-Id": headers["mcp-session-id"]} if "mcp-session-id" in headers else {}
        follow = {**accept, **session, "MCP-Protocol-Version": "2025-06-18"}
        fetch(client, "POST", mcp, body={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=follow)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "demo__echo", "arguments": {"text": "through the wheel"}},
        }
        status, headers, body = fetch(client, "POST", mcp, body=call, headers=follow)
        message = jsonrpc_result(headers, body) if status == 200 else {}
        result = message.get("result")
        if not isinstance(result, dict) or "through the wheel" not in json.dumps(result) or result.get("isError"):
            raise SmokeError(f"tools/call demo__echo through the gateway answered {status}: {body[:500]!r}")
        say("  POST /mcp: initialize, then tools/call demo__echo through the gateway answered the text")


def check_fuzz(cwd: Path, env: Mapping[str, str]) -> None:
    budget = 8
    say(f"mcpwire fuzz (the bundled demo server, its echo and add tools, {budget}s budget)")
    proc = run(
        [
            "mcpwire",
            "fuzz",
            "--tools",
            "echo,add",
            "--time-budget",
            str(budget),
            "--seed",
            "1",
            "--out",
            cwd / "fuzz-out",
        ],
        cwd=cwd,
        env=env,
        timeout=budget + 120,
        expect=None,
    )
    if proc.returncode != 0:
        raise SmokeError(f"mcpwire fuzz exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    tail = [line for line in proc.stdout.splitlines() if line.strip()][-1:]
    say(f"  exit 0: {tail[0] if tail else ''}")


def script(doc: str | None, argv: Sequence[str] | None, prefix: str, body: Callable[[str, Path], str]) -> int:
    """The frame of both scripts: the options (``--python``, ``--work``, ``--keep``), a work folder
    outside the checkout, ``body(python, work)``, its failure said in one line, the folder removed."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0] if doc else None)
    parser.add_argument("--python", default=sys.executable, help="the interpreter to use (default: this one)")
    parser.add_argument("--work", type=Path, help="an empty folder outside the checkout (default: a new one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    work = (args.work or Path(tempfile.mkdtemp(prefix=prefix))).resolve()
    if work.is_relative_to(REPO):
        parser.error(f"--work {work} is inside the checkout {REPO}")
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    python = shutil.which(args.python) or args.python
    try:
        version = run([python, "-c", "import sys; print(sys.version.split()[0])"], timeout=30).stdout.strip()
        say(f"Python {version} ({python}); work folder {work}")
        done = body(python, work)
    except SmokeError as exc:
        say(f"FAILED: {exc}")
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    say(f"{done}, on Python {version}, in {time.monotonic() - started:.0f}s")
    return 0


def smoke(python: str, work: Path) -> str:
    sdist, wheel = build(python, work)
    name = check_wheel(wheel, sdist)
    venv = install(python, wheel, work)
    cwd = work / "user"
    cwd.mkdir(exist_ok=True)
    env = user_env(venv, work / "home")
    check_version(name, venv, cwd, env)
    check_check(cwd, env)
    check_serve(cwd, env, work)
    check_fuzz(cwd, env)
    return f"{wheel.name}: built, installed outside the checkout and used"


def main(argv: Sequence[str] | None = None) -> int:
    return script(__doc__, argv, "mcpwire-wheel-", smoke)


if __name__ == "__main__":
    sys.exit(main())

"""Helpers of the console's tests: a real ``mcpwire serve`` process on a free loopback port with
real servers and a hostile fake, and screenshots at both widths. Imported as ``from _console
import ...`` (pytest puts this folder on ``sys.path``)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "real"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
from _paths import NPM_BIN, PY_BIN, require
from _process import ServeProcess, clean_env

CHROMIUM = Path("/usr/bin/chromium")
FIXTURES = Path(__file__).with_name("fixtures")
SCREENSHOTS = Path(__file__).with_name("screenshots")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WIDTHS = {"wide": (1280, 900), "narrow": (390, 844)}


@dataclass
class Serve:
    process: ServeProcess
    folder: Path

    @property
    def url(self) -> str:
        return self.process.url

    @property
    def sign_in(self) -> str:
        """The one-click sign-in link ``mcpwire serve`` printed (with the admin token it made)."""
        for line in self.process.lines:
            if line.startswith("sign in "):
                return line.split(None, 2)[2].strip()
        raise AssertionError(f"no sign-in link in {self.process.lines}")

    @property
    def token(self) -> str:
        return self.sign_in.rsplit("token=", 1)[1]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def state(self) -> Path:
        return self.folder / "state"

    def stop(self) -> None:
        self.process.stop()


def console_config(folder: Path) -> dict[str, Any]:
    """server-everything (get-sum asks for approval), server-memory, mcp-server-time and the
    hostile fake."""
    state = folder / "state"
    state.mkdir(parents=True, exist_ok=True)
    (state / "description").write_text("Reports the weather.")
    return {
        "everything": {
            "command": require(NPM_BIN / "mcp-server-everything"),
            "args": ["stdio"],
            "policy": {"tools": {"get-sum": {"approval": "ask"}}},
        },
        "memory": {
            "command": require(NPM_BIN / "mcp-server-memory"),
            "env": {"MEMORY_FILE_PATH": str(folder / "memory.jsonl")},
        },
        "time": {"command": require(PY_BIN / "mcp-server-time")},
        "hostile": {"command": sys.executable, "args": [str(FIXTURES / "console_fake_server.py"), str(state)]},
    }


def start_serve(folder: Path, servers: dict[str, Any], *, token: str | None = None) -> Serve:
    """``mcpwire serve`` on a free loopback port with ``servers``, its database in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    env = clean_env(folder, **({"MCPWIRE_TOKEN": token} if token is not None else {}))
    argv = [sys.executable, "-m", "mcpwire", "serve", "--config", str(config), "--port", "0",
            "--db", f"sqlite:///{folder / 'service.db'}"]  # fmt: skip
    with (folder / "serve.log").open("wb") as log:  # a file: a pipe nobody reads could fill and block
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env, cwd=folder)
    process = ServeProcess(proc)
    try:
        process.read_until("Ctrl+C stops.", timeout=90)
    except BaseException:
        process.kill()
        raise
    return Serve(process, folder)


def signed_in(browser: Any, serve: Serve, **options: Any) -> Any:
    """A browser context signed in to the console through the link ``mcpwire serve`` printed."""
    context = browser.new_context(base_url=serve.url, **options)
    page = context.new_page()
    page.goto(serve.sign_in)
    assert page.url.rstrip("/") == serve.url.rstrip("/"), page.url  # the token left the address at once
    page.close()
    return context


def screenshot(page: Any, name: str) -> None:
    """Saves the page at both widths (into the git-ignored screenshots folder). The caret is left
    as it is: hiding it would add a style element, which the console's policy refuses (and
    reports as a browser error)."""
    SCREENSHOTS.mkdir(exist_ok=True)
    original = page.viewport_size
    for label, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True, caret="initial")
    page.set_viewport_size(original)

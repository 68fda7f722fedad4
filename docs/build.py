"""Build the reference site: the hand-written pages of ``docs/`` plus pages generated from the code.

    python docs/build.py [--out DIR]

Generated, never written by hand (so they cannot drift from what ships):

- ``index.md`` from ``README.md``;
- one page per command from its own ``--help`` (``mcpwire <command> --help``);
- the checks catalogue of ``mcpwire check`` from its registry (id, level, revisions, transports,
  spec reference and quote);
- the ``mcpwire serve`` management API from the OpenAPI document the service itself serves;
- the library reference from the docstrings (mkdocstrings).

The site is built with ``mkdocs build --strict``: a broken link, a missing page or a docstring the
reference cannot render fails the build. Needs the ``docs`` extra.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: hand-written pages of docs/ and their titles in the navigation, in order
GUIDES: dict[str, str] = {
    "config.md": "mcp.json format",
    "architecture.md": "Architecture",
    "deploy.md": "Deploying mcpwire serve",
    "check-findings.md": "Checker findings on real servers",
    "fuzz-findings.md": "Fuzzer findings on real servers",
}

#: library reference pages: file -> (title, modules or objects documented there)
REFERENCE: dict[str, tuple[str, tuple[str, ...]]] = {
    "client.md": ("Client", ("mcpwire.client.open_client", "mcpwire.client.connect_client", "mcpwire.client.Client")),
    "aio.md": ("asyncio", ("mcpwire.aio",)),
    "host.md": ("Host", ("mcpwire.host.Host", "mcpwire.host.ApprovalQueue", "mcpwire.host.ApprovalRequest")),
    "errors.md": ("Errors", ("mcpwire.errors",)),
    "redaction.md": ("Redaction", ("mcpwire.redaction",)),
    "agent.md": ("Agent", ("mcpwire.agent",)),
}

#: the order of commands in the navigation (others, if any, follow alphabetically)
COMMAND_ORDER = (
    "info", "tools", "call", "resources", "read", "prompts", "prompt", "servers", "export",
    "add", "check", "fuzz", "login", "serve", "chat",
)  # fmt: skip


def commands() -> list[str]:
    """Every subcommand the installed ``mcpwire`` offers whose module is importable."""
    from mcpwire import cli

    names = [*cli._COMMANDS, *(n for n, (module, _, _) in cli._DELEGATED.items() if _importable(module))]
    rank = {name: i for i, name in enumerate(COMMAND_ORDER)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _documentable(target: str) -> bool:
    """Whether ``target`` names an installed module, or an attribute of one."""
    if _importable(target):
        return True
    parent, _, attr = target.rpartition(".")
    return bool(parent) and _importable(parent) and hasattr(importlib.import_module(parent), attr)


def command_help(name: str | None) -> str:
    """What ``mcpwire [name] --help`` prints, as a user sees it at 100 columns."""
    argv = [sys.executable, "-m", "mcpwire", *([name] if name else []), "--help"]
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"docs: `mcpwire {name or ''} --help` exited {done.returncode}: {done.stderr.strip()[:500]}")
    return done.stdout.rstrip()


def command_page(name: str) -> str:
    return f"# mcpwire {name}\n\n```text\n{command_help(name)}\n```\n"


def commands_index(names: list[str]) -> str:
    links = "\n".join(f"- [`mcpwire {n}`]({n}.md)" for n in names)
    return f"# Command line\n\n```text\n{command_help(None)}\n```\n\n{links}\n"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


#: section titles of the checks catalogue, by the module that registers the checks
AREA_TITLES = {"http": "HTTP", "http_security": "HTTP security", "modern": "2026-07-28", "handshake": "Handshake"}


def checks_page() -> str:
    """The checks catalogue of ``mcpwire check``, from its registry, grouped by area."""
    # the checker installs as mcpwire.conformance (its source folder is conformance/); its command
    # line imports every module that registers checks
    importlib.import_module("mcpwire.conformance.cli")
    catalogue = importlib.import_module("mcpwire.conformance.registry").CATALOGUE
    groups: dict[str, list[Any]] = {}
    for check in catalogue.values():  # in registration order: the order of the checker's runs
        groups.setdefault(check.fn.__module__.rsplit(".", 1)[-1], []).append(check)
    lines = [
        "# Checks catalogue",
        "",
        f"`mcpwire check` runs {len(catalogue)} checks. Each one cites the rule it tests, per revision: "
        "the level (MUST, SHOULD, ...) and quote of the newest revision are shown; where a rule changed "
        "between revisions, the earlier wording follows.",
        "",
    ]
    for area, checks in groups.items():
        if not checks:
            continue
        title = AREA_TITLES.get(area, area.replace("_", " ").capitalize())
        lines += [f"## {title}", "", "| Id | Level | Check | Revisions | Transports | Rule |"]
        lines.append("|---|---|---|---|---|---|")
        for c in checks:
            first, last = c.revisions
            span = f"{first}+" if last.startswith("9999") else f"{first} to {last}"
            eras = "" if len(c.eras) == 2 else f" ({'/'.join(sorted(c.eras))} era)"
            rule = f"{c.spec}: “{c.quote}”"
            for since, spec, quote in c.quotes:
                rule += f"<br>from {since}: {spec}: “{quote}”"
            lines.append(
                f"| {c.id} | {c.level.value} | {_cell(c.title)} | {span}{eras} | {', '.join(sorted(c.transports))} "
                f"| {_cell(rule).replace('&lt;br>', '<br>')} |"
            )
        lines.append("")
    return "\n".join(lines)


def service_api_page(out: Path) -> str:
    """The management API of ``mcpwire serve`` from its OpenAPI document (also written beside it)."""
    from mcpwire.service.api.core import API

    spec = API.openapi(secured=True)
    (out / "openapi.json").write_text(json.dumps(spec, indent=2), encoding="utf-8")
    lines = [
        "# Service API",
        "",
        f"`mcpwire serve` answers JSON under `/api/v1`: {spec['info'].get('title', '')}. "
        "Errors are RFC 9457 `application/problem+json` documents naming the bad field. "
        "The whole OpenAPI 3.1 document: [openapi.json](openapi.json) (the service serves it at "
        "`/api/v1/openapi.json`).",
        "",
        "| Method | Path | What it does |",
        "|---|---|---|",
    ]
    operations = list(_operations(spec))
    for method, path, op in operations:
        lines.append(f"| {method.upper()} | `{path}` | {_cell(op.get('summary', ''))} |")
    for method, path, op in operations:
        lines += ["", f"## {method.upper()} `{path}`", ""]
        if op.get("description"):
            lines += [op["description"], ""]
        for param in op.get("parameters", []):
            where, pname = param.get("in", ""), param.get("name", "")
            lines.append(f"- {where} parameter `{pname}`: {_cell(param.get('description', ''))}")
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body:
            lines += ["", "Request body:", "", "```json", json.dumps(body, indent=2), "```"]
        codes = ", ".join(f"{code} ({_cell(r.get('description', ''))})" for code, r in op.get("responses", {}).items())
        lines += ["", f"Responses: {codes}"]
    return "\n".join(lines) + "\n"


def _operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in spec.get("paths", {}).items():
        for method, op in item.items():
            if method in {"get", "post", "put", "patch", "delete"}:
                yield method, path, op


def reference_page(title: str, targets: tuple[str, ...]) -> str:
    blocks = "\n\n".join(f"::: {target}" for target in targets)
    return f"# {title}\n\n{blocks}\n"


def readme_page() -> str:
    """The README as the home page, its links rewritten for the site."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"\]\(docs/", "](", text)
    # links to the source tree point at files a site cannot serve: keep their text only
    return re.sub(r"\[([^\]]+)\]\((?!https?://|#|img/|[\w-]+\.md)([^)]+)\)", r"\1", text)


def assemble(src: Path) -> dict[str, Any]:
    """Write every page into ``src``; returns the navigation."""
    (src / "cli").mkdir(parents=True)
    (src / "reference").mkdir()
    (src / "index.md").write_text(readme_page(), encoding="utf-8")
    if (HERE / "img").is_dir():
        shutil.copytree(HERE / "img", src / "img")
    guides = []
    for page, title in GUIDES.items():
        if (HERE / page).is_file():
            shutil.copy(HERE / page, src / page)
            guides.append({title: page})
    names = commands()
    (src / "cli" / "index.md").write_text(commands_index(names), encoding="utf-8")
    for name in names:
        (src / "cli" / f"{name}.md").write_text(command_page(name), encoding="utf-8")
    (src / "checks.md").write_text(checks_page(), encoding="utf-8")
    (src / "service-api.md").write_text(service_api_page(src), encoding="utf-8")
    reference = []
    for page, (title, targets) in REFERENCE.items():
        if all(_documentable(t) for t in targets):
            (src / "reference" / page).write_text(reference_page(title, targets), encoding="utf-8")
            reference.append({title: f"reference/{page}"})
    return {
        "nav": [
            {"Home": "index.md"},
            {"Guides": guides},
            {"Command line": [{"Overview": "cli/index.md"}, *({f"mcpwire {n}": f"cli/{n}.md"} for n in names)]},
            {"Checks catalogue": "checks.md"},
            {"Service API": "service-api.md"},
            {"Library reference": reference},
        ]
    }


#: a mkdocs hook: docstrings speak reStructuredText roles (``:class:`Client```), which Markdown
#: renders as ":class:" before the code; keep the code, drop the role and the leading "~"
HOOK = """
import re

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj):(<code>)~?")


def on_page_content(html, **kwargs):
    return _ROLE.sub(r"\\1", html)
"""


def mkdocs_config(src: Path, nav: dict[str, Any]) -> dict[str, Any]:
    hook = src.parent / "roles_hook.py"
    hook.write_text(HOOK, encoding="utf-8")
    return {
        "hooks": [str(hook)],
        "site_name": "mcpwire",
        "site_description": "A fast, structured Model Context Protocol client, host and toolkit on trio",
        "docs_dir": str(src),
        "strict": True,
        "theme": {"name": "material", "features": ["navigation.sections", "content.code.copy"]},
        "markdown_extensions": ["tables", "admonition", "toc", {"pymdownx.highlight": {}}, "pymdownx.superfences"],
        "plugins": [
            "search",
            {
                "mkdocstrings": {
                    "handlers": {
                        "python": {
                            "paths": [str(ROOT)],
                            "options": {
                                "docstring_style": "google",
                                "show_source": False,
                                "show_root_heading": True,
                                "members_order": "source",
                                "filters": ["!^_"],
                                "show_if_no_docstring": False,
                            },
                        }
                    }
                }
            },
        ],
        "validation": {"links": {"not_found": "warn", "absolute_links": "warn", "unrecognized_links": "warn"}},
        **nav,
    }


def build(out: Path) -> Path:
    """Build the site into ``out/site``; returns that folder."""
    if out.exists():
        shutil.rmtree(out)
    src = out / "src"
    src.mkdir(parents=True)
    config = mkdocs_config(src, assemble(src))
    config_file = out / "mkdocs.yml"
    # JSON is YAML: no YAML writer needed
    config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")
    site = out / "site"
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(config_file), "-d", str(site)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"docs: mkdocs build --strict failed:\n{done.stdout}{done.stderr}")
    return site


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python docs/build.py", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="where to build (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.out is None:
        with tempfile.TemporaryDirectory(prefix="mcpwire-docs-") as tmp:
            build(Path(tmp))
            print("docs: the site builds cleanly (use --out DIR to keep it)")
        return 0
    site = build(args.out.resolve())
    print(f"docs: {site / 'index.html'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

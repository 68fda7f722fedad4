"""``mcpwire fuzz`` over the installed real servers: findings per root cause, units that never ran,
time to the first finding and budget overrun; optionally the same with an earlier fuzzer.

    python bench/fuzz_findings.py                       # every server, 60 s each, this tree's fuzzer
    python bench/fuzz_findings.py --budget 30 --servers time,memory
    python bench/fuzz_findings.py --before /tmp/fuzz-before   # also the fuzzer copied there (see below)
    python bench/fuzz_findings.py --write-doc           # the table goes into docs/fuzz-findings.md

The servers are the ones ``tests/real/install_servers.sh`` installs: server-everything (stdio and
Streamable HTTP), -memory, -filesystem, mcp-server-time, -git, -sqlite and the Go mcp-cron, each
confined to a fresh temporary directory. This tree's fuzzer runs with its defaults (safe tools
only: read-only, or idempotent and not destructive, and not open-world). ``--before DIR`` runs the
``fuzz/`` package found in ``DIR/fuzz`` (e.g. ``git archive 1e1f7cf fuzz | tar -x -C DIR``) on the
same tools, named with ``--allow`` from this tree's run, so the two runs fuzz the same thing.

Writes ``bench/results/fuzz_findings.json`` (every figure and finding message) and prints a table;
``--write-doc`` replaces the generated table in ``docs/fuzz-findings.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from fuzz_common import run_fuzz, summarise

REPO = Path(__file__).resolve().parents[1]
SERVERS = REPO / ".cache" / "servers"
NPM = SERVERS / "npm" / "node_modules" / ".bin"
PY = SERVERS / "py" / "bin"
CRON = SERVERS / "npm" / "node_modules" / "mcp-cron-linux-amd64" / "bin" / "mcp-cron"
DOC = REPO / "docs" / "fuzz-findings.md"
BEGIN, END = "<!-- fuzz-findings-table:begin -->", "<!-- fuzz-findings-table:end -->"
NAMES = ("everything", "everything-http", "memory", "filesystem", "time", "git", "sqlite", "cron", "fastmcp")
FASTMCP = SERVERS / "fastmcp" / "bin" / "fastmcp"


@dataclass(frozen=True)
class Verdict:
    """Who a finding blames rightly: ``server`` (a true finding) or ``fuzzer`` (a false one),
    matched by server (``*``: any), oracle and a regular expression on the finding's message."""

    server: str
    oracle: str
    pattern: str
    who: str
    why: str

    def matches(self, server: str, finding: dict[str, Any]) -> bool:
        if self.server not in ("*", server) or self.oracle != finding.get("oracle"):
            return False
        return re.search(self.pattern, str(finding.get("message", ""))) is not None


#: Each finding of the runs, judged by hand against the spec text and the trace (replayed where it
#: was not plain). A finding no entry matches is counted as unjudged.
TS = r"^(everything|everything-http|memory|filesystem)$"
PY_SDK = r"^(time|git|sqlite|fastmcp)$"
VERDICTS: tuple[Verdict, ...] = (
    Verdict(
        "*",
        "leak",
        r"^the answer to tools/call 'get-env' holds the server's environment",
        "server",
        "server-everything's `get-env` returns the server's whole environment (the planted canary "
        "included): a secret-leaking tool, annotated read-only and safe to call.",
    ),
    Verdict(
        "*",
        "answer-deadline",
        r"^Any request the server cannot decode or validate \(a ping whose params are \[\]",
        "server",
        "The SDK drops, without an answer, any request it cannot decode or validate (an id above 2^53, "
        "params that are not an object, an unknown top-level member, a lone surrogate, deep nesting): "
        'JSON-RPC 2.0 §5 ("the Server MUST reply with a Response", -32600 or -32700 for what it cannot '
        "read). One cause, shown by the probe `ping` with `params: []`, never answered.",
    ),
    Verdict(
        "*",
        "answer-deadline",
        r"^Any line the server cannot (parse|decode) \(JSON cut short",
        "server",
        "After one line it cannot parse, the server answers nothing more (mcp-cron's stdio reader does not "
        "recover: FR-01 of the checker too). JSON-RPC 2.0 §5.1 asks for -32700, or at least for later "
        "requests to be answered.",
    ),
    Verdict(
        "*",
        "server-alive",
        r"^Any line the server cannot (parse|decode) \(JSON cut short",
        "server",
        "The process exits on a line it cannot decode: a denial of service by one line.",
    ),
    Verdict(
        "*",
        "answer-deadline",
        r"^A request whose id is above 2\^53 .* is never answered",
        "server",
        "F-1: the TypeScript SDK validates ids as safe JavaScript integers and drops the request silently "
        '(JSON-RPC 2.0 §5: "the Server MUST reply with a Response"; MCP allows any integer id).',
    ),
    Verdict(
        "*",
        "answer-deadline",
        r"^A request with an unknown top-level member .* is never answered",
        "server",
        "F-4: the message schema is strict about the envelope and the rejection is never answered "
        "(JSON-RPC 2.0 §5: an Invalid Request error is due).",
    ),
    Verdict(
        "*",
        "answer-deadline",
        r"^A request whose params are not an object .* is never answered",
        "server",
        "F-5: MCP params are objects; the request should be refused with -32602/-32600, not dropped.",
    ),
    Verdict(
        "*",
        "answer-deadline",
        r"^A string holding a lone surrogate .* is never answered",
        "server",
        "F-6: the Python SDK's parser refuses an unpaired surrogate escape (valid JSON, RFC 8259 §7) and "
        "drops the message without -32700.",
    ),
    Verdict(
        PY_SDK,
        "answer-deadline",
        r"^JSON nested \d+ levels deep is never answered",
        "server",
        "F-2: the Python SDK's parser has a nesting limit and drops the message without -32700.",
    ),
    Verdict(
        "cron",
        "one-answer",
        r"^A request whose id is above 2\^53 .* is answered with a different id",
        "server",
        "The Go server reads ids as doubles and answers 2^53+1 as 2^53: the answer can never be matched "
        '(JR-05: "Responses MUST include the same ID").',
    ),
)
#: the tools the fuzzer's safe default picks on each server (read from their annotations: read-only,
#: or idempotent and not destructive, and not open-world); the "before" run is limited to them
SAFE_TOOLS = {
    "everything": ["echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
                   "get-structured-content", "get-sum", "get-tiny-image", "trigger-long-running-operation"],
    "memory": ["read_graph", "search_nodes", "open_nodes"],
    "filesystem": ["read_file", "read_text_file", "read_media_file", "read_multiple_files", "create_directory",
                   "list_directory", "list_directory_with_sizes", "directory_tree", "search_files", "get_file_info",
                   "list_allowed_directories"],
    "time": ["get_current_time", "convert_time"],
    "git": ["git_status", "git_diff_unstaged", "git_diff_staged", "git_diff", "git_add", "git_log", "git_show",
            "git_branch"],
    "sqlite": [],
    "cron": [],
    "fastmcp": [],
}  # fmt: skip
SAFE_TOOLS["everything-http"] = SAFE_TOOLS["everything"]


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def target(name: str, tmp: Path) -> tuple[list[str], list[str]]:
    """(fuzz options, server command) of one server."""
    home = ["--env", f"HOME={tmp}"]
    if name == "everything":
        return home, [str(NPM / "mcp-server-everything"), "stdio"]
    if name == "everything-http":
        port = _port()
        return [*home, "--env", f"PORT={port}", f"http://127.0.0.1:{port}/mcp"], [
            str(NPM / "mcp-server-everything"),
            "streamableHttp",
        ]
    if name == "memory":
        return [*home, "--env", f"MEMORY_FILE_PATH={tmp / 'memory.jsonl'}"], [str(NPM / "mcp-server-memory")]
    if name == "filesystem":
        (tmp / "files").mkdir()
        (tmp / "files" / "a.txt").write_text("hello\n")
        return home, [str(NPM / "mcp-server-filesystem"), str(tmp / "files")]
    if name == "time":
        return home, [str(PY / "mcp-server-time"), "--local-timezone", "UTC"]
    if name == "git":
        repo = tmp / "repo"
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "--allow-empty",
             "-m", "first"],
            check=True,
        )  # fmt: skip
        return home, [str(PY / "mcp-server-git"), "--repository", str(repo)]
    if name == "sqlite":
        return home, [str(PY / "mcp-server-sqlite"), "--db-path", str(tmp / "db.sqlite")]
    if name == "fastmcp":
        config = tmp / "proxy.json"
        everything = str(NPM / "mcp-server-everything")
        config.write_text(json.dumps({"mcpServers": {"everything": {"command": everything, "args": []}}}))
        return home, [str(FASTMCP), "run", str(config), "--no-banner"]
    if name == "cron":
        return home, [str(CRON), "-transport", "stdio", "-db-path", str(tmp / "cron.db"), "-log-file",
                      str(tmp / "cron.log"), "-mcp-config-path", str(tmp / "none.json")]  # fmt: skip
    raise ValueError(f"unknown server {name!r}: one of {', '.join(NAMES)}")


def _installed(command: list[str]) -> bool:
    return Path(command[0]).exists()


def run_server(name: str, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"server": name}
    common = ["--seed", str(args.seed), "--time-budget", str(args.budget), "--deadline", str(args.deadline)]
    with tempfile.TemporaryDirectory(prefix=f"fuzz-bench-{name}-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "after").mkdir()
        options, command = target(name, tmp / "after")
        if not _installed(command):
            return {**out, "missing": command[0]}
        if not args.before_only:
            after = run_fuzz(
                f"{name} (after)",
                [*common, "-q", "--out", str(tmp / "after-out"), *options, "--", *command],
                budget=args.budget,
            )
            out["after"] = summarise(after)
        if args.before is not None:
            (tmp / "before").mkdir()
            options, command = target(name, tmp / "before")
            allow = [a for t in SAFE_TOOLS[name] or ["(none selected)"] for a in ("--allow", t)]
            before = run_fuzz(
                f"{name} (before)",
                [*common, "--out", str(tmp / "before-out"), *allow, *options, "--", *command],
                budget=args.budget,
                fuzz_src=args.before,
            )
            out["before"] = summarise(before)
    return out


def judge(server: str, summary: dict[str, Any]) -> dict[str, int]:
    """True, false and unjudged findings of one run (see :data:`VERDICTS`); also marks each
    finding of the summary with its verdict."""
    counts = {"true": 0, "false": 0, "unjudged": 0}
    for finding in summary.get("findings_full") or []:
        verdict = next((v for v in VERDICTS if v.matches(server, finding)), None)
        key = "unjudged" if verdict is None else ("true" if verdict.who == "server" else "false")
        counts[key] += 1
        finding["verdict"] = key if verdict is None else f"{key}: {verdict.why}"
    return counts


def _cell(summary: dict[str, Any] | None, server: str = "") -> list[str]:
    if summary is None:
        return ["-"] * 9
    if summary.get("error") and not summary.get("units"):
        return ["could not run", "", "", "", "", "", "", f"{summary['wall_s']:.0f} s", ""]
    first = summary["first_finding_s"]
    counts = judge(server, summary)
    judged = f"{counts['true']} / {counts['false']}" + (
        f" ({counts['unjudged']} unjudged)" if counts["unjudged"] else ""
    )
    return [
        str(summary["examples"]),
        str(summary["findings"]),
        str(summary["root_causes"]),
        str(summary["cluster_members"]),
        judged,
        str(len(summary["units_zero_examples"])) + f" of {summary['units']}",
        "-" if first is None else f"{first:.0f} s",
        f"{summary['wall_s']:.0f} s",
        f"{summary['overrun_pct']:+.0f} %",
    ]


def table(results: list[dict[str, Any]], budget: float) -> str:
    head = ["server", "run", "examples", "findings", "root causes", "failing examples", "true / false",
            "units with 0 examples", "first finding", "wall time", "overrun"]  # fmt: skip
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for result in results:
        if "missing" in result:
            rows.append(f"| {result['server']} | not installed |" + " |" * (len(head) - 2))
            continue
        for run in ("before", "after"):
            if run in result:
                rows.append("| " + " | ".join([result["server"], run, *_cell(result[run], result["server"])]) + " |")
    notes = [f"Budget {budget:g} s per server (`--time-budget`); wall time measured from outside the process."]
    for result in results:
        after = result.get("after") or {}
        if after.get("error") and not after.get("units"):
            notes.append(f"- {result['server']}: {after['error'][:200]}")
    return "\n".join(rows) + "\n\n" + "\n".join(notes) + "\n"


def write_doc(text: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    if BEGIN in doc and END in doc:
        head, _, rest = doc.partition(BEGIN)
        _, _, tail = rest.partition(END)
        doc = head + BEGIN + "\n" + text + END + tail
    else:
        doc += f"\n{BEGIN}\n{text}{END}\n"
    DOC.write_text(doc, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default=",".join(NAMES), help="comma-separated subset of " + ", ".join(NAMES))
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--deadline", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--before", type=Path, help="a directory holding an earlier fuzz/ package")
    parser.add_argument("--before-only", action="store_true", help="run only the earlier fuzzer (with --before)")
    parser.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "fuzz_findings.json")
    parser.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
    if args.before_only and args.before is None:
        parser.error("--before-only needs --before DIR")
    results = []
    for name in args.servers.split(","):
        print(f"{name}...", file=sys.stderr, flush=True)
        results.append(run_server(name.strip(), args))
        with contextlib.suppress(OSError):
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    text = table(results, args.budget)
    print(text)
    if args.write_doc:
        write_doc(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

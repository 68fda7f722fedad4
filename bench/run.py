"""Benchmark orchestrator: mcpwire against the official MCP Python SDK and a raw trio floor.

Runs every client workload in its own subprocess (so peak RSS and imports are isolated), against
the same stdlib echo server (``bench/echo_server.py``), collects the JSON each one prints, and
prints per-metric tables with ratios to the floor and to the SDK, the project's targets with
PASS/FAIL, and a final summary. A missed target is reported, not an error: the exit status is 0
unless the benchmark itself could not run.

The official SDK (PyPI ``mcp``, 2.x) is never installed into the project's environment: it lives
in a venv created on demand under ``$XDG_CACHE_HOME/mcpwire-bench/sdk-venv`` (default
``~/.cache/...``), and ``bench/sdk_client.py`` runs with that venv's python.

    python bench/run.py [--transport stdio|http] [--quick] [--json FILE] [--skip-sdk] [--refresh-sdk]
                        [--pin split|same|none] [--clients floor,mcpwire,mcpwire[legacy],sdk,sdk[legacy]]

Where the scheduler puts the client and the server decides the round trip: on this kind of
machine a sequential call takes about twice as long across two cores as on one, so unpinned
runs come out bimodal. By default the client is pinned to one CPU and the server to another
(``--pin split``, the usual situation of a client talking to a server on a multi-core machine);
``--pin same`` puts both on one CPU (the client's own CPU cost then shows fully in the latency);
``--pin none`` leaves it to the scheduler.

Run it from the repository root with the project's venv python (the one with mcpwire installed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from _common import ECHO_SERVER, HTTP_ECHO_SERVER, Params, median

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
#: where `python -c` runs: not the repository, whose mcpwire/ would shadow the installed one
NEUTRAL_CWD = BENCH
SDK_REQUIREMENT = "mcp>=2,<3"
WORKLOAD_TIMEOUT = 900.0
COLD_TIMEOUT = 120.0

# -- the clients ----------------------------------------------------------------------------------


@dataclass
class Client:
    """One client configuration: a workload script, a variant, and the python that runs it."""

    name: str
    script: str
    variant: str
    python: str
    sdk_pair: str | None = None  # the SDK variant its "x sdk" ratio is taken against (same era)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)  # the rounds' per-metric medians
    cold_ns: list[int] = field(default_factory=list)
    cold_process_ns: list[int] = field(default_factory=list)
    error: str | None = None

    def argv(self, params: Params, *extra: str) -> list[str]:
        return [self.python, str(BENCH / self.script), "--variant", self.variant, "--params", params.to_json(), *extra]


def make_clients(
    sdk_python: str | None, only: set[str] | None, transport: str = "stdio", python: str = sys.executable
) -> list[Client]:
    prefix = "http_" if transport == "http" else ""
    clients = [
        Client("floor", f"{prefix}floor_client.py", "legacy", python, sdk_pair="sdk[legacy]"),
        Client("mcpwire", f"{prefix}mcpwire_client.py", "auto", python, sdk_pair="sdk"),
        Client("mcpwire[legacy]", f"{prefix}mcpwire_client.py", "legacy", python, sdk_pair="sdk[legacy]"),
    ]
    if sdk_python is not None:
        clients += [
            Client("sdk", f"{prefix}sdk_client.py", "auto", sdk_python, sdk_pair="sdk"),
            Client("sdk[legacy]", f"{prefix}sdk_client.py", "legacy", sdk_python, sdk_pair="sdk[legacy]"),
        ]
    return [c for c in clients if only is None or c.name in only]


# -- the SDK's venv ---------------------------------------------------------------------------


def sdk_venv_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "mcpwire-bench" / "sdk-venv"


def ensure_installed_project() -> str | None:
    """A venv with this working tree installed as a user would have it (``pip install``, not
    editable: no import hook in every start-up, bytecode compiled at install), refreshed on every
    run; its python runs the floor and mcpwire clients, as the SDK's venv runs the SDK. ``None``
    (with a warning) when it cannot be built: then the current interpreter is used."""
    venv = sdk_venv_dir().parent / "project-venv"
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    try:
        if not python.exists():
            print(f"creating the project venv in {venv} ...", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([*pip, f"{ROOT}[http]"], check=True)
        print("installing the working tree into the project venv ...", file=sys.stderr)
        subprocess.run([*pip, "--no-deps", "--force-reinstall", str(ROOT)], check=True, cwd=sdk_venv_dir().parent)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"warning: cannot install the project into {venv} ({exc}); using {sys.executable}", file=sys.stderr)
        return None
    return str(python)


def _sdk_version(python: Path) -> str | None:
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m, mcp.client.stdio; print(m.version('mcp'))"],
        capture_output=True,
        text=True,
    )
    version = probe.stdout.strip()
    return version if probe.returncode == 0 and version.startswith("2.") else None


def ensure_sdk(refresh: bool) -> tuple[str, str] | None:
    """The SDK venv's python and the installed ``mcp`` version, creating the venv if needed."""
    venv = sdk_venv_dir()
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    try:
        if not python.exists():
            print(f"creating the SDK venv in {venv} ...", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        if refresh or _sdk_version(python) is None:
            print(f"installing {SDK_REQUIREMENT!r} into {venv} ...", file=sys.stderr)
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-U", SDK_REQUIREMENT],
                check=True,
            )
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"warning: cannot set up the SDK venv ({exc}); running without the SDK", file=sys.stderr)
        return None
    version = _sdk_version(python)
    if version is None:
        print("warning: the SDK venv has no usable mcp 2.x; running without the SDK", file=sys.stderr)
        return None
    return str(python), version


# -- running workloads ------------------------------------------------------------------------


def _run_json(argv: Sequence[str], timeout: float) -> dict[str, Any]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"exit status {proc.returncode}\n{tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _merge(rounds: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The first round's values, with every number replaced by its median over the rounds."""
    merged: dict[str, Any] = {}
    for key, value in rounds[0].items():
        if isinstance(value, dict):
            merged[key] = _merge([r[key] for r in rounds])
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            merged[key] = median([r[key] for r in rounds])
        else:
            merged[key] = value
    return merged


def run_workloads(clients: Sequence[Client], params: Params) -> None:
    """``params.rounds`` runs of each workload, interleaved across clients; medians per metric."""
    for round_no in range(1, params.rounds + 1):
        for client in clients:
            if client.error is not None:
                continue
            print(f"  workload  {client.name} (round {round_no}/{params.rounds}) ...", file=sys.stderr, flush=True)
            try:
                client.rounds.append(_run_json(client.argv(params), WORKLOAD_TIMEOUT))
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                client.error = str(exc)
                print(f"  FAILED: {client.name}: {exc}", file=sys.stderr)
    for client in clients:
        if client.error is None:
            client.result = _merge(client.rounds)


def run_cold_starts(clients: Sequence[Client], params: Params) -> None:
    """Fresh processes, interleaved across clients so that drift hits all of them alike.

    The workload reports the ``perf_counter_ns`` at which the tools list arrived; on Linux (and
    macOS) that clock is system-wide, so the time since this process launched it is the cold
    start seen from a fresh interpreter: startup, imports, server launch, handshake, tools/list.
    """
    print(f"  cold start x{params.cold_runs} ...", file=sys.stderr, flush=True)
    for _ in range(params.cold_runs):
        for client in clients:
            if client.error is not None:
                continue
            launched = time.perf_counter_ns()
            try:
                result = _run_json(client.argv(params, "--cold"), COLD_TIMEOUT)
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                client.error = f"cold start: {exc}"
                print(f"  FAILED: {client.name}: {exc}", file=sys.stderr)
                continue
            client.cold_ns.append(result["cold_start_ns"])
            client.cold_process_ns.append(result["tools_listed_at_ns"] - launched)


def run_connect(python: str, params: Params) -> dict[str, Any]:
    """``http_connect.py``: ``open_client(url)`` against a bare httpx handshake, in one process
    (target: at most 3 x the bare client); its table is printed as it comes."""
    rounds = 10 if params.rounds == 1 else 30
    print("\nconnecting over HTTP (median of", rounds, "connects, server already running):")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "connect.json"
        proc = subprocess.run(
            [python, str(BENCH / "http_connect.py"), "--rounds", str(rounds), "--json", str(out)],
            cwd=BENCH,
            timeout=WORKLOAD_TIMEOUT,
            check=False,
        )
        if not out.exists():
            return {"error": f"exit status {proc.returncode}"}
        figures: dict[str, Any] = json.loads(out.read_text())
    return figures


def run_first_connect(python: str, params: Params) -> dict[str, Any]:
    """``http_first_connect.py``: the first connect of a fresh process, mcpwire against a raw
    asyncio client (target: at most 3 x); its table is printed as it comes."""
    rounds = 5 if params.rounds == 1 else 15
    print()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "first_connect.json"
        proc = subprocess.run(
            [python, str(BENCH / "http_first_connect.py"), "--rounds", str(rounds), "--json", str(out)],
            cwd=BENCH,
            timeout=WORKLOAD_TIMEOUT,
            check=False,
        )
        if not out.exists():
            return {"error": f"exit status {proc.returncode}"}
        figures: dict[str, Any] = json.loads(out.read_text())
    return figures


@dataclass
class ImportCase:
    label: str
    python: str
    code: str
    samples: list[int] = field(default_factory=list)

    @property
    def ms(self) -> float:
        return median(self.samples) / 1e6


def run_imports(params: Params, sdk_python: str | None, python: str = sys.executable) -> dict[str, ImportCase]:
    """Wall time of ``python -c CODE`` in a fresh process, interpreter start-up included."""
    cases = {
        "python": ImportCase("python -c pass", python, "pass"),
        "trio": ImportCase("import trio", python, "import trio"),
        "floor": ImportCase("import trio, msgspec (the floor's imports)", python, "import trio, msgspec"),
        "mcpwire": ImportCase("import mcpwire", python, "import mcpwire"),
        "open_client": ImportCase("from mcpwire import open_client", python, "from mcpwire import open_client"),
    }
    if sdk_python is not None:
        cases["sdk_python"] = ImportCase("python -c pass (SDK venv)", sdk_python, "pass")
        cases["sdk"] = ImportCase(
            "from mcp import ClientSession; from mcp.client.stdio import stdio_client",
            sdk_python,
            "from mcp import ClientSession; from mcp.client.stdio import stdio_client",
        )
    print(f"  imports x{params.import_runs} ...", file=sys.stderr, flush=True)
    for case in cases.values():  # one untimed run each: fills the OS page cache and writes .pyc files
        subprocess.run([case.python, "-c", case.code], check=True, cwd=NEUTRAL_CWD)
    for _ in range(params.import_runs):
        for case in cases.values():
            start = time.perf_counter_ns()
            subprocess.run([case.python, "-c", case.code], check=True, cwd=NEUTRAL_CWD)
            case.samples.append(time.perf_counter_ns() - start)
    return cases


# -- reporting --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    value: Callable[[Client], float | None]
    digits: int = 1


def _get(*path: str) -> Callable[[Client], float | None]:
    def value(client: Client) -> float | None:
        node: Any = client.result
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return float(node)

    return value


def _cold(samples: Callable[[Client], list[int]]) -> Callable[[Client], float | None]:
    def value(client: Client) -> float | None:
        data = samples(client)
        return median(data) / 1e6 if data else None

    return value


def _rss_mib(client: Client) -> float | None:
    kib = _get("peak_rss_kib")(client)
    return None if kib is None else kib / 1024


def metrics(params: Params) -> list[Metric]:
    out = [
        Metric("latency_p50_us", "tools/call latency p50", "µs", False, _get("latency_p50_us")),
        Metric("latency_p99_us", "tools/call latency p99", "µs", False, _get("latency_p99_us")),
    ]
    for n in params.concurrency:
        out.append(
            Metric(f"calls_per_s_{n}", f"throughput, {n} in flight", "calls/s", True,
                   _get("throughput_calls_per_s", str(n)), digits=0)
        )  # fmt: skip
    out.append(Metric("cpu_us_sequential", "client CPU per call, sequential", "µs", False,
                      _get("cpu_per_call_us", "sequential")))  # fmt: skip
    top = max(params.concurrency)
    out.append(Metric(f"cpu_us_{top}", f"client CPU per call, {top} in flight", "µs", False,
                      _get("cpu_per_call_us", str(top))))  # fmt: skip
    out += [
        Metric("cold_start_ms", "cold start: server launch -> tools listed", "ms", False, _cold(lambda c: c.cold_ns)),
        Metric("cold_process_ms", "cold start: python launch -> tools listed", "ms", False,
               _cold(lambda c: c.cold_process_ns)),
        Metric("peak_rss_mib", "peak RSS of the client process", "MiB", False, _rss_mib),
        Metric("big_echo_mib_per_s", f"{params.big_bytes // 1024} KiB echo throughput", "MiB/s", True,
               _get("big_echo_mib_per_s")),
    ]  # fmt: skip
    return out


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _ratio(value: float | None, ref: float | None) -> float | None:
    if value is None or ref is None or ref == 0:
        return None
    return value / ref


def _fmt_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


Values = dict[str, dict[str, float | None]]  # client name -> metric key -> value


@dataclass
class Target:
    label: str
    client: str
    observed: str
    passed: bool | None  # None: could not be evaluated

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "FAIL", None: "n/a"}[self.passed]


def evaluate_targets(
    clients: dict[str, Client], values: Values, imports: dict[str, ImportCase], transport: str = "stdio"
) -> list[Target]:
    """The project's goals, for each mcpwire variant (``x sdk`` against the SDK in the same era).

    Over HTTP the goals are the latency and 1 MiB bounds against the HTTP floor; the stdio bounds
    against the SDK and the floor's RSS are still printed, marked ``info``.
    """
    http = transport == "http"
    info = "info: " if http else ""
    targets: list[Target] = []

    def ratio_target(label: str, client: Client, key: str, ref_name: str | None, bound: float, at_most: bool) -> None:
        ref = values.get(ref_name or "", {}).get(key)
        ratio = _ratio(values[client.name].get(key), ref)
        passed = None if ratio is None else (ratio <= bound if at_most else ratio >= bound)
        observed = f"{_fmt_ratio(ratio)} {ref_name}" if ratio is not None else f"no {ref_name or 'SDK'} result"
        targets.append(Target(label, client.name, observed, passed))

    for client in clients.values():
        if not client.name.startswith("mcpwire") or client.error is not None:
            continue
        sdk = client.sdk_pair if client.sdk_pair in clients else None
        if http:
            ratio_target("latency p50 <= 1.15x floor", client, "latency_p50_us", "floor", 1.15, True)
            ratio_target("1 MiB echo >= 0.95x floor MiB/s", client, "big_echo_mib_per_s", "floor", 0.95, False)
        else:
            ratio_target("latency p50 <= 1.2x floor", client, "latency_p50_us", "floor", 1.2, True)
        ratio_target(f"{info}calls/s at 64 in flight >= 10x SDK", client, "calls_per_s_64", sdk, 10.0, False)
        ratio_target(f"{info}cold start <= 0.25x SDK", client, "cold_start_ms", sdk, 0.25, True)
        ratio_target("  (same bound, from python launch)", client, "cold_process_ms", sdk, 0.25, True)
        ratio_target(f"{info}peak RSS <= 1.2x floor", client, "peak_rss_mib", "floor", 1.2, True)
        if not http:
            ratio_target("1 MiB echo >= 0.9x floor MiB/s", client, "big_echo_mib_per_s", "floor", 0.9, False)
    trio_ms = imports["trio"].ms
    for key, label in (
        ("mcpwire", "import mcpwire <= import trio + 30 ms"),
        ("open_client", "  (same bound, from mcpwire import open_client)"),
    ):
        delta = imports[key].ms - trio_ms
        targets.append(Target(label, "mcpwire", f"{delta:+.1f} ms vs trio", delta <= 30.0))
    return targets


def print_header(clients: Sequence[Client], params: Params, sdk_version: str | None, transport: str = "stdio") -> None:
    print()
    what = "Streamable HTTP echo server (127.0.0.1)" if transport == "http" else "stdio echo server"
    print(f"MCP client benchmark: one {what}, every client in its own process")
    print(
        f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs; "
        f"official SDK: {'mcp ' + sdk_version if sdk_version else 'skipped'}"
    )
    print(
        f"workload ({params.rounds} round(s), medians): {params.warmup_calls} warm-up calls, "
        f"{params.latency_calls} sequential calls, {params.throughput_calls} calls at each concurrency "
        f"{list(params.concurrency)}, {params.big_calls} x {params.big_bytes // 1024} KiB echoes; "
        f"{params.cold_runs} cold starts and {params.import_runs} import runs (medians)"
    )
    server_cpu = params.server_argv[-1] if "--cpu" in params.server_argv else None
    where = f"client on CPU {params.client_cpu}, server on CPU {server_cpu}" if server_cpu else "unpinned"
    print(f"placement: {where}")
    width = max(len(c.name) for c in clients) + 2
    for client in clients:
        if client.error is not None:
            print(f"  {client.name:<{width}} FAILED: {client.error.splitlines()[0]}")
        else:
            print(f"  {client.name:<{width}} negotiated {client.result.get('protocol_version', '?')}")


def print_metric_tables(clients: Sequence[Client], table: Sequence[Metric], values: Values) -> None:
    """One block per metric: each client's value, and its ratio to the floor and to its SDK pair."""
    width = max(len(c.name) for c in clients) + 2
    floor = values.get("floor", {})
    for metric in table:
        direction = "higher is better" if metric.higher_is_better else "lower is better"
        print(f"\n{metric.label} ({metric.unit}, {direction})")
        print(f"  {'client':<{width}} {'value':>12} {'x floor':>9} {'x sdk':>9}")
        for client in clients:
            value = values[client.name][metric.key]
            sdk = values.get(client.sdk_pair or "", {})
            print(
                f"  {client.name:<{width}} {_fmt(value, metric.digits):>12} "
                f"{_fmt_ratio(_ratio(value, floor.get(metric.key))):>9} "
                f"{_fmt_ratio(_ratio(value, sdk.get(metric.key))):>9}"
            )


def print_imports(imports: dict[str, ImportCase]) -> None:
    """Absolute times, net of the same interpreter's bare start-up, and relative to ``import trio``."""
    print("\nimport time: a fresh `python -c CODE`, interpreter start-up included (ms, median)")
    print(f"  {'code':<74} {'total':>8} {'net':>8} {'vs trio':>9}")
    trio_ms = imports["trio"].ms
    for case in imports.values():
        bare = imports["python" if case.python == imports["python"].python else "sdk_python"].ms
        print(f"  {case.label:<74} {case.ms:8.1f} {case.ms - bare:8.1f} {case.ms - trio_ms:+9.1f}")
    print("  (net: minus `python -c pass` of the same venv)")


def print_summary(
    clients: Sequence[Client], table: Sequence[Metric], values: Values, targets: Sequence[Target]
) -> None:
    print("\n" + "=" * 100)
    print("SUMMARY")
    print(f"  {'metric':<46}" + "".join(f"{c.name:>16}" for c in clients))
    for metric in table:
        row = f"  {metric.label + ' (' + metric.unit + ')':<46}"
        print(row + "".join(f"{_fmt(values[c.name][metric.key], metric.digits):>16}" for c in clients))
    print()
    print(f"  {'target':<50}{'client':>17}{'observed':>24}")
    for target in targets:
        print(f"  {target.label:<50}{target.client:>17}{target.observed:>24}    {target.verdict}")
    print("  (x sdk is taken in the same era: mcpwire against sdk, both auto-detecting (2026-07-28 here);")
    print("   floor and mcpwire[legacy] against sdk[legacy], all three on the initialize handshake)")


def report(
    clients: list[Client],
    params: Params,
    imports: dict[str, ImportCase],
    sdk_version: str | None,
    transport: str = "stdio",
) -> dict[str, Any]:
    """Prints everything and returns it as a JSON-ready dict."""
    table = metrics(params)
    values: Values = {c.name: {m.key: (m.value(c) if c.error is None else None) for m in table} for c in clients}
    targets = evaluate_targets({c.name: c for c in clients}, values, imports, transport)
    print_header(clients, params, sdk_version, transport)
    print_metric_tables(clients, table, values)
    print_imports(imports)
    print_summary(clients, table, values, targets)
    return {
        "transport": transport,
        "params": json.loads(params.to_json()),
        "environment": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "sdk_version": sdk_version,
        },
        "clients": {
            c.name: {
                "variant": c.variant,
                "error": c.error,
                "metrics": values[c.name],
                "rounds": c.rounds,
                "cold_start_ns": c.cold_ns,
                "cold_process_ns": c.cold_process_ns,
            }
            for c in clients
        },
        "imports": {
            key: {"code": case.code, "python": case.python, "median_ms": case.ms, "samples_ns": case.samples}
            for key, case in imports.items()
        },
        "targets": [
            {"target": t.label.strip(), "client": t.client, "observed": t.observed, "verdict": t.verdict}
            for t in targets
        ],
    }


def placement(pin: str, transport: str = "stdio") -> dict[str, Any]:
    """The server's argv and the client's CPU for a ``--pin`` choice."""
    server = (sys.executable, "-u", str(HTTP_ECHO_SERVER if transport == "http" else ECHO_SERVER))
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if pin == "none" or not cpus or (pin == "split" and len(cpus) < 2):
        return {"server_argv": server, "client_cpu": None}
    server_cpu = cpus[1] if pin == "split" else cpus[0]
    return {"server_argv": (*server, "--cpu", str(server_cpu)), "client_cpu": cpus[0]}


# -- main -------------------------------------------------------------------------------------


def compile_project() -> None:
    """Byte-compiles mcpwire in place (``--in-place``), as installing a package does: an editable
    install run with PYTHONDONTWRITEBYTECODE would otherwise compile every edited module again in
    every timed start-up (installed packages have their bytecode from pip)."""
    import compileall

    compileall.compile_dir(str(ROOT / "mcpwire"), quiet=1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default) or http: Streamable HTTP to bench/http_echo_server.py on 127.0.0.1",
    )
    parser.add_argument("--quick", action="store_true", help="fewer iterations: a smoke test, not a measurement")
    parser.add_argument("--json", metavar="FILE", help="also write every result as JSON to FILE")
    parser.add_argument("--skip-sdk", action="store_true", help="do not create, install or run the official SDK")
    parser.add_argument("--refresh-sdk", action="store_true", help="upgrade the SDK venv to the latest mcp 2.x first")
    parser.add_argument("--clients", help="comma-separated subset of: floor,mcpwire,mcpwire[legacy],sdk,sdk[legacy]")
    parser.add_argument(
        "--pin",
        choices=("split", "same", "none"),
        default="split",
        help="CPU placement: client and server on two CPUs (default), on one, or unpinned",
    )
    parser.add_argument("--rounds", type=int, help="workload runs per client (default: 5, 1 with --quick)")
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="run the floor and mcpwire with this interpreter (e.g. an editable install) instead of a fresh install",
    )
    args = parser.parse_args(argv)

    params = Params.quick() if args.quick else Params()
    params = replace(params, **placement(args.pin, args.transport))
    if args.rounds is not None:
        params = replace(params, rounds=max(1, args.rounds))
    sdk = None if args.skip_sdk else ensure_sdk(args.refresh_sdk)
    sdk_python, sdk_version = sdk if sdk is not None else (None, None)
    only = set(args.clients.split(",")) if args.clients else None
    python = None if args.in_place else ensure_installed_project()
    if python is None:
        python = sys.executable
        compile_project()
    clients = make_clients(sdk_python, only, args.transport, python)
    if not clients:
        parser.error("no client selected")

    print("running (each client in its own process) ...", file=sys.stderr)
    run_workloads(clients, params)
    run_cold_starts(clients, params)
    imports = run_imports(params, sdk_python, python)
    data = report(clients, params, imports, sdk_version, args.transport)
    if args.transport == "http":
        data["connect"] = run_connect(python, params)
        data["first_connect"] = run_first_connect(python, params)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
        print(f"\nresults written to {args.json}")
    return 0 if all(c.error is None for c in clients) else 1


if __name__ == "__main__":
    sys.exit(main())

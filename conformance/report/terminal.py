"""The terminal report and progress, drawn with rich.

Theory of operation: :func:`to_terminal` renders the summary of a run: what was checked, then the
problems grouped by check across revisions (one entry for SV-31 naming every revision it failed
in), sorted by area and id, each with its reason per revision and the rule's text; then why checks
were skipped, with counts and the option that would run them; then the totals and the verdict.
Every string that came from the server is cleaned for the terminal first
(:func:`mcpwire.redaction.clean_terminal`: no escape sequence, carriage return or bidi override
can reach the screen) and handed to rich as plain :class:`rich.text.Text`, never as markup. Colour
only when asked (a TTY); plain text otherwise, identical once the colour codes are removed.

:class:`ProgressBar` is the live view on a terminal: a bar with counts per outcome and the
revision and area of the last result; :func:`progress_line` is the one-line-per-check form for
logs (``-v`` off a terminal).
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Sequence
from types import TracebackType
from typing import IO, Final

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from mcpwire.redaction import clean_terminal, shorten

from ..evidence import ExchangeEntry
from ..model import Result, Run
from .views import LABELS, MARKS, Group, area_of, grouped, matrix, outcomes, skip_reasons, verdict_detail

__all__ = ["ProgressBar", "matrix_text", "progress_line", "to_terminal"]

#: rich styles of the outcomes
STYLES: Final = {
    "fail": "bold red",
    "error": "bold magenta",
    "warning": "yellow",
    "not_observed": "cyan",
    "expected_fail": "dim",
    "pass": "green",
    "skipped": "dim",
}
#: how much of one evidence payload ``-v`` shows
MAX_SHOWN_LINES: Final = 12
MAX_SHOWN_CHARS: Final = 1200

_SECTIONS: Final = (
    ("failures", ("fail",), "MUST rules broken; each fails the run"),
    ("errors", ("error",), "the check itself could not run; each fails the run"),
    (
        "warnings",
        ("warning",),
        "SHOULD/MAY rules broken (with --strict the SHOULD ones are failures), or deviations that prove no violation",
    ),
    ("not observed", ("not_observed",), "the server never exercised these rules; not counted as passes"),
    ("expected failures", ("expected_fail",), "listed in the baseline"),
)


def _c(text: str) -> str:
    return clean_terminal(text)


def _console(file: IO[str], *, color: bool, width: int | None = None) -> Console:
    return Console(
        file=file,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        width=width or 120,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=True,
    )


def progress_line(result: Result, *, color: bool = False) -> str:
    """One short line per finished check, for logs (ANSI colour only if asked)."""
    line = Text(f"[{_c(result.revision)}] ")
    line.append(f"{MARKS.get(result.status, result.status):5}", style=STYLES.get(result.status))
    line.append(f" {_c(result.id)}")
    return _render([line], color=color)


def _render(lines: Sequence[Text], *, color: bool) -> str:
    buffer = io.StringIO()
    console = _console(buffer, color=color)
    for line in lines:
        console.print(line, end="\n", overflow="ignore", crop=False)
    return buffer.getvalue().rstrip("\n")


def _pretty(text: str) -> list[str]:
    """A recorded payload as readable lines: indented JSON when it is JSON, else as it is."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict | list):
        try:
            text = json.dumps(value, indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):  # pragma: no cover - it was just decoded
            pass
    text = shorten(text, MAX_SHOWN_CHARS)
    lines = text.split("\n")
    if len(lines) > MAX_SHOWN_LINES:
        lines = [*lines[:MAX_SHOWN_LINES], f"… ({len(lines) - MAX_SHOWN_LINES} more lines)"]
    return lines


def _evidence(entries: Sequence[ExchangeEntry]) -> list[Text]:
    """The last messages of the evidence (``-v``): what was sent and received last, as JSON."""
    shown = [e for e in entries if e.direction in ("sent", "received", "stderr")][-4:]
    out: list[Text] = []
    for entry in shown:
        arrow = {"sent": "→ sent", "received": "← received", "stderr": "stderr"}[entry.direction]
        lines = _pretty(entry.text)
        out.append(Text(f"      {arrow}: {_c(lines[0])}", style="dim"))
        out += [Text(f"        {_c(line)}", style="dim") for line in lines[1:]]
    return out


def _group_lines(group: Group, width: int, *, verbose: bool) -> list[Text]:
    head = Text()
    head.append(f"{MARKS.get(group.status, group.status):5}", style=STYLES.get(group.status))
    head.append(f" {_c(group.id):{width}} {_c(group.level):6} {_c(group.area):12} ")
    head.append(f"{_c(group.title)}  [{_c(group.spec)}]")
    lines = [head]
    for revisions, reason in group.reasons:
        prefix = f"      {', '.join(revisions)}: "
        text_lines = _c(reason).split("\n") if reason else [""]
        lines.append(Text(prefix + text_lines[0]))
        lines += [Text(" " * len(prefix) + line) for line in text_lines[1:]]
    if group.quote:
        lines.append(Text(f'      spec: "{_c(group.quote)}"'))
    if verbose:
        lines += _evidence(group.results[-1].exchanges)
    return lines


def _header(run: Run) -> list[Text]:
    lines = [Text(f"mcpwire check: {_c(run.target)}")]
    accepted = set(run.accepted)
    checked = [r for r in run.revisions if r in accepted]
    lines.append(Text(f"revisions checked: {_c(', '.join(checked)) or 'none'}"))
    by_revision = {p.revision: p for p in run.probes}
    offered = [r for r in run.revisions if by_revision[r].counter_offer is not None and r not in accepted]
    if offered:
        lines.append(
            Text(
                f"counter-offered: {_c(', '.join(offered))} (answered with another version: only the version "
                "negotiation checks ran)"
            )
        )
    for p in run.probes:
        if p.violation is not None:
            lines.append(Text(f"handshake broken in {_c(p.revision)}: {_c(p.violation.check_id)} (see below)"))
    refused = [p.revision for p in run.probes if not p.accepted and p.violation is None and p.revision not in offered]
    if refused:
        lines.append(Text(f"not accepted: {_c(', '.join(refused))}"))
    return lines


def to_terminal(run: Run, *, color: bool = False, verbose: bool = False) -> str:
    """The human summary of ``run`` (see the module docstring); with ``verbose`` each problem also
    shows the last messages of its evidence, as JSON."""
    lines = _header(run)
    width = max((len(r.id) for r in run.results), default=5)
    for name, statuses, meaning in _SECTIONS:
        groups = grouped(run.results, statuses)
        if not groups:
            continue
        count = sum(len(g.revisions) for g in groups)
        checks = f"{len(groups)} check{'s' if len(groups) != 1 else ''}"
        lines += [Text(""), Text(f"{name} ({count} in {checks}): {meaning}", style="bold")]
        for group in groups:
            lines += _group_lines(group, width, verbose=verbose)
    if run.stale_baseline:
        lines += [Text(""), Text(f"stale baseline entries ({len(run.stale_baseline)}): these checks no longer fail")]
        lines += [Text(f"STALE {_c(entry)}: remove it from the baseline") for entry in run.stale_baseline]
    reasons = skip_reasons(run.results)
    if reasons:
        total = sum(r.count for r in reasons)
        lines += [Text(""), Text(f"skipped: {total} (--json says why for each)")]
        for reason in reasons:
            line = Text(f"  {reason.count:4}  {_c(reason.reason)}")
            if reason.hint:
                line.append(f": {reason.hint}", style="bold")
            lines.append(line)
    counts = run.counts()
    total_line = ", ".join(f"{counts.get(s, 0)} {LABELS.get(s, s)}" for s in outcomes(counts))
    lines += [Text(""), Text(f"totals: {total_line} ({len(run.results)} results)")]
    detail = verdict_detail(run)
    result = Text("result: ")
    result.append("PASS" if run.exit_code == 0 else "FAIL", style="bold green" if run.exit_code == 0 else "bold red")
    if detail:
        result.append(f" ({detail})")
    lines.append(result)
    return _render(lines, color=color)


class ProgressBar:
    """A live progress bar on ``stream`` (a terminal): done/total, counts per outcome, and the
    revision and area of the last result. Use as a context manager; feed it :meth:`plan` and
    :meth:`add`."""

    def __init__(self, stream: IO[str], *, label: str = "checking") -> None:
        self._console = Console(file=stream, force_terminal=True, highlight=False, markup=False, emoji=False)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            console=self._console,
            transient=True,
        )
        self._label = _c(label)
        self._task = self._progress.add_task(self._label, total=None, counts="probing")
        self._counts: Counter[str] = Counter()

    def __enter__(self) -> ProgressBar:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._progress.stop()

    def plan(self, total: int) -> None:
        self._progress.update(self._task, total=total, counts="")

    def add(self, result: Result) -> None:
        self._counts[result.status] += 1
        counts = " · ".join(f"{n} {LABELS.get(s, s)}" for s in outcomes(self._counts) if (n := self._counts[s]))
        where = f"{self._label} {_c(result.revision)} {_c(area_of(result))}"
        self._progress.update(self._task, advance=1, description=where, counts=counts)


def matrix_text(servers: Sequence[tuple[str, Run | str]], *, color: bool = False) -> str:
    """Several servers at a glance: one row per server, one column per area, each cell
    ``pass/fail/warn`` counts (fail includes errors, warn includes rules not observed)."""
    runs = [(name, outcome) for name, outcome in servers if isinstance(outcome, Run)]
    areas, table = matrix(runs)
    name_width = max([len(_c(name)) for name, _ in servers] + [6])
    widths = [max(len(area), 8) for area in areas]
    head = Text(f"{'server':{name_width}}  {'result':6}")
    for area, width in zip(areas, widths, strict=True):
        head.append(f"  {area:>{width}}")
    lines = [head]
    for name, outcome in servers:
        line = Text(f"{_c(name):{name_width}}  ")
        if not isinstance(outcome, Run):
            line.append("ERROR ", style=STYLES["error"])
            line.append(f"  not checked: {_c(outcome)}")
            lines.append(line)
            continue
        passed = outcome.exit_code == 0
        line.append(f"{'PASS' if passed else 'FAIL':6}", style="bold green" if passed else "bold red")
        for area, width in zip(areas, widths, strict=True):
            cell = table[name].get(area)
            text = "-" if cell is None else f"{cell['pass']}/{cell['fail']}/{cell['warn']}"
            style = None if cell is None else "red" if cell["fail"] else "yellow" if cell["warn"] else "green"
            line.append(f"  {text:>{width}}", style=style)
        lines.append(line)
    lines.append(Text("cells: pass/fail/warn per area (fail counts errors, warn counts rules not observed)"))
    return _render(lines, color=color)

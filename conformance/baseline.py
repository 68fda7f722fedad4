"""Expected-failures files: known failures turn green, stale entries fail the run.

Format: one entry per line, ``ID`` (every revision) or ``ID@REVISION``; ``#`` starts a comment.
"""

from __future__ import annotations

from pathlib import Path

from .runner import Run

__all__ = ["apply_baseline", "read_baseline"]


def read_baseline(path: Path) -> list[str]:
    """The entries of a baseline file.

    Raises:
        OSError: the file cannot be read.
    """
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            entries.append(entry)
    return entries


def apply_baseline(run: Run, entries: list[str]) -> None:
    """Mark failures (and warnings) listed in ``entries`` as expected; record stale entries."""
    used: set[str] = set()
    for result in run.results:
        if result.status not in ("fail", "warning"):
            continue
        for entry in entries:
            check_id, _, revision = entry.partition("@")
            if check_id == result.id and revision in ("", result.revision):
                result.status = "expected_fail"
                used.add(entry)
                break
    ran = {(r.id, r.revision) for r in run.results if r.status != "skipped"}

    def was_run(entry: str) -> bool:
        check_id, _, revision = entry.partition("@")
        return any(i == check_id and revision in ("", rev) for i, rev in ran)

    # an entry whose check did not run (--only, --revision) is neither used nor stale
    run.stale_baseline = [e for e in entries if e not in used and was_run(e)]

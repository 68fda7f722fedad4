"""The ``--json`` document: every result with its evidence, described by ``schema.json``.

Theory of operation: :func:`to_dict` builds the document as plain values from the run (the
evidence is already redacted: see :mod:`conformance.evidence`), :func:`to_json` encodes it. JSON
stays lossless: server text comes back exactly, and lone surrogates are written as ``\\uXXXX``
escapes so that the document is valid UTF-8. Values the server sent as structures (capabilities,
``serverInfo``) were bounded in depth when recorded, so encoding never recurses without end.

The document is described by :data:`JSON_SCHEMA` (JSON Schema 2020-12), the data file
``schema.json`` shipped beside this module; ``schema_version`` changes only when a field is
removed or changes meaning, never when one is added. :func:`multi_to_dict` is the document of a
run over several servers (``--config`` without a name): one report per server.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from importlib import resources
from typing import Any, Final

from ..model import Probe, Result, Run
from .views import area_of, area_order, counts_of, generator_version, server_info, spec_link, verdict

__all__ = [
    "FORMAT_NAME",
    "JSON_SCHEMA",
    "MULTI_FORMAT_NAME",
    "SCHEMA_VERSION",
    "dumps",
    "multi_exit_code",
    "multi_to_dict",
    "to_dict",
    "to_json",
]

#: Version of the JSON document; bumped only when a field is removed or changes meaning.
SCHEMA_VERSION: Final = 1
FORMAT_NAME: Final = "mcpwire-check-report"
MULTI_FORMAT_NAME: Final = "mcpwire-check-multi-report"
_SURROGATE = re.compile("[\ud800-\udfff]")


def _load_schema() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


#: JSON Schema (2020-12) of the ``--json`` document (single server or several).
JSON_SCHEMA: Final[dict[str, Any]] = _load_schema()


def _result_dict(r: Result) -> dict[str, Any]:
    return {
        "id": r.id,
        "title": r.title,
        "level": r.level,
        "revision": r.revision,
        "area": area_of(r),
        "tags": list(r.tags),
        "outcome": r.status,
        "reason": r.message,
        "spec": {"ref": r.spec, "quote": r.quote, "url": spec_link(r)},
        "duration_s": round(r.duration_s, 6),
        "transport": r.transport,
        "exchange": [e.to_dict() for e in r.exchanges],
        "http": list(r.http_exchanges),
    }


def _probe_dict(p: Probe) -> dict[str, Any]:
    out: dict[str, Any] = {
        "revision": p.revision,
        "accepted": p.accepted,
        "capabilities": p.capabilities,
        "detail": p.detail,
    }
    info = server_info(p)
    if info:
        out["server_info"] = info
    if p.counter_offer is not None:
        out["counter_offer"] = p.counter_offer
    if p.violation is not None:
        out["violation"] = {"check_id": p.violation.check_id, "message": p.violation.message}
    return out


def to_dict(run: Run) -> dict[str, Any]:
    """The JSON document as Python values (see :data:`JSON_SCHEMA`)."""
    by_area: dict[str, list[Result]] = defaultdict(list)
    for r in run.results:
        by_area[area_of(r)].append(r)
    return {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "generator": {"name": "mcpwire check", "version": generator_version()},
        "target": run.target,
        "verdict": verdict(run),
        "exit_code": run.exit_code,
        "revisions": list(run.revisions),
        "probes": [_probe_dict(p) for p in run.probes],
        "total": len(run.results),
        "counts": run.counts(),
        "areas": [
            {"area": area, "counts": counts_of(results)}
            for area, results in sorted(by_area.items(), key=lambda kv: area_order(kv[0]))
        ],
        "stale_baseline": list(run.stale_baseline),
        "processes": {"started": run.processes_started, "reused": run.sessions_reused},
        "results": [_result_dict(r) for r in run.results],
    }


def multi_to_dict(servers: Sequence[tuple[str, Run | str]]) -> dict[str, Any]:
    """The document of several servers: ``(name, run)`` for each checked one, ``(name, why)`` for
    one that could not be checked."""
    entries: list[dict[str, Any]] = []
    for name, outcome in servers:
        if isinstance(outcome, Run):
            entries.append({"name": name, "outcome": verdict(outcome), "report": to_dict(outcome)})
        else:
            entries.append({"name": name, "outcome": "not checked", "error": outcome})
    code = multi_exit_code(servers)
    return {
        "format": MULTI_FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "generator": {"name": "mcpwire check", "version": generator_version()},
        "verdict": "pass" if code == 0 else "fail",
        "exit_code": code,
        "servers": entries,
    }


def multi_exit_code(servers: Sequence[tuple[str, Run | str]]) -> int:
    """2 when a server could not be checked at all, else 1 when a run failed, else 0."""
    if any(not isinstance(outcome, Run) for _, outcome in servers):
        return 2
    return max((outcome.exit_code for _, outcome in servers if isinstance(outcome, Run)), default=0)


def dumps(document: dict[str, Any]) -> str:
    """A document as indented UTF-8 text, valid even for lone surrogates."""
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    # a lone surrogate can only sit inside a JSON string, where its escape means the same
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def to_json(run: Run) -> str:
    """The ``--json`` document: indented, UTF-8 text, valid even for lone surrogates."""
    return dumps(to_dict(run))

"""``/checks``: run ``mcpwire check`` on a configured server from the console, see the same HTML
report the CLI writes (embedded), and the history of runs kept in the store.

Theory of operation: a run starts a fresh instance of the server from its configuration (the
checker's own process, not the host's connection) and runs in the service's nursery, so the form
answers at once; the run is stored as ``running`` first, then with its verdict, counts, the JSON
report and the HTML page (:func:`mcpwire.conformance.report.to_html`, as ``--html`` writes it).
The run's page lists the results from the JSON report (what failed first, each opening to its
reason and the rule it checks); the HTML page is served on its own at ``/checks/{id}/report`` in
a sandbox (an opaque origin: its own script runs, but it cannot reach the console or its
cookies), linked from the run's page rather than framed in it (no scrolling inside the page's
scrolling).
"""

from __future__ import annotations

import importlib
import logging
import secrets
import time
import urllib.parse
from typing import Any, Final

from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ...host import HostConfig
from ...protocol.types import JSONValue
from ..identity import Role
from ..problems import FieldError
from ..store import CheckRunRow
from .web import Refusal, View, page

__all__ = ["routes"]

log = logging.getLogger("mcpwire.service.console")

#: runs listed on the page
HISTORY: Final = 50
#: the report page's own policy is in its <meta>; this adds the sandbox and who may frame it
REPORT_CSP: Final = "sandbox allow-scripts; frame-ancestors 'self'"
TOOL_POLICIES: Final = ("none", "read-only")


async def _run_check(service: Any, row: CheckRunRow, config: Any, tools: str, only: list[str]) -> None:
    """Runs the checker and stores what came of it (never raises but for cancellation)."""
    status: str = "error"
    summary: dict[str, JSONValue] = {}
    report: dict[str, JSONValue] | None = None
    try:
        context, reports, views, runner, targets = (
            importlib.import_module(f"mcpwire.conformance.{name}")
            for name in ("context", "report", "report.views", "runner", "targets")
        )
        ((_, target),) = targets.config_targets(HostConfig(servers=(config,)))
        if isinstance(target, str):
            summary = {"detail": target}
        else:
            outcome = await runner.run(target, tools=context.ToolPolicy(tools), only=only)
            if not outcome.judged:
                summary = {"detail": "the server accepted no protocol revision"}
            else:
                status = views.verdict(outcome)
                summary = {
                    "detail": views.verdict_detail(outcome),
                    "counts": outcome.counts(),
                    "revisions": list(outcome.revisions),
                    "exitCode": outcome.exit_code,
                }
                report = {"json": reports.to_dict(outcome), "html": reports.to_html(outcome)}
    except OSError as exc:
        summary = {"detail": f"cannot start or reach the server: {exc}"}
    except Exception as exc:  # a bug in the checker must not end the service
        log.error("the check of %r failed unexpectedly", row.target, exc_info=exc)
        summary = {"detail": "the check failed unexpectedly; the service log has the details"}
    finished = CheckRunRow(
        id=row.id,
        target=row.target,
        started_at=row.started_at,
        finished_at=time.time(),
        status=status,
        summary=summary,
        report=report,
    )
    await service.store.put_check_run(finished)


async def checks_page(view: View) -> Response:
    runs = await view.service.store.check_runs(limit=HISTORY)
    servers = [i.name for i in view.service.host.list()]
    # the server the form shows: the one asked for, else the one checked last
    chosen = view.request.query_params.get("server") or (runs[0].target if runs else "")
    context = {
        "runs": runs,
        "servers": servers,
        "chosen": chosen if chosen in servers else "",
        "running": any(r.status == "running" for r in runs),
        "policies": TOOL_POLICIES,
    }
    if view.htmx and view.request.headers.get("hx-target") == "check-runs":
        return view.render("fragments/check_runs.html", **context)
    return view.render("checks.html", **context)


async def start_check(view: View) -> Response:
    assert view.form is not None
    name = view.form.get("server")
    tools = view.form.get("tools", "none")
    only = [c.strip() for c in view.form.get("only").replace(",", " ").split() if c.strip()]
    info = next((i for i in view.service.host.list() if i.name == name), None)
    if info is None:
        error = FieldError(location="body", path="$.server", message=view.gettext("not a configured server"))
        raise Refusal(422, view.gettext("There is no server named %(name)r.", name=name), errors=[error])
    if tools not in TOOL_POLICIES:
        error = FieldError(location="body", path="$.tools", message=view.gettext("expected none or read-only"))
        raise Refusal(422, view.gettext("There is no tool-call policy %(name)r.", name=tools), errors=[error])
    row = CheckRunRow(id="chk_" + secrets.token_hex(6), target=name, started_at=time.time(), status="running")
    await view.service.store.put_check_run(row)
    view.service.start_soon(_run_check, view.service, row, info.config, tools, only)
    if view.htmx:
        runs = await view.service.store.check_runs(limit=HISTORY)
        return view.render("fragments/check_runs.html", runs=runs, running=True)
    return RedirectResponse("/checks?" + urllib.parse.urlencode({"server": name}), status_code=303)


async def _stored(view: View) -> CheckRunRow:
    run_id = view.request.path_params["id"]
    row: CheckRunRow | None = await view.service.store.check_run(run_id)
    if row is None:
        raise Refusal(404, view.gettext("There is no check run %(id)r.", id=run_id))
    return row


#: the order results are listed in: what needs a look first
_OUTCOME_ORDER: Final = ("fail", "error", "warning", "not_observed", "expected_fail", "skipped", "pass")


def _results(row: CheckRunRow) -> list[dict[str, Any]]:
    """The report's results, what failed first (the JSON report: the checker's own document)."""
    document = (row.report or {}).get("json")
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list):
        return []
    kept = [r for r in results if isinstance(r, dict)]
    rank = {outcome: index for index, outcome in enumerate(_OUTCOME_ORDER)}
    return sorted(kept, key=lambda r: rank.get(str(r.get("outcome")), len(rank)))


async def check_run_page(view: View) -> Response:
    row = await _stored(view)
    counts = row.summary.get("counts") if isinstance(row.summary.get("counts"), dict) else {}
    return view.render("check.html", run=row, results=_results(row), counts=counts, order=_OUTCOME_ORDER)


async def check_report(view: View) -> Response:
    row = await _stored(view)
    html = (row.report or {}).get("html")
    if not isinstance(html, str):
        raise Refusal(404, view.gettext("The check run %(id)s has no report.", id=row.id))
    response = HTMLResponse(html)
    response.headers["Content-Security-Policy"] = REPORT_CSP
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    return response


def routes() -> list[BaseRoute]:
    return [
        Route("/checks", page(checks_page), methods=["GET"]),
        Route("/checks", page(start_check, role=Role.ADMIN), methods=["POST"]),
        Route("/checks/{id}", page(check_run_page), methods=["GET"]),
        Route("/checks/{id}/report", page(check_report), methods=["GET"]),
    ]

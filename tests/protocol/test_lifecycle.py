"""EraDetector: every path from the probe to a verdict (LC-09..LC-12, LC-40..LC-45)."""

from __future__ import annotations

import pytest

from mcpwire.protocol import EraDetector, SessionState
from mcpwire.protocol.lifecycle import Decided, Failed, Restart, SendDiscover, SendInitialize, UseSSE
from mcpwire.protocol.types import DiscoverResult, InitializeResult, ServerCapabilities
from mcpwire.protocol.versions import LATEST, LATEST_LEGACY, LEGACY_REVISIONS, Era

OLD = "2024-11-05"


def discovered(*versions: str) -> DiscoverResult:
    return DiscoverResult(supported_versions=list(versions), capabilities=ServerCapabilities(tools={}))


def initialized(version: str) -> InitializeResult:
    return InitializeResult(protocol_version=version)


def probing(mode: str = "auto") -> EraDetector:
    detector = EraDetector(mode)
    assert detector.start() == [SendDiscover(LATEST)]
    return detector


def after_probe_timeout() -> EraDetector:
    detector = probing()
    assert detector.on_probe_timeout() == [SendInitialize(LATEST_LEGACY)]
    assert detector.discover_pending and detector.initialize_pending
    return detector


def test_session_states() -> None:
    assert [s.name for s in SessionState] == ["IDLE", "CONNECTING", "READY", "CLOSING", "CLOSED"]


# -- the probe is answered ---------------------------------------------------------------------


def test_discover_result_means_modern() -> None:
    """LC-40: a DiscoverResult means modern; no initialize is sent."""
    detector = probing()
    result = discovered(LATEST)
    assert detector.on_discover_result(result) == [Decided(Era.MODERN, LATEST, discover=result)]
    assert detector.done and not detector.initialize_sent


def test_discover_result_listing_more_versions_picks_ours() -> None:
    detector = probing()
    result = discovered("2099-01-01", LATEST, LATEST_LEGACY)
    (verdict,) = detector.on_discover_result(result)
    assert verdict == Decided(Era.MODERN, LATEST, discover=result)


@pytest.mark.parametrize("legacy", LEGACY_REVISIONS)
def test_discover_result_listing_only_legacy_initializes_with_it(legacy: str) -> None:
    """A dual-era server that lists only legacy revisions: initialize with the one it named."""
    detector = probing()
    assert detector.on_discover_result(discovered(legacy)) == [SendInitialize(legacy)]
    assert detector.on_initialize_result(initialized(legacy)) == [
        Decided(Era.LEGACY, legacy, initialize=initialized(legacy))
    ]


def test_discover_result_listing_nothing_initializes_with_the_latest_legacy() -> None:
    detector = probing()
    assert detector.on_discover_result(discovered()) == [SendInitialize(LATEST_LEGACY)]


def test_discover_result_listing_only_unknown_versions_fails_unsupported() -> None:
    detector = probing()
    (verdict,) = detector.on_discover_result(discovered("2099-01-01", "2098-01-01"))
    assert isinstance(verdict, Failed)
    assert verdict.unsupported and verdict.offered == ("2099-01-01", "2098-01-01")
    assert "server/discover listed no modern revision mcpwire speaks" in verdict.reason
    assert detector.done


@pytest.mark.parametrize("code", [-32601, -32602, 0, -32000, -32600, -32603, -32002, 1, 42])
def test_any_discover_error_falls_back_to_initialize(code: int) -> None:
    """LC-41: "The fallback MUST NOT be keyed to one specific error code"."""
    detector = probing()
    assert detector.on_discover_error(code, "nope", None) == [SendInitialize(LATEST_LEGACY)]
    assert detector.on_initialize_result(initialized(LATEST_LEGACY)) == [
        Decided(Era.LEGACY, LATEST_LEGACY, initialize=initialized(LATEST_LEGACY))
    ]


@pytest.mark.parametrize("data", [None, {}, {"supported": "2026-07-28"}, {"supported": [1, 2]}, ["2026-07-28"]])
def test_unsupported_version_error_without_a_usable_list_is_any_other_error(data: object) -> None:
    """LC-40: only a *recognised* -32022 (with ``data.supported``) means modern."""
    detector = probing()
    assert detector.on_discover_error(-32022, "unsupported", data) == [SendInitialize(LATEST_LEGACY)]


def test_unsupported_version_with_a_modern_version_retries_discover() -> None:
    """LC-24/LC-40: a recognised modern error: retry with a supported version, "Do not fall back"."""
    detector = probing()
    data = {"supported": ["2099-01-01", LATEST], "requested": LATEST}
    assert detector.on_discover_error(-32022, "Unsupported protocol version", data) == [SendDiscover(LATEST)]
    assert detector.discover_pending and not detector.initialize_sent
    result = discovered(LATEST)
    assert detector.on_discover_result(result) == [Decided(Era.MODERN, LATEST, discover=result)]


def test_unsupported_version_retries_only_once_per_version() -> None:
    detector = probing()
    data = {"supported": [LATEST]}
    assert detector.on_discover_error(-32022, "unsupported", data) == [SendDiscover(LATEST)]
    (verdict,) = detector.on_discover_error(-32022, "unsupported", data)
    assert isinstance(verdict, Failed)
    assert verdict.unsupported and verdict.offered == (LATEST,)
    assert not detector.initialize_sent


@pytest.mark.parametrize("legacy", LEGACY_REVISIONS)
def test_unsupported_version_listing_only_legacy_initializes_with_it(legacy: str) -> None:
    detector = probing()
    assert detector.on_discover_error(-32022, "unsupported", {"supported": [legacy]}) == [SendInitialize(legacy)]


def test_unsupported_version_listing_only_unknown_versions_fails() -> None:
    detector = probing()
    (verdict,) = detector.on_discover_error(-32022, "unsupported", {"supported": ["2099-01-01"]})
    assert verdict == Failed(
        "server/discover answered error -32022: unsupported", offered=("2099-01-01",), unsupported=True
    )


# -- the probe times out -----------------------------------------------------------------------


def test_probe_timeout_sends_initialize_and_keeps_the_probe_in_play() -> None:
    """LC-40/LC-45: silence means legacy, but a slow modern server may still answer the probe."""
    detector = after_probe_timeout()
    assert not detector.done


def test_late_discover_result_after_timeout_decides_modern() -> None:
    detector = after_probe_timeout()
    result = discovered(LATEST)
    assert detector.on_discover_result(result) == [Decided(Era.MODERN, LATEST, discover=result)]
    # The initialize answer that follows is dropped (JR-06).
    assert detector.on_initialize_result(initialized(LATEST_LEGACY)) == []
    assert detector.on_initialize_error(-32601, "Method not found", None) == []


def test_initialize_result_after_timeout_decides_legacy() -> None:
    detector = after_probe_timeout()
    init = initialized(LATEST_LEGACY)
    assert detector.on_initialize_result(init) == [Decided(Era.LEGACY, LATEST_LEGACY, initialize=init)]
    # The probe's late answer, of either kind, is dropped (JR-06).
    assert detector.on_discover_result(discovered(LATEST)) == []
    assert detector.on_discover_error(-32601, "Method not found", None) == []


def test_modern_server_rejecting_initialize_after_timeout_still_decides_modern() -> None:
    """A modern server answers the extra initialize with an error; the probe's answer decides."""
    detector = after_probe_timeout()
    assert detector.on_initialize_error(-32601, "Method not found", None) == []
    result = discovered(LATEST)
    assert detector.on_discover_result(result) == [Decided(Era.MODERN, LATEST, discover=result)]


def test_discover_error_after_timeout_waits_for_initialize() -> None:
    detector = after_probe_timeout()
    assert detector.on_discover_error(-32601, "Method not found", None) == []
    init = initialized(OLD)
    assert detector.on_initialize_result(init) == [Decided(Era.LEGACY, OLD, initialize=init)]


def test_probe_timeout_is_reported_once() -> None:
    detector = after_probe_timeout()
    assert detector.on_probe_timeout() == []


def test_probe_timeout_after_a_verdict_does_nothing() -> None:
    detector = probing()
    detector.on_discover_result(discovered(LATEST))
    assert detector.on_probe_timeout() == []


def test_bogus_initialize_version_after_timeout_waits_for_the_probe() -> None:
    detector = after_probe_timeout()
    assert detector.on_initialize_result(initialized("1999-01-01")) == []
    result = discovered(LATEST)
    assert detector.on_discover_result(result) == [Decided(Era.MODERN, LATEST, discover=result)]


@pytest.mark.parametrize("first", ["initialize-error", "bogus-version"])
def test_both_answers_failing_after_timeout_is_a_verdict(first: str) -> None:
    """Once neither request is in flight the detector must fail, not stall until connect_timeout."""
    detector = after_probe_timeout()
    if first == "initialize-error":
        assert detector.on_initialize_error(-32600, "Invalid Request", None) == []
    else:
        assert detector.on_initialize_result(initialized("1999-01-01")) == []
    actions = detector.on_discover_error(-32601, "Method not found", None)
    assert len(actions) == 1 and isinstance(actions[0], Failed)
    assert detector.done


# -- the server exits --------------------------------------------------------------------------


def test_exit_after_probe_restarts_and_initializes() -> None:
    """LC-45: a legacy server that exits on the unexpected request: restart, straight to initialize."""
    detector = probing()
    assert detector.on_exit() == [Restart(), SendInitialize(LATEST_LEGACY)]
    assert detector.restarted and not detector.discover_pending
    init = initialized(LATEST_LEGACY)
    assert detector.on_initialize_result(init) == [Decided(Era.LEGACY, LATEST_LEGACY, initialize=init)]


def test_second_exit_fails() -> None:
    detector = probing()
    detector.on_exit()
    assert detector.on_exit() == [Failed("the server exited during the handshake")]
    assert detector.done
    assert detector.on_exit() == []


def test_exit_after_probe_timeout_restarts_and_initializes() -> None:
    """LC-45: the exit is still most likely caused by the probe, which the server read first."""
    detector = after_probe_timeout()
    assert detector.on_exit() == [Restart(), SendInitialize(LATEST_LEGACY)]


def test_exit_after_a_verdict_does_nothing() -> None:
    detector = probing()
    detector.on_discover_result(discovered(LATEST))
    assert detector.on_exit() == []


# -- initialize answers ------------------------------------------------------------------------


@pytest.mark.parametrize("version", LEGACY_REVISIONS)
def test_counter_offer_of_any_legacy_version_is_accepted(version: str) -> None:
    """LC-11: the server may answer with another version it supports; speak that one."""
    detector = EraDetector("legacy")
    assert detector.start() == [SendInitialize(LATEST_LEGACY)]
    init = initialized(version)
    assert detector.on_initialize_result(init) == [Decided(Era.LEGACY, version, initialize=init)]


@pytest.mark.parametrize("version", ["1999-01-01", LATEST, "", "2025-11-25-draft"])
def test_bogus_initialize_version_fails_unsupported(version: str) -> None:
    """LC-10/AMB-01: a version the client does not offer means disconnect."""
    detector = probing()
    detector.on_discover_error(-32601, "Method not found", None)
    (verdict,) = detector.on_initialize_result(initialized(version))
    assert isinstance(verdict, Failed)
    assert verdict.unsupported and verdict.offered == (version,)
    assert f"initialize answered protocolVersion {version!r}, which mcpwire does not offer" in verdict.reason


def test_initialize_error_with_supported_retries_that_version_once() -> None:
    """LC-12/AMB-02: the error form of a counter-offer."""
    detector = EraDetector("legacy")
    detector.start()
    data = {"supported": ["2099-01-01", "2025-03-26"], "requested": LATEST_LEGACY}
    assert detector.on_initialize_error(-32602, "Unsupported protocol version", data) == [SendInitialize("2025-03-26")]
    (verdict,) = detector.on_initialize_error(-32602, "Unsupported protocol version", data)
    assert isinstance(verdict, Failed)
    assert not verdict.unsupported
    init = initialized("2025-03-26")
    detector = EraDetector("legacy")
    detector.start()
    detector.on_initialize_error(-32602, "Unsupported protocol version", data)
    assert detector.on_initialize_result(init) == [Decided(Era.LEGACY, "2025-03-26", initialize=init)]


def test_initialize_error_without_a_usable_version_fails() -> None:
    detector = probing()
    detector.on_discover_error(-32601, "Method not found", None)
    (verdict,) = detector.on_initialize_error(-32603, "Internal error", {"supported": ["2099-01-01"]})
    assert verdict == Failed(
        "server/discover answered error -32601: Method not found; initialize answered error -32603: Internal error"
    )


def test_failure_reason_lists_every_step() -> None:
    detector = probing()
    detector.on_probe_timeout()
    detector.on_discover_error(-32601, "Method not found", None)
    (verdict,) = detector.on_initialize_error(-32600, "Bad", None)
    assert verdict == Failed(
        "server/discover got no answer within the probe timeout; "
        "server/discover answered error -32601: Method not found; "
        "initialize answered error -32600: Bad"
    )


# -- forced modes and configuration ------------------------------------------------------------


def test_forced_legacy_never_probes() -> None:
    detector = EraDetector("legacy")
    assert detector.start() == [SendInitialize(LATEST_LEGACY)]
    assert not detector.discover_pending
    assert detector.on_probe_timeout() == []
    assert detector.on_exit() == [Failed("the server exited during the handshake")]


def test_forced_legacy_offers_the_configured_version() -> None:
    detector = EraDetector("legacy", legacy_versions=(OLD,))
    assert detector.start() == [SendInitialize(OLD)]
    (verdict,) = detector.on_initialize_result(initialized(LATEST_LEGACY))
    assert isinstance(verdict, Failed) and verdict.unsupported


def test_forced_modern_probes_and_never_initializes() -> None:
    detector = EraDetector("modern")
    assert detector.start() == [SendDiscover(LATEST)]
    assert detector.on_probe_timeout() == []
    (verdict,) = detector.on_discover_error(-32601, "Method not found", None)
    assert verdict == Failed("server/discover answered error -32601: Method not found")
    assert not detector.initialize_sent


def test_forced_modern_with_a_legacy_only_discover_result_fails_unsupported() -> None:
    detector = EraDetector("modern")
    detector.start()
    (verdict,) = detector.on_discover_result(discovered(LATEST_LEGACY))
    assert isinstance(verdict, Failed)
    assert verdict.unsupported and verdict.offered == (LATEST_LEGACY,)


def test_forced_modern_with_legacy_only_unsupported_version_error_fails() -> None:
    detector = EraDetector("modern")
    detector.start()
    (verdict,) = detector.on_discover_error(-32022, "unsupported", {"supported": [LATEST_LEGACY]})
    assert isinstance(verdict, Failed) and verdict.unsupported


def test_forced_modern_exit_fails() -> None:
    detector = EraDetector("modern")
    detector.start()
    assert detector.on_exit() == [Failed("the server exited during the handshake")]


def test_forced_modern_decides_on_a_discover_result() -> None:
    detector = EraDetector("modern")
    detector.start()
    result = discovered(LATEST)
    assert detector.on_discover_result(result) == [Decided(Era.MODERN, LATEST, discover=result)]


@pytest.mark.parametrize("mode", ["", "Auto", "both", "stateless"])
def test_invalid_mode(mode: str) -> None:
    with pytest.raises(ValueError, match=rf"^era mode must be 'auto', 'legacy' or 'modern', not {mode!r}$"):
        EraDetector(mode)


def test_empty_version_lists_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^no modern revision to offer$"):
        EraDetector("auto", modern_versions=())
    with pytest.raises(ValueError, match=r"^no legacy revision to offer$"):
        EraDetector("auto", legacy_versions=())
    EraDetector("legacy", modern_versions=())
    EraDetector("modern", legacy_versions=())


def test_decided_detector_ignores_everything() -> None:
    detector = probing()
    detector.on_discover_result(discovered(LATEST))
    assert detector.on_discover_result(discovered(LATEST)) == []
    assert detector.on_discover_error(-32022, "x", {"supported": [LATEST]}) == []
    assert detector.on_initialize_result(initialized(LATEST_LEGACY)) == []
    assert detector.on_initialize_error(-32602, "x", {"supported": [OLD]}) == []
    assert detector.on_probe_timeout() == []
    assert detector.on_exit() == []


# -- the HTTP ladder (LC-46) -----------------------------------------------------------------------


def http_probing(*, ladder: bool = True) -> EraDetector:
    detector = EraDetector("auto", http_ladder=ladder)
    assert detector.start() == [SendDiscover(LATEST)]
    return detector


@pytest.mark.parametrize("status", [400, 404, 405, 0])
def test_a_probe_refused_with_a_bare_status_is_a_legacy_signal(status: int) -> None:
    """LC-43, LC-47: an error status with no JSON-RPC answer (or a stream closed before one, 0)
    means legacy: initialize follows at once."""
    detector = http_probing()
    assert detector.on_discover_status(status) == [SendInitialize(LATEST_LEGACY)]
    shown = status or "stream closed"
    assert detector.errors == [f"server/discover answered error 0: HTTP {shown}"]


@pytest.mark.parametrize("status", [400, 404, 405])
def test_initialize_refused_as_not_streamable_leads_to_http_sse(status: int) -> None:
    """LC-46 step 3, HS-06: initialize answered 400/404/405 with no JSON-RPC: HTTP+SSE, where
    initialize is sent again; its answer decides."""
    detector = http_probing()
    detector.on_discover_status(400)
    assert detector.on_initialize_status(status) == [UseSSE(status), SendInitialize(LATEST_LEGACY)]
    assert detector.sse_status == status
    answer = initialized(OLD)
    assert detector.on_initialize_result(answer) == [Decided(Era.LEGACY, OLD, initialize=answer)]


def test_the_http_sse_step_is_taken_once() -> None:
    """A second 404 (now from HTTP+SSE) is a failure, not another switch."""
    detector = http_probing()
    detector.on_discover_status(400)
    detector.on_initialize_status(404)
    (failed,) = detector.on_initialize_status(404, "server 'x' answered the POST with HTTP 404")
    assert isinstance(failed, Failed)
    assert failed.reason.endswith("initialize answered error 0: server 'x' answered the POST with HTTP 404")


def test_without_the_ladder_a_not_streamable_status_fails() -> None:
    """A forced Streamable HTTP transport (or the era-parity handshake) takes no HTTP+SSE step."""
    detector = http_probing(ladder=False)
    detector.on_discover_status(400)
    (failed,) = detector.on_initialize_status(404, "HTTP 404")
    assert isinstance(failed, Failed)


def test_a_not_streamable_initialize_waits_for_a_probe_still_out() -> None:
    """After a probe timeout both requests are out: a 404 to initialize waits for the probe,
    whose 2026-07-28 answer still wins; had the probe been refused, HTTP+SSE would follow."""
    detector = http_probing()
    detector.on_probe_timeout()
    assert detector.on_initialize_status(404) == []
    result = discovered(LATEST)
    assert detector.on_discover_result(result) == [Decided(Era.MODERN, LATEST, discover=result)]
    other = http_probing()
    other.on_probe_timeout()
    other.on_initialize_status(404)
    assert other.on_discover_error(-32601, "Method not found", None) == [UseSSE(404), SendInitialize(LATEST_LEGACY)]

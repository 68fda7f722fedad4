"""Session states and the era detector.

Theory of operation: the *era detector* decides, from what the server answers, whether it speaks
2026-07-28 (modern) or a legacy revision, without doing any I/O itself: it is fed the outcomes of
the probe and of ``initialize`` (and timeouts and exits), and answers with actions for the I/O
layer to perform. 2026-07-28 basic/transports/stdio §Backward Compatibility (LC-40, LC-41):

- a ``DiscoverResult`` means modern;
- a recognised modern error (``-32022`` with ``data.supported``) means modern: retry with a
  supported version, "Do not fall back to initialize";
- "any other error, or no response within a reasonable timeout: the server is legacy", and "The
  fallback MUST NOT be keyed to one specific error code".

A timed-out probe is not a verdict. A server launched through ``npx -y`` can take many seconds to
print its first byte, and a modern server would then answer the probe late. So after the probe
timeout the detector sends ``initialize`` *as well* and keeps both answers in play: whichever
meaningful answer comes first decides (a discover result, or an initialize result), and the other
is dropped as late (JR-06). If the server exits because of the probe (LC-45), the detector asks
for a restart and goes straight to ``initialize``.

Over HTTP the ladder goes on (LC-46): the probe first, and ``initialize`` only once the probe's
answer has been inspected (LC-43: sending both at once would hand every 2026-07-28 server an
``initialize`` and open a session on every dual-era one). An ``initialize`` refused with 400,
404 or 405 and no JSON-RPC answer is "not Streamable HTTP" (step 3, HS-06): with
``http_ladder`` the detector asks for the 2024-11-05 HTTP+SSE transport (:class:`UseSSE`).
"""

from __future__ import annotations

import enum
from typing import Final

import msgspec

from .types import DiscoverResult, InitializeResult
from .versions import LEGACY_REVISIONS, MODERN_REVISIONS, Era

__all__ = [
    "Decided",
    "EraDetector",
    "Failed",
    "Restart",
    "SendDiscover",
    "SendInitialize",
    "SessionState",
    "UseSSE",
]


class SessionState(enum.Enum):
    """Where a client connection is in its life."""

    #: not started.
    IDLE = "idle"
    #: detecting the era / negotiating (discover and/or initialize in flight).
    CONNECTING = "connecting"
    #: requests may be sent.
    READY = "ready"
    #: closing: no new requests; pending ones are failing.
    CLOSING = "closing"
    #: closed for good.
    CLOSED = "closed"


class SendDiscover(msgspec.Struct, frozen=True):
    """Send ``server/discover`` offering ``version``."""

    version: str


class SendInitialize(msgspec.Struct, frozen=True):
    """Send ``initialize`` offering ``version``."""

    version: str


class Restart(msgspec.Struct, frozen=True):
    """The server died on the probe: start it again (then ``initialize`` follows)."""


class UseSSE(msgspec.Struct, frozen=True):
    """HTTP: ``initialize`` was answered with ``status`` and no JSON-RPC (LC-46 step 3): connect
    with the 2024-11-05 HTTP+SSE transport instead (then ``initialize`` follows)."""

    status: int


class Decided(msgspec.Struct, frozen=True):
    """The era is known. Exactly one of ``discover`` / ``initialize`` is set."""

    era: Era
    version: str
    discover: DiscoverResult | None = None
    initialize: InitializeResult | None = None


class Failed(msgspec.Struct, frozen=True):
    """Detection failed; ``reason`` explains, ``offered`` lists versions the server named."""

    reason: str
    offered: tuple[str, ...] = ()
    unsupported: bool = False


Action = SendDiscover | SendInitialize | Restart | UseSSE | Decided | Failed

#: HTTP statuses of an ``initialize`` POST that mean "not Streamable HTTP here" (LC-46 step 3)
NOT_STREAMABLE_STATUSES: Final = frozenset({400, 404, 405})


class EraDetector(msgspec.Struct):
    """Decides the era from answers. Feed it outcomes; perform the actions it returns.

    Args:
        mode: ``"auto"`` (probe then fall back), ``"legacy"`` or ``"modern"``.
        legacy_versions: legacy revisions to offer, preferred first.
        modern_versions: modern revisions to offer, preferred first.
        http_ladder: an ``initialize`` refused with 400/404/405 (no JSON-RPC) leads to the
            HTTP+SSE transport (HTTP, transport not forced).
    """

    mode: str = "auto"
    legacy_versions: tuple[str, ...] = LEGACY_REVISIONS
    modern_versions: tuple[str, ...] = MODERN_REVISIONS
    http_ladder: bool = False
    discover_pending: bool = False
    initialize_pending: bool = False
    initialize_sent: bool = False
    restarted: bool = False
    done: bool = False
    errors: list[str] = msgspec.field(default_factory=list)
    #: the status that led to HTTP+SSE (LC-46 step 3), once it did
    sse_status: int | None = None
    _answered: bool = False  # any answer (result or error) arrived
    _retried_versions: set[str] = msgspec.field(default_factory=set)
    _ladder_status: int | None = None  # initialize said "not Streamable HTTP" while the probe is out

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "legacy", "modern"):
            raise ValueError(f"era mode must be 'auto', 'legacy' or 'modern', not {self.mode!r}")
        if self.mode != "legacy" and not self.modern_versions:
            raise ValueError("no modern revision to offer")
        if self.mode != "modern" and not self.legacy_versions:
            raise ValueError("no legacy revision to offer")

    # -- inputs ---------------------------------------------------------------------------

    def start(self) -> list[Action]:
        if self.mode == "legacy":
            return self._initialize(self.legacy_versions[0])
        self.discover_pending = True
        return [SendDiscover(self.modern_versions[0])]

    def on_discover_result(self, result: DiscoverResult) -> list[Action]:
        self.discover_pending = False
        self._answered = True
        if self.done:
            return []
        for version in self.modern_versions:
            if version in result.supported_versions:
                return self._decide(Decided(Era.MODERN, version, discover=result))
        self.errors.append(f"server/discover listed no modern revision mcpwire speaks: {result.supported_versions}")
        legacy = [v for v in self.legacy_versions if v in result.supported_versions]
        if self.mode != "modern" and (legacy or not result.supported_versions):
            return self._initialize(legacy[0] if legacy else self.legacy_versions[0])
        return self._fail_if_idle(unsupported=True, offered=tuple(result.supported_versions))

    def on_discover_error(self, code: int, message: str, data: object) -> list[Action]:
        self.discover_pending = False
        self._answered = True
        if self.done:
            return []
        self.errors.append(f"server/discover answered error {code}: {message}")
        supported = _supported(data)
        if code == -32022 and supported is not None:
            # A recognised modern error: the server is modern; retry, do not fall back (LC-40).
            for version in self.modern_versions:
                if version in supported and version not in self._retried_versions:
                    self._retried_versions.add(version)
                    self.discover_pending = True
                    return [SendDiscover(version)]
            legacy = [v for v in self.legacy_versions if v in supported]
            if legacy and self.mode != "modern":
                return self._initialize(legacy[0])
            return self._fail_if_idle(unsupported=True, offered=tuple(supported))
        if self.mode == "modern" or code in _MODERN_ONLY_ERRORS:
            # -32020 (header mismatch) and -32021 (missing client capability) exist only in the
            # modern era: the server understood the probe, so falling back would hide its answer.
            return self._fail_if_idle()
        # Any other error: legacy (LC-41: never keyed to one code). If initialize is already out
        # (after a probe timeout) and has failed too, nothing is left in play: that is a verdict.
        return self._legacy_after_probe() or self._initialize(self.legacy_versions[0]) or self._fail_if_idle()

    def on_discover_status(self, status: int, detail: str = "") -> list[Action]:
        """HTTP: the probe was answered with an error status and no JSON-RPC answer (or its stream
        closed, ``status`` 0): a legacy signal like any error (LC-41)."""
        return self.on_discover_error(0, f"HTTP {status or 'stream closed'}" + (f" ({detail})" if detail else ""), None)

    def on_probe_timeout(self) -> list[Action]:
        """The probe got no answer in time: send ``initialize`` too, keep the probe in play."""
        if self.done or self.mode != "auto" or self.initialize_sent:
            return []
        self.errors.append("server/discover got no answer within the probe timeout")
        return self._initialize(self.legacy_versions[0])

    def on_initialize_result(self, result: InitializeResult) -> list[Action]:
        self.initialize_pending = False
        self._answered = True
        if self.done:
            return []
        version = result.protocol_version
        if version in self.legacy_versions:
            return self._decide(Decided(Era.LEGACY, version, initialize=result))
        # 2025-11-25 lifecycle: "If the client does not support the version in the server's
        # response, it SHOULD disconnect"; the schema says MUST (LC-10, AMB-01). Some servers
        # echo whatever they were sent, or answer a version that does not exist.
        self.errors.append(f"initialize answered protocolVersion {version!r}, which mcpwire does not offer")
        return self._fail_if_idle(unsupported=True, offered=(version,))

    def on_initialize_error(self, code: int, message: str, data: object) -> list[Action]:
        self.initialize_pending = False
        self._answered = True
        if self.done:
            return []
        self.errors.append(f"initialize answered error {code}: {message}")
        supported = _supported(data)
        if supported:
            # LC-12: the error form of a counter-offer; retry with one we speak.
            for version in self.legacy_versions:
                if version in supported and version not in self._retried_versions:
                    self._retried_versions.add(version)
                    return self._initialize(version, again=True)
        return self._fail_if_idle()

    def on_initialize_status(self, status: int, detail: str = "") -> list[Action]:
        """HTTP: ``initialize`` was answered with an error status and no JSON-RPC answer (or its
        stream closed, ``status`` 0). With ``http_ladder``, 400/404/405 lead to HTTP+SSE."""
        if self.done:
            return []
        if self.http_ladder and status in NOT_STREAMABLE_STATUSES and self.sse_status is None:
            self.initialize_pending = False
            self._answered = True
            self.errors.append(f"initialize answered HTTP {status}")
            if self.discover_pending:
                # after a probe timeout both are out: a 2026-07-28 server may still answer
                self._ladder_status = status
                return []
            return self._use_sse(status)
        return self.on_initialize_error(0, detail or f"HTTP {status or 'stream closed'}", None)

    def on_exit(self) -> list[Action]:
        """The server process ended before detection finished."""
        if self.done:
            return []
        if self.mode == "auto" and not self.restarted and self.discover_pending and not self._answered:
            # LC-45: a legacy server that exits on the unexpected request. A slow starter (npx
            # downloading) may die on the probe after its timeout sent initialize too: nothing
            # was answered, so restart all the same and initialize the fresh process.
            self.errors.append("the server exited after the server/discover probe")
            self.restarted = True
            self.discover_pending = False
            self.initialize_pending = False
            return [Restart(), *self._initialize(self.legacy_versions[0], again=True)]
        self.done = True
        return [Failed("the server exited during the handshake")]

    # -- helpers ----------------------------------------------------------------------------

    def _initialize(self, version: str, *, again: bool = False) -> list[Action]:
        if self.initialize_sent and not again:
            return []
        self.initialize_sent = True
        self.initialize_pending = True
        return [SendInitialize(version)]

    def _legacy_after_probe(self) -> list[Action]:
        """The probe was refused after ``initialize`` had been told "not Streamable HTTP": go on
        to HTTP+SSE."""
        if self._ladder_status is not None and not self.initialize_pending:
            return self._use_sse(self._ladder_status)
        return []

    def _use_sse(self, status: int) -> list[Action]:
        self.sse_status = status
        self._ladder_status = None
        self.discover_pending = False
        return [UseSSE(status), *self._initialize(self.legacy_versions[0], again=True)]

    def _decide(self, decided: Decided) -> list[Action]:
        self.done = True
        return [decided]

    def _fail_if_idle(self, *, unsupported: bool = False, offered: tuple[str, ...] = ()) -> list[Action]:
        """Fail unless another answer is still in play."""
        if self.discover_pending or self.initialize_pending:
            return []
        self.done = True
        reason = "; ".join(self.errors) or "no usable answer"
        return [Failed(reason, offered, unsupported)]


#: 2026-07-28 codes a legacy server has no reason to send: an answer, not a fallback (LC-43, LC-47).
_MODERN_ONLY_ERRORS: Final = frozenset({-32020, -32021})


def _supported(data: object) -> list[str] | None:
    if isinstance(data, dict):
        value = data.get("supported")
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
    return None

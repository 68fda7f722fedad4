"""The options of a client connection: one frozen, validated value.

Theory of operation: in the manner of httpx's ``Timeout`` and ``Limits``, everything that shapes a
connection (timeouts, limits, the era, the handlers the client answers server requests with) is
one :class:`ClientOptions`, checked once when it is made and passed down unchanged; a call
overrides only what it names (``timeout=`` on a request). :func:`~mcpwire.open_client` takes
either an ``options`` value, or the same names as keyword arguments (which editors complete), or
both: keywords then override the value's fields. :meth:`ClientOptions.from_mapping` reads a
mapping of the same names (a host's per-server settings) with a precise error for an unknown
one.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal, TypeAlias, TypedDict

from ..protocol.framing import DEFAULT_MAX_MESSAGE_BYTES
from ..protocol.types import Implementation, JSONObject
from ..protocol.versions import LEGACY_REVISIONS, MODERN_REVISIONS, V2025_11_25, is_known

if TYPE_CHECKING:
    import httpx

    from .eracache import EraCache
    from .values import Progress, ServerNotification

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_LIST_BYTES",
    "DEFAULT_MAX_LIST_ITEMS",
    "DEFAULT_MAX_TIMEOUT",
    "DEFAULT_PROBE_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "USE_DEFAULT",
    "ClientOptions",
    "ElicitationHandler",
    "EraMode",
    "NoiseCallback",
    "NotificationCallback",
    "OptionKeywords",
    "ProgressCallback",
    "RootsHandler",
    "SamplingHandler",
    "UseDefault",
    "declared_capabilities",
]

DEFAULT_TIMEOUT: Final = 30.0
DEFAULT_MAX_TIMEOUT: Final = 600.0
DEFAULT_CONNECT_TIMEOUT: Final = 60.0
DEFAULT_PROBE_TIMEOUT: Final = 0.5
#: what one listing (every page of tools/list, resources/list, ...) may add up to, by default
DEFAULT_MAX_LIST_ITEMS: Final = 100_000
DEFAULT_MAX_LIST_BYTES: Final = 64 * 1024 * 1024

#: ``async def handler(params) -> CreateMessageResult`` for ``sampling/createMessage``.
SamplingHandler: TypeAlias = Callable[[JSONObject], Awaitable[JSONObject]]
#: ``async def handler(params) -> ElicitResult`` for ``elicitation/create``.
ElicitationHandler: TypeAlias = Callable[[JSONObject], Awaitable[JSONObject]]
#: roots: a list of ``file://`` URIs (or ``{"uri", "name"}`` objects), or an async callable returning one.
RootsHandler: TypeAlias = Sequence["str | JSONObject"] | Callable[[], Awaitable[Sequence["str | JSONObject"]]]
#: called with each progress update of a call (may be async).
ProgressCallback: TypeAlias = Callable[["Progress"], "Awaitable[None] | None"]
#: called with each line a stdio server wrote to stdout that is not JSON-RPC.
NoiseCallback: TypeAlias = Callable[[bytes], None]
#: called with each notification as it is read, before any later message of the server is handled.
NotificationCallback: TypeAlias = Callable[["ServerNotification"], None]
EraMode: TypeAlias = Literal["auto", "legacy", "modern"]


class UseDefault(enum.Enum):
    """The type of :data:`USE_DEFAULT`: a keyword argument that was not given."""

    USE_DEFAULT = "USE_DEFAULT"

    def __repr__(self) -> str:
        return "USE_DEFAULT"


#: The default of :func:`~mcpwire.open_client`'s keyword arguments: "not given", so that the
#: ``options`` value (or the built-in default) applies.
USE_DEFAULT: Final = UseDefault.USE_DEFAULT


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ClientOptions:
    """How a client connects and behaves. Frozen; every field is checked when it is made.

    Attributes:
        name: the server's label in logs and errors (default: derived from the command or URL).
        http_client: the ``httpx.AsyncClient`` for HTTP servers (e.g. with an OAuth ``auth``);
            by default one is made per connection and closed with it.
        client_info: the ``Implementation`` this client announces (default: mcpwire's).
        era: ``"auto"`` (detect), ``"legacy"`` (the ``initialize`` handshake) or ``"modern"``
            (2026-07-28).
        protocol_version: speak exactly this revision (implies its era).
        timeout: seconds a request waits for its answer (a call may override it); progress
            notifications extend it, up to ``max_timeout``.
        max_timeout: the hard cap on a request's wait, however much progress it reports.
        connect_timeout: seconds to start the server and finish the handshake.
        probe_timeout: seconds the ``server/discover`` probe gets before ``initialize`` is sent
            too (stdio, auto mode).
        max_message_bytes: the largest message accepted from the server.
        max_list_items: the most items one listing (all its pages) may hold.
        max_list_bytes: the most bytes one listing (all its pages) may take.
        notification_buffer: notifications kept for :meth:`~mcpwire.Client.notifications`
            when nobody reads them; the newest are dropped (and counted) beyond it.
        strict: stdout lines that are not JSON-RPC and protocol violations end the connection
            instead of being logged and counted.
        on_stdout_noise: called with each stdout line that is not JSON-RPC.
        roots: the client's roots (declares the ``roots`` capability).
        sampling: answers ``sampling/createMessage`` (declares ``sampling``).
        elicitation: answers ``elicitation/create`` (declares ``elicitation``); schema defaults
            are filled in for fields an accepted answer leaves out.
        max_input_rounds: how many times one 2026-07-28 call may ask for input.
        validate_output: check ``structuredContent`` against the tool's ``outputSchema``.
        era_cache: remember each server's era (and an HTTP URL's transport) for later
            connections: ``True`` for the process-wide memory, ``False`` for none, or an
            :class:`~mcpwire.client.EraCache` of your own.
        server_stream: legacy Streamable HTTP: open the standalone GET stream right after the
            handshake (otherwise on demand: when notifications are read or a subscription starts).
        on_notification: called with each notification as it is read, before any later message
            of the server (a response that follows it included) is handled: what a request's
            notifications were is known when its answer arrives. It must not block.
    """

    name: str | None = None
    http_client: httpx.AsyncClient | None = None
    client_info: Implementation | None = None
    era: EraMode = "auto"
    protocol_version: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    max_timeout: float = DEFAULT_MAX_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_list_items: int = DEFAULT_MAX_LIST_ITEMS
    max_list_bytes: int = DEFAULT_MAX_LIST_BYTES
    notification_buffer: int = 1000
    strict: bool = False
    on_stdout_noise: NoiseCallback | None = None
    roots: RootsHandler | None = None
    sampling: SamplingHandler | None = None
    elicitation: ElicitationHandler | None = None
    max_input_rounds: int = 10
    validate_output: bool = True
    era_cache: bool | EraCache = True
    server_stream: bool = True
    on_notification: NotificationCallback | None = None

    def __post_init__(self) -> None:
        for field in ("timeout", "max_timeout", "connect_timeout", "probe_timeout"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{field} must be a positive number of seconds, not {value!r}")
        for field in ("max_message_bytes", "max_list_items", "max_list_bytes", "max_input_rounds"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a positive integer, not {value!r}")
        if isinstance(self.notification_buffer, bool) or not (
            isinstance(self.notification_buffer, int) and self.notification_buffer >= 0
        ):
            raise ValueError(f"notification_buffer must be an integer >= 0, not {self.notification_buffer!r}")
        if self.era not in ("auto", "legacy", "modern"):
            raise ValueError(f"era must be 'auto', 'legacy' or 'modern', not {self.era!r}")
        if self.protocol_version is not None and not is_known(self.protocol_version):
            raise ValueError(
                f"unknown protocol_version {self.protocol_version!r}; mcpwire speaks "
                + ", ".join((*MODERN_REVISIONS, *LEGACY_REVISIONS))
            )

    def replace(self, **changes: object) -> ClientOptions:
        """A copy with these fields changed (checked like a new value)."""
        _check_names(changes)
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> ClientOptions:
        """Options from a mapping of field names (``None`` for ``era`` means ``"auto"``).

        Raises:
            ValueError: an unknown name (with the closest known one), or a bad value.
        """
        _check_names(values)
        fields = dict(values)
        if "era" in fields and fields["era"] is None:
            fields["era"] = "auto"
        return cls(**fields)  # type: ignore[arg-type]


class OptionKeywords(TypedDict, total=False):
    """The fields of :class:`ClientOptions` as the keyword arguments of
    :func:`~mcpwire.open_client` and :func:`~mcpwire.connect_client` (``**overrides``): written
    once here, so that editors and type checkers know each keyword and its type. A keyword left
    out (or given as :data:`USE_DEFAULT`) keeps the ``options`` value's field, or the default.
    """

    name: str | UseDefault | None
    http_client: httpx.AsyncClient | UseDefault | None
    client_info: Implementation | UseDefault | None
    era: EraMode | UseDefault | None
    protocol_version: str | UseDefault | None
    timeout: float | UseDefault
    max_timeout: float | UseDefault
    connect_timeout: float | UseDefault
    probe_timeout: float | UseDefault
    max_message_bytes: int | UseDefault
    max_list_items: int | UseDefault
    max_list_bytes: int | UseDefault
    notification_buffer: int | UseDefault
    strict: bool | UseDefault
    on_stdout_noise: NoiseCallback | UseDefault | None
    roots: RootsHandler | UseDefault | None
    sampling: SamplingHandler | UseDefault | None
    elicitation: ElicitationHandler | UseDefault | None
    max_input_rounds: int | UseDefault
    validate_output: bool | UseDefault
    era_cache: bool | EraCache | UseDefault
    server_stream: bool | UseDefault
    on_notification: NotificationCallback | UseDefault | None


_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(ClientOptions))


def _closest(name: str) -> str:
    close = difflib.get_close_matches(name, sorted(_FIELDS), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check_names(values: Mapping[str, object]) -> None:
    for name in values:
        if name not in _FIELDS:
            raise ValueError(f"unknown client option {name!r}{_closest(name)}")


def merge_options(entry: str, options: ClientOptions | None, overrides: Mapping[str, object]) -> ClientOptions:
    """``options`` (or the defaults) with the keyword arguments of ``entry`` that were given.

    Raises:
        TypeError: a keyword that is no option (as Python says of any function), with the
            closest option.
        ValueError: an option out of range.
    """
    for name in overrides:
        if name not in _FIELDS:
            raise TypeError(f"{entry}() got an unexpected keyword argument {name!r}{_closest(name)}")
    given = {k: v for k, v in overrides.items() if v is not USE_DEFAULT}
    if "era" in given and given["era"] is None:
        given["era"] = "auto"
    if options is None:
        return ClientOptions.from_mapping(given)
    return options.replace(**given) if given else options


def declared_capabilities(options: ClientOptions, version: str | None) -> dict[str, object]:
    """What the client declares: exactly the handlers it has (LC-15), shaped for ``version``."""
    caps: dict[str, object] = {}
    if options.roots is not None:
        caps["roots"] = {} if version in MODERN_REVISIONS else {"listChanged": False}
    if options.sampling is not None:
        caps["sampling"] = {}
    if options.elicitation is not None:
        caps["elicitation"] = {"form": {}} if version is None or version >= V2025_11_25 else {}
    return caps

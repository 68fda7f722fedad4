"""The MCP client: :func:`open_client`, :class:`Client`, and the options and values around them.

The package has one module per concern (``docs/architecture.md`` walks a call through them):
``options`` (one frozen :class:`ClientOptions`), ``engine`` (ids, waiters, deadlines, re-sends,
cancellation on the wire), ``connection`` (transport, era detection, the legacy session's life,
era parity) with its ``eracache``, ``dispatch`` (what the transport reads), ``subscriptions``,
``validation`` (output schemas), and ``core``, the thin typed :class:`Client` over them.
"""

from .core import Client
from .eracache import DEFAULT_ERA_CACHE, EraCache
from .opening import Target, connect_client, open_client, require_trio
from .options import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_LIST_BYTES,
    DEFAULT_MAX_LIST_ITEMS,
    DEFAULT_MAX_TIMEOUT,
    DEFAULT_PROBE_TIMEOUT,
    DEFAULT_TIMEOUT,
    USE_DEFAULT,
    ClientOptions,
    ElicitationHandler,
    NoiseCallback,
    ProgressCallback,
    RootsHandler,
    SamplingHandler,
    UseDefault,
)
from .state import ServerSpec
from .subscriptions import Subscription
from .values import ClientStatistics, Progress, ServerNotification

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_ERA_CACHE",
    "DEFAULT_MAX_LIST_BYTES",
    "DEFAULT_MAX_LIST_ITEMS",
    "DEFAULT_MAX_TIMEOUT",
    "DEFAULT_PROBE_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "USE_DEFAULT",
    "Client",
    "ClientOptions",
    "ClientStatistics",
    "ElicitationHandler",
    "EraCache",
    "NoiseCallback",
    "Progress",
    "ProgressCallback",
    "RootsHandler",
    "SamplingHandler",
    "ServerNotification",
    "ServerSpec",
    "Subscription",
    "Target",
    "UseDefault",
    "connect_client",
    "open_client",
    "require_trio",
]

"""Switchboard's Python client: a voice agent's tools, run by Switchboard, in a few lines.

# Layout
- `client`: `Switchboard` (a tenant's API) and `Call` (invoke, cancel, end, record).
- `types`: the answers as typed values (`InvocationResult`, `Transfer`, `Hangup`, `Handoff`).
- `errors`: typed exceptions carrying the server's error envelope.
- `livekit`, `pipecat`, `openai_agents`: adapters for those frameworks (each needs its extra).
"""

from .client import Call, Format, McpParams, Switchboard
from .errors import (
    ApiError,
    BadRequest,
    Conflict,
    NotFound,
    RateLimited,
    ServerError,
    SwitchboardError,
    TransportError,
    Unauthorized,
)
from .types import (
    CallAction,
    CallRecord,
    Function,
    Handoff,
    Hangup,
    InvocationResult,
    Messages,
    Transfer,
)

__all__ = [
    "ApiError",
    "BadRequest",
    "Call",
    "CallAction",
    "CallRecord",
    "Conflict",
    "Format",
    "Function",
    "Handoff",
    "Hangup",
    "InvocationResult",
    "McpParams",
    "Messages",
    "NotFound",
    "RateLimited",
    "ServerError",
    "Switchboard",
    "SwitchboardError",
    "Transfer",
    "TransportError",
    "Unauthorized",
]

"""SSH to the GPU host: connections, commands, streams, uploads, port forwards.

The names below are imported on first use: what only needs `console.remote.errors` (every command's error
handling, `pivot --help`) does not load asyncssh (a tenth of a second)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.remote.connection import Connection
    from console.remote.errors import RemoteError
    from console.remote.pool import HostPool
    from console.remote.state import ConnectionEvent, ConnState
    from console.remote.streams import PortForward, RemoteStream, RunResult

_WHERE = {
    "Connection": "connection",
    "HostPool": "pool",
    "RemoteError": "errors",
    "ConnectionEvent": "state",
    "ConnState": "state",
    "PortForward": "streams",
    "RemoteStream": "streams",
    "RunResult": "streams",
}
__all__ = ["ConnState", "Connection", "ConnectionEvent", "HostPool", "PortForward", "RemoteError", "RemoteStream", "RunResult"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'console.remote' has no attribute {name!r}")
    return getattr(importlib.import_module(f"console.remote.{_WHERE[name]}"), name)

"""SSH to the GPU host: connections, commands, streams, uploads, port forwards."""

from console.remote.connection import Connection, ConnectionEvent, ConnState, PortForward, RemoteStream, RunResult
from console.remote.errors import RemoteError
from console.remote.pool import HostPool

__all__ = [
    "ConnState",
    "Connection",
    "ConnectionEvent",
    "HostPool",
    "PortForward",
    "RemoteError",
    "RemoteStream",
    "RunResult",
]

"""Errors the operator can read: str() is one line that names the host and what to do."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.config import UnknownHost

__all__ = [
    "AuthFailed",
    "CommandTimeout",
    "ConnectFailed",
    "ConnectTimeout",
    "ConnectionRefused",
    "Disconnected",
    "DnsError",
    "HostKeyMismatch",
    "HostKeyUnknown",
    "RemoteError",
    "UnknownHost",
]


def __getattr__(name: str) -> Any:
    """UnknownHost, a name the config does not know, is the config's error, read like these; loaded when asked, so that
    what only catches RemoteError (the load generator of a sweep through a URL) loads no pivot.toml machinery."""
    if name == "UnknownHost":
        from console.config import UnknownHost

        return UnknownHost
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class RemoteError(Exception):
    """Base of every SSH-layer error. `retry` says whether reconnecting can help."""

    retry = True

    def __init__(self, host: str, message: str):
        self.host = host
        super().__init__(f"{host}: {message}" if host else message)


class DnsError(RemoteError):
    pass


class ConnectionRefused(RemoteError):
    pass


class ConnectTimeout(RemoteError):
    pass


class AuthFailed(RemoteError):
    retry = False


class HostKeyUnknown(RemoteError):
    retry = False


class HostKeyMismatch(RemoteError):
    retry = False


class ConnectFailed(RemoteError):
    """Any other failure to set up the connection (network unreachable, protocol error)."""


class Disconnected(RemoteError):
    """The connection is down and did not come back within the operation's timeout."""


class CommandTimeout(RemoteError):
    pass

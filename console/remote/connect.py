"""Opening one SSH connection: the options a host's spec asks for, host keys checked against known_hosts (never
accepted silently), and every failure turned into one line that says what to do."""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import asyncssh

from console.config import HostSpec
from console.remote.errors import (
    AuthFailed,
    ConnectFailed,
    ConnectionRefused,
    ConnectTimeout,
    DnsError,
    HostKeyMismatch,
    HostKeyUnknown,
    RemoteError,
)
from console.untrusted import visible


class Tunnel(Protocol):
    """The connection to a jump host that this one goes through (console/remote/connection.py Connection)."""

    async def connected(self, timeout: float = 30.0, *, fail_fast: bool = False) -> asyncssh.SSHClientConnection: ...


# AES-GCM first: with AES-NI it costs a fraction of asyncssh's chacha20-poly1305, which builds a cipher per packet
# (the load generator's forward spent as much CPU on it as on HTTP); the rest of asyncssh's defaults follow.
PREFERRED_CIPHERS = "^aes128-gcm@openssh.com,aes256-gcm@openssh.com"


class SshClient(asyncssh.SSHClient):
    """Keeps why the transport closed: the reason a DOWN event gives."""

    def __init__(self) -> None:
        self.lost_reason: str | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost_reason = visible(str(exc)) if exc else "closed by the remote end"  # may carry the host's words


async def open_ssh(spec: HostSpec, tunnel: Tunnel | None) -> tuple[asyncssh.SSHClientConnection, SshClient]:
    """One SSH connection to the host as its spec says, or the RemoteError that says why not, in one line."""
    options: dict[str, object] = {
        # remote output is untrusted bytes: one invalid UTF-8 byte must not fail the channel and drop the link
        "encoding": "utf-8",
        "errors": "replace",
        "keepalive_interval": spec.keepalive_s,
        "keepalive_count_max": 3,
        "connect_timeout": spec.connect_timeout_s,
        "encryption_algs": PREFERRED_CIPHERS,
    }
    if spec.user:
        options["username"] = spec.user
    if spec.port:
        options["port"] = spec.port
    if spec.identity:
        identity = os.path.expanduser(spec.identity)  # noqa: ASYNC240 - reads $HOME, no disk
        try:  # loaded here so that a missing or unreadable key is named (asyncssh says only "No such file")
            options["client_keys"] = asyncssh.load_keypairs([identity])
        except (OSError, asyncssh.KeyImportError) as e:
            raise AuthFailed(
                spec.name, f"identity file {identity} (hosts.{spec.name}.identity): {getattr(e, 'strerror', None) or e}"
            ) from None
    if spec.known_hosts:
        known = known_hosts_path(spec)
        if not known.is_file():
            raise HostKeyUnknown(spec.name, f"known_hosts file {known} does not exist; run `pivot trust {spec.name}`")
        options["known_hosts"] = str(known)
    if tunnel is not None:
        options["tunnel"] = await tunnel.connected(timeout=spec.connect_timeout_s)
    elif spec.jump:
        options["tunnel"] = spec.jump
    client = SshClient()
    try:
        conn = await asyncssh.connect(spec.target, client_factory=lambda: client, **options)
    except Exception as e:  # every failure becomes one readable line
        raise classify(spec, e) from e
    return conn, client


def classify(spec: HostSpec, e: Exception) -> RemoteError:
    where = f"{spec.target}:{spec.port or 22}"
    if isinstance(e, RemoteError):
        return e
    # with only a @cert-authority line for the host, asyncssh asks for certificates alone: a host without one fails
    # the key exchange
    no_certificate = isinstance(e, asyncssh.KeyExchangeFailed) and "host key" in (e.reason or "")
    if isinstance(e, asyncssh.HostKeyNotVerifiable) or no_certificate:
        known = known_entries(spec)
        if "revoked" in str(e):  # asyncssh's word for a key a @revoked line names
            return revoked(spec)
        if known.trusted:
            return HostKeyMismatch(
                spec.name,
                f"HOST KEY CHANGED for {where}: refusing to connect. If the host was reinstalled, "
                f"check the new fingerprint and remove the old key (ssh-keygen -R), then `pivot trust {spec.name}`",
            )
        if known.authorities:
            return HostKeyMismatch(
                spec.name,
                f"{where} showed no host certificate signed by the authority that {known_hosts_path(spec)} trusts for it "
                f"(@cert-authority): refusing to connect; ask the host's administrator, or pin its own key with "
                f"`pivot trust {spec.name}`",
            )
        if isinstance(e, asyncssh.HostKeyNotVerifiable):
            return HostKeyUnknown(spec.name, f"host key of {where} is not known; check it with `pivot trust {spec.name}`")
    if isinstance(e, asyncssh.PermissionDenied):
        return AuthFailed(spec.name, f"authentication failed for {spec.user or 'default user'}@{where}")
    if isinstance(e, socket.gaierror):
        return DnsError(spec.name, f"cannot resolve {spec.target!r}: {e.strerror}")
    if isinstance(e, ConnectionRefusedError):
        return ConnectionRefused(spec.name, f"connection refused by {where}")
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return ConnectTimeout(spec.name, f"no answer from {where} within {spec.connect_timeout_s:g} s")
    if isinstance(e, asyncssh.Error):
        return ConnectFailed(spec.name, f"{where}: {visible(e.reason)}")
    if isinstance(e, OSError):
        return ConnectFailed(spec.name, f"{where}: {e.strerror or e}")
    return ConnectFailed(spec.name, f"{where}: {type(e).__name__}: {e}")


def known_hosts_path(spec: HostSpec) -> Path:
    return Path(os.path.expanduser(spec.known_hosts)) if spec.known_hosts else Path.home() / ".ssh" / "known_hosts"


@dataclass(frozen=True)
class KnownEntries:
    """What known_hosts says of one host, as OpenSSH reads it: plain keys, certificate authorities (@cert-authority)
    and keys it must refuse (@revoked)."""

    trusted: list[asyncssh.SSHKey]
    authorities: list[asyncssh.SSHKey]
    revoked: list[asyncssh.SSHKey]


def known_entries(spec: HostSpec) -> KnownEntries:
    """The lines of known_hosts for this host (by name or address, and port)."""
    try:
        known = asyncssh.read_known_hosts(str(known_hosts_path(spec)))
    except (OSError, ValueError):
        return KnownEntries([], [], [])
    try:
        addr = socket.gethostbyname(spec.target)
    except OSError:
        addr = spec.target
    trusted, authorities, revoked_keys = known.match(spec.target, addr, spec.port or 22)[:3]
    return KnownEntries(list(trusted), list(authorities), list(revoked_keys))


def known_keys(spec: HostSpec) -> list[asyncssh.SSHKey]:
    """The keys known_hosts trusts for this host: its own, and the authorities that sign its certificates."""
    known = known_entries(spec)
    return [*known.trusted, *known.authorities]


def revoked(spec: HostSpec) -> HostKeyMismatch:
    return HostKeyMismatch(
        spec.name,
        f"the host key of {spec.target}:{spec.port or 22} is marked @revoked in {known_hosts_path(spec)}: refusing to "
        "connect, as OpenSSH does; the host's administrator must give it a new key",
    )

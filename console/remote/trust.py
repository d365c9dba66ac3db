"""`pivot trust HOST`: show a host's key fingerprint and, once the operator confirms, pin it.

A changed key is never replaced here: the operator removes the old entry
deliberately (ssh-keygen -R), as OpenSSH asks.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from console.config import HostSpec
from console.remote.connect import classify, known_entries, known_hosts_path, revoked
from console.remote.connection import Connection
from console.remote.errors import HostKeyMismatch


@dataclass(frozen=True)
class OfferedKey:
    host_pattern: str  # as known_hosts writes it: name, or [name]:port
    key: asyncssh.SSHKey
    known_hosts: Path
    already_trusted: bool = False
    authority: bool = False  # known_hosts also trusts a certificate authority for the host (kept as it is)

    @property
    def fingerprint(self) -> str:
        return self.key.get_fingerprint("sha256")

    @property
    def algorithm(self) -> str:
        return self.key.get_algorithm()

    @property
    def line(self) -> str:
        return f"{self.host_pattern} {self.key.export_public_key('openssh').decode().strip()}\n"


# The key kinds asked for, best first, as OpenSSH's own client prefers them (ssh_config(5) HostKeyAlgorithms): a host
# offers one key per kind, and the one pinned should be the one a later connect will be shown.
PREFERRED_KEYS = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "rsa-sha2-512",
    "rsa-sha2-256",
    "ssh-rsa",
)


async def fetch_key(spec: HostSpec, tunnel: Connection | None = None) -> OfferedKey:
    """Ask the host for its key without authenticating; failures classified as a connect's. `tunnel`: the connection
    of the configured host that `jump` names (a ProxyJump string is handed to asyncssh as it is)."""
    try:
        via = await tunnel.connected(timeout=spec.connect_timeout_s, fail_fast=True) if tunnel is not None else spec.jump or ()
        key = await asyncio.wait_for(
            asyncssh.get_server_host_key(spec.target, spec.port or (), tunnel=via, server_host_key_algs=list(PREFERRED_KEYS)),
            spec.connect_timeout_s,
        )
    except Exception as e:  # every failure becomes the connect's one line
        raise classify(spec, e) from e
    if key is None:
        raise classify(spec, OSError(f"{spec.target} offered no host key"))
    known = known_entries(spec)
    if any(k.public_data == key.public_data for k in known.revoked):
        raise revoked(spec)
    already = any(k.public_data == key.public_data for k in known.trusted)
    if known.trusted and not already:
        raise HostKeyMismatch(
            spec.name,
            f"a different key for {spec.target} is already in {known_hosts_path(spec)}; "
            f"remove it first if the host was reinstalled (ssh-keygen -R) and check the new fingerprint "
            f"{key.get_fingerprint('sha256')} with the host's administrator",
        )
    port = spec.port or 22
    pattern = spec.target if port == 22 else f"[{spec.target}]:{port}"
    return OfferedKey(pattern, key, known_hosts_path(spec), already, bool(known.authorities))


def pin(offered: OfferedKey) -> None:
    path = offered.known_hosts
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(path, "a+", encoding="utf-8") as f:
        f.seek(0, os.SEEK_END)
        if f.tell():  # an entry starts on a line of its own, after a last line written without its newline
            f.seek(f.tell() - 1)
            ended = f.read(1) == "\n"
            f.seek(0, os.SEEK_END)
            if not ended:
                f.write("\n")
        f.write(offered.line)

"""A Session: what every way of using pivot works with, built once and handed to the console and to each
headless command: the config, the host pool, the event log, the chosen host's telemetry and server lifecycle,
and the sweeps. Every command connects the same way (a host whose `jump` names another configured host tunnels
through that host's connection, headless as in the console) and acts through the same actions."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from console.config import Config, HostSpec
from console.events import EventLog
from console.gpu.telemetry import LocalTelemetry, RemoteTelemetry, Telemetry
from console.server.multinode import Rank, ranks
from console.server.profiles import Profile, ProfileSet, load_profiles

if TYPE_CHECKING:
    from console.remote import Connection, HostPool
    from console.server.lifecycle import Lifecycle, ServerLifecycle
    from console.sweep.sweeps import Sweeps


class Session:
    def __init__(
        self,
        config: Config,
        host: str | None = None,
        *,
        local: bool = False,
        via: str = "cli",
        telemetry: Telemetry | None = None,
        lifecycle: Lifecycle | None = None,
    ):
        """host: a configured host's name (None: the default host); local: this machine's GPUs, no SSH.
        via: who acts ("console", "cli", "runbook"), written in each event. telemetry, lifecycle: given (a test's
        fakes), else the host's own."""
        self.config, self.via = config, via
        self._pool: HostPool | None = None
        self.events = EventLog(config.campaign_dir)
        self.spec: HostSpec | None = None if local else config.host(host)
        self.telemetry: Telemetry
        self.lifecycle: Lifecycle | None = lifecycle
        self._peers: dict[str, ServerLifecycle] = {}  # the other nodes of a server across nodes, as they are needed
        if telemetry is not None:
            self.telemetry = telemetry
        elif self.spec is None:
            self.telemetry = LocalTelemetry(interval=config.telemetry_interval_s, pidfile=None)
        else:  # SSH (asyncssh) is loaded for a host only: a local session (a sweep of a URL) starts without it
            self.telemetry = RemoteTelemetry(self.conn, self.spec, interval=config.telemetry_interval_s)
        if lifecycle is None and self.spec is not None and isinstance(self.telemetry, RemoteTelemetry):
            from console.server.slurm import lifecycle_of

            self.lifecycle = lifecycle_of(
                self.conn,
                self.spec,
                self.telemetry,
                idle_threshold_mib=config.idle_threshold_mib,
                grace_s=config.kill_grace_s,
                events=self.events,
                via=via,
                peers=self,
            )
        self._sweeps: Sweeps | None = None

    @property
    def pool(self) -> HostPool:
        if self._pool is None:
            from console.remote import HostPool

            self._pool = HostPool(self.config)
        return self._pool

    @property
    def host_name(self) -> str | None:
        return self.spec.name if self.spec else None

    @property
    def host_label(self) -> str:
        return self.spec.name if self.spec else "local"

    @property
    def conn(self) -> Connection:
        if self.spec is None:
            raise RuntimeError("a local session has no SSH connection")
        return self.pool.get(self.spec.name)

    @property
    def hypervisor(self) -> HostSpec | None:
        return next((h for h in self.config.hosts.values() if h.role == "hypervisor" and h.cleanup), None)

    @property
    def sweeps(self) -> Sweeps:
        from console.sweep.sweeps import Sweeps  # polars and the load generator's client only where sweeps are used

        if self._sweeps is None:
            self._sweeps = Sweeps(self)
        return self._sweeps

    # -- the other nodes of a server across nodes (console/server/cluster.py's Peers) ---------------------------------
    def ranks(self, profile: Profile) -> list[Rank]:
        return ranks(profile, self.config)

    def node_lifecycle(self, host: str) -> ServerLifecycle:
        """Another host's server lifecycle, on the pool's connection to it (the event log is the server's rank 0's)."""
        if host not in self._peers:
            from console.server.lifecycle import ServerLifecycle

            spec = self.config.host(host)
            conn = self.pool.get(host)
            self._peers[host] = ServerLifecycle(
                conn,
                spec,
                RemoteTelemetry(conn, spec, interval=self.config.telemetry_interval_s),
                idle_threshold_mib=self.config.idle_threshold_mib,
                grace_s=self.config.kill_grace_s,
                via=self.via,
            )
        return self._peers[host]

    def profiles(self) -> ProfileSet:
        return load_profiles(*self.config.profile_dirs)

    async def connect(self, timeout: float = 30.0) -> None:
        """Up now, or one line why (headless commands fail fast; the console keeps reconnecting instead)."""
        if self.spec is not None:
            await self.conn.connected(timeout, fail_fast=True)

    async def close(self) -> None:
        for lifecycle in [self.lifecycle, *self._peers.values()]:
            if lifecycle is not None:
                with contextlib.suppress(Exception):  # its channels end with the connection anyway
                    await lifecycle.close()
        if self._pool is not None:
            await self._pool.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

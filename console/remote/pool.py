"""The connections of one console: one per host, created on first use, shared by all."""

from __future__ import annotations

import asyncio

from console.config import Config
from console.remote.connection import Connection


class HostPool:
    def __init__(self, config: Config):
        self.config = config
        self._connections: dict[str, Connection] = {}

    def get(self, name: str | None = None) -> Connection:
        spec = self.config.host(name)
        conn = self._connections.get(spec.name)
        if conn is None:
            # a jump host that is itself a configured host shares that host's connection
            tunnel = self.get(spec.jump) if spec.jump in self.config.hosts else None
            conn = self._connections[spec.name] = Connection(spec, tunnel=tunnel)
        return conn

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._connections.values()), return_exceptions=True)
        self._connections.clear()

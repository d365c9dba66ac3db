"""A canned telemetry stream for UI tests and snapshots: eight GPUs after a server was killed
without its group (two orphaned workers and a zombie holding memory), as the simulated host shows it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TYPE_CHECKING

from console.gpu.samples import AgentError, Hello, Sample, parse_line
from console.gpu.telemetry import Telemetry, TelemetryEvent
from console.server.lifecycle import Check, Lifecycle
from console.server.profiles import Profile, ProfileSet
from console.server.state import LifecycleError, ServerState, ServerStatus, StopReport

MIB = 143771


def canned_sample_line(now: float | None = None) -> str:
    now = now or time.time()
    gpus = []
    for i in range(8):
        used = {3: 126518, 7: 125494}.get(i, 0)
        gpus.append(
            {
                "index": i,
                "uuid": f"GPU-{i}",
                "name": "NVIDIA H200",
                "mem_used_mib": used,
                "mem_total_mib": MIB,
                "util_pct": 0,
                "temp_c": 35 if used else 32,
                "power_w": 115.0 if used else 75.0,
                "power_limit_w": 700.0,
            }
        )
    base = {"visible": True, "user": "ml", "start": now - 3600, "parent_gone": False, "leader_gone": True, "pgid": 2000}
    procs = [
        {
            **base,
            "pid": 2004,
            "gpu": 3,
            "mem_mib": 125494,
            "ppid": 1,
            "parent_gone": True,
            "state": "S",
            "cmd": "sglang::scheduler_TP3",
            "start_ticks": 104,
        },
        {
            **base,
            "pid": 2009,
            "gpu": 3,
            "mem_mib": 1024,
            "ppid": 2004,
            "state": "Z",
            "cmd": "[sglang::schedul]",
            "start_ticks": 109,
            "parent_start_ticks": 104,
            "parent_cmd": "sglang::scheduler_TP3",
        },
        {
            **base,
            "pid": 2008,
            "gpu": 7,
            "mem_mib": 125494,
            "ppid": 1,
            "parent_gone": True,
            "state": "S",
            "cmd": "sglang::scheduler_TP7",
            "start_ticks": 108,
        },
    ]
    return json.dumps({"type": "sample", "v": 1, "t": now, "gpus": gpus, "procs": procs, "server": {"pid": 2000, "alive": False}})


class FakeTelemetry:
    def __init__(self) -> None:
        self.hello: Hello | None = Hello("nvidia-smi", 999, "gpu1", 1.0, 1)
        self.killed: list[list[str]] = []

    async def events(self) -> AsyncGenerator[TelemetryEvent, None]:
        if self.hello is not None:
            yield self.hello
        sample = await self.sample_once()
        # received "in the future": the header says "0 s ago" however slow the machine (snapshots)
        yield dataclasses.replace(sample, received=time.time() + 3600) if isinstance(sample, Sample) else sample
        await asyncio.Event().wait()

    async def sample_once(self) -> Sample | AgentError:
        sample = parse_line(canned_sample_line(), "nvidia-smi")
        assert isinstance(sample, Sample)
        return sample

    async def kill(self, targets: list[str], grace_s: float) -> list[dict]:
        self.killed.append(targets)
        return [{"pid": int(t.split(":")[0]), "outcome": "exited", "detail": "ended by SIGTERM", "signals": ["TERM"]} for t in targets]


class FakeLogStream:
    def __init__(self, lines: list[str]):
        self.lines = lines

    async def __aenter__(self) -> FakeLogStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def __aiter__(self) -> AsyncIterator[str]:
        for line in self.lines:
            yield line
        await asyncio.Event().wait()  # a log that stays quiet


class FakeLifecycle:
    """A managed server that is ready and stays so: for snapshots of the Server pane. Its actions are refused, as a
    lifecycle refuses what it cannot do."""

    def __init__(self) -> None:
        self.status = ServerStatus(
            ServerState.READY,
            "demo-eagle3",
            4100,
            time.time() - 3600,
            time.time() - 3500,
            "The server is fired up and ready to roll!",
            model="/models/kimi-k2.5-int4",
        )
        self.listeners: list[Callable[[ServerStatus], None]] = []
        self.looked_at = time.monotonic()

    runs_jobs = False
    last_stop: StopReport | None = None

    def add_listener(self, callback: Callable[[ServerStatus], None]) -> None:
        self.listeners.append(callback)

    async def job_gpus(self) -> list:
        return []

    async def poll(self) -> ServerStatus:
        for callback in self.listeners:
            callback(self.status)
        return self.status

    def unreachable(self, why: str) -> ServerStatus:
        return self.status

    async def log_tail(self, lines: int = 50) -> list[str]:
        return LOG[-lines:]

    async def close(self) -> None:
        pass

    async def follow_log(self, lines: int = 200) -> FakeLogStream:
        return FakeLogStream(LOG[-lines:])

    async def preflight(self, profile: Profile, *, skip: frozenset[str] = frozenset()) -> list[Check]:
        return []

    async def start(
        self, profile: Profile, *, force: bool = False, skip: frozenset[str] = frozenset(), via: str | None = None
    ) -> list[Check]:
        raise LifecycleError("the fake server cannot be started")

    async def stop(self, *, during: str | None = None, via: str | None = None) -> StopReport:
        raise LifecycleError("the fake server cannot be stopped")

    async def switch(
        self, profile: Profile, *, force: bool = False, skip: frozenset[str] = frozenset(), via: str | None = None
    ) -> list[Check]:
        raise LifecycleError("the fake server cannot be switched")

    async def restart(
        self, profiles: ProfileSet, *, force: bool = False, skip: frozenset[str] = frozenset(), via: str | None = None
    ) -> list[Check]:
        raise LifecycleError("the fake server cannot be restarted")


LOG = [
    "[2026-11-30 09:12:01 TP0] Load weight begin. avail mem=140 GB",
    "[2026-11-30 09:12:09] TP0 Load weight end. type=DeepseekV3ForCausalLM",
    "[2026-11-30 09:12:10] TP0 KV Cache is allocated.",
    "[2026-11-30 09:12:12 TP3] WARNING: cuda graph capture took 2.1 s",
    "[2026-11-30 09:12:13] The server is fired up and ready to roll!",
    "[2026-11-30 09:20:40 TP5] ERROR: NCCL watchdog timeout on rank 5 (simulated)",
]

if TYPE_CHECKING:  # mypy checks that the fakes are what the console takes
    _telemetry: Telemetry = FakeTelemetry()
    _lifecycle: Lifecycle = FakeLifecycle()

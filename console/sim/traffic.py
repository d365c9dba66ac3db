"""Background requests for `pivot demo`, so the simulated GPUs look like a server in use:
the number of streams in flight drifts between 0 and 24, and utilization and power follow.
Loopback only, only while the demo host runs, and only to the server the demo started: once
that process is gone the traffic ends, so that it never skews a sweep of the next server; and while
a sweep measures that server, the server ends and refuses the traffic's requests (console/sim/openai_app.py),
so that it never skews that sweep either."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable

import httpx

from console.sim.openai_app import TRAFFIC_HEADER

PATTERN = (0, 1, 2, 4, 8, 16, 24, 12, 6, 3, 1)  # streams in flight, one step every PERIOD_S
PERIOD_S = 6.0


async def _one(client: httpx.AsyncClient, rng: random.Random) -> None:
    body = {"prompt": "demo traffic " * rng.randint(8, 64), "max_tokens": rng.randint(64, 256), "stream": True, "ignore_eos": True}
    async with client.stream("POST", "/v1/completions", json=body) as response:
        async for _ in response.aiter_raw():
            pass


async def _slot(client: httpx.AsyncClient, index: int, target: list[int], rng: random.Random) -> None:
    """Keeps one stream going while `index` is below the current target."""
    while True:
        if index >= target[0]:
            await asyncio.sleep(0.5)
            continue
        try:
            await _one(client, rng)
        except httpx.HTTPError:
            await asyncio.sleep(2.0)  # the server is loading, stopped or killed: try again later


async def run(port: int, server_alive: Callable[[], bool], seed: int = 0) -> None:
    rng = random.Random(seed)
    target = [0]
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=httpx.Timeout(10, read=None), headers={TRAFFIC_HEADER: "1"}
    ) as client:  # it makes way for a sweep (openai_app.py)
        slots = [asyncio.create_task(_slot(client, i, target, rng)) for i in range(max(PATTERN))]
        try:
            while server_alive():
                for level in PATTERN:
                    target[0] = level
                    for _ in range(int(PERIOD_S)):
                        await asyncio.sleep(1.0)
                        if not server_alive():
                            return
        finally:
            for task in slots:
                task.cancel()
            for task in slots:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

"""Keeping a level's requests in flight in one process: the load generator's own (one process carries the level) or
each of its workers (console/sweep/loadgen/workers.py: several processes share it, each its slots and its share of
the level's request indices)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from console.settings import SweepSettings
from console.sweep.level_stats import Quantiles
from console.sweep.loadgen.requests import Client, TokensPerChunk, UniquePrompts, one_request, request_body
from console.sweep.metrics import RequestRecord

LAG_TICK_S = 0.01


async def watch_lag(lags: Quantiles) -> None:
    """How late this process's loop wakes up: a late loop stamps chunks late."""
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(LAG_TICK_S)
        lags.add(max(0.0, loop.time() - before - LAG_TICK_S))


@dataclass(frozen=True)
class Share:
    """Which of a level's requests one process sends: indices first, first + step, … below `end` (None: until the
    deadline, a time.monotonic(), which is the same clock in every process of the machine)."""

    first: int = 0
    step: int = 1
    end: int | None = None
    deadline: float | None = None


class Feed:
    """Slots that each send the next request of the share as soon as their last one finished, until the share is sent,
    the deadline passed or `stop()` (too many failures, the operator's stop)."""

    def __init__(self, share: Share) -> None:
        self.share = share
        self._next = share.first
        self.stopped = False
        self.in_flight = self.peak = 0

    def stop(self) -> None:
        self.stopped = True

    def _take(self) -> int | None:
        share = self.share
        if self.stopped or (share.end is not None and self._next >= share.end):
            return None
        if share.deadline is not None and time.monotonic() >= share.deadline:
            return None
        index, self._next = self._next, self._next + share.step
        return index

    async def run(self, slots: int, send: Callable[[int], Awaitable[RequestRecord]], finished: Callable[[RequestRecord], None]) -> None:
        async def slot() -> None:
            while (index := self._take()) is not None:
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
                try:
                    record = await send(index)
                finally:
                    self.in_flight -= 1
                finished(record)

        await asyncio.gather(*(slot() for _ in range(slots)))


def schedule(rate: float, arrival: str, burstiness: float, count: int | None, key: str) -> Iterator[float]:
    """Each request's time to be sent, in seconds from the level's start: the first at 0, the gaps after it drawn
    (seeded by `key`) as vLLM's `bench serve` draws them (vllm/benchmarks/serve.py, get_request): constant 1/rate,
    exponential (poisson), or gamma(shape=burstiness, scale=1/(rate*burstiness)); and a known count's gaps scaled so
    that their mean is 1/rate exactly, its last request sent at (count - 1) / rate: the level offers the rate it names
    (vLLM scales them to count / rate, a rate (count - 1) / count of the one named)."""
    rng = random.Random(key)

    def gap() -> float:
        if arrival == "constant":
            return 1 / rate
        if arrival == "poisson":
            return rng.expovariate(rate)
        return rng.gammavariate(burstiness, 1 / (rate * burstiness))

    if count is None:  # a level of a duration: as long as it lasts
        at = 0.0
        while True:
            yield at
            at += gap()
    times = [0.0]
    for _ in range(count - 1):
        times.append(times[-1] + gap())
    scale = (count - 1) / rate / times[-1] if count > 1 and times[-1] > 0 else 1.0
    yield from (t * scale for t in times)


class Arrivals(Feed):
    """Open loop: each request of the share sent at its time on the schedule, whatever the server's state (how many
    are in flight, how slow it answers), up to `most` in flight; how late each was sent against its time is kept
    (`lateness`): a client that cannot keep its schedule did not offer the rate."""

    def __init__(self, share: Share, times: Iterator[float], most: int) -> None:
        super().__init__(share)
        self.times, self.most = times, most
        self.lateness: list[float] = []
        self.held = 0  # arrivals that waited for a request to finish (max_in_flight)

    async def run(self, slots: int, send: Callable[[int], Awaitable[RequestRecord]], finished: Callable[[RequestRecord], None]) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        room = asyncio.Event()
        running: set[asyncio.Task[None]] = set()

        async def one(index: int) -> None:
            try:
                record = await send(index)
            finally:
                self.in_flight -= 1
                room.set()
            finished(record)

        try:
            for at in self.times:
                if (index := self._take()) is None:
                    break
                if (wait := start + at - loop.time()) > 0:
                    await asyncio.sleep(wait)
                if self.in_flight >= self.most:
                    self.held += 1
                    while self.in_flight >= self.most:
                        room.clear()
                        await room.wait()
                self.lateness.append(max(0.0, loop.time() - start - at))
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
                task = asyncio.create_task(one(index))
                running.add(task)
                task.add_done_callback(running.discard)
            if running:
                await asyncio.gather(*running)
        finally:
            for task in running:
                task.cancel()


Asked = Callable[[int], tuple[Any, int]]  # a request's index in its level: its prompt, and the tokens it asks for


def sender(
    client: Client,
    settings: SweepSettings,
    asked: Asked,
    model: str,
    c: int,
    level_t0: float,
    per_chunk: TokensPerChunk,
    ignore_eos: bool,
) -> Callable[[int], Awaitable[RequestRecord]]:
    """One request of the level, by its index: its prompt, its body, its record."""

    async def send(index: int) -> RequestRecord:
        prompt, max_tokens = asked(index)
        path, body = request_body(settings, model, prompt, max_tokens, ignore_eos=ignore_eos)
        return await one_request(client, path, body, c, index, level_t0, index < settings.warmup, settings, per_chunk)

    return send


def level_order(size: int, seed: int, c: int) -> list[int]:
    """A prompt set's order in a level of C: seeded by the sweep's seed and C, so that every process sending the level
    draws the same one, no prompt comes twice before every other came once, and a level measured again (a repeat,
    another run of the same settings) sends the same prompts."""
    order = list(range(size))
    random.Random(f"{seed}:{c}").shuffle(order)
    return order


def drawn(lengths: str, mean: int, spread: float, key: str) -> int:
    """A length drawn around `mean` (fixed: the mean itself), seeded by the request's key: the same in every process."""
    if lengths not in ("uniform", "normal"):
        return mean
    rng = random.Random(key)
    value = rng.uniform(mean * (1 - spread), mean * (1 + spread)) if lengths == "uniform" else rng.gauss(mean, spread * mean)
    return max(1, round(value))


def requests_from(
    source: list[Any] | UniquePrompts,
    settings: SweepSettings,
    c: int,
    key: str | None = None,
    answers: list[int] | None = None,
    offset: int = 0,
) -> Asked:
    """Each request's prompt and length. A prompt set's (or the seeded pool's) prompts come in the level's seeded
    order, from `offset` on (the requests of the level's attempts before), each with its own answer's length where
    output_lengths = "set" (answers); else a prompt of its own for every request: the next one issued (key None: one
    process issues them all), or one keyed by the level and the index (several processes), as long as input_lengths
    draws it."""
    seed, spread = settings.seed, settings.length_spread

    def tokens(at: int, order: list[int] | None = None) -> int:
        if answers and order is not None:
            return answers[order[at % len(order)]]
        return drawn(settings.output_lengths, settings.max_tokens, spread, f"{seed}:{c}:{at}:out")

    if isinstance(source, list):
        order = level_order(len(source), seed, c)
        return lambda index: (source[order[(offset + index) % len(order)]], tokens(offset + index, order))

    def words(index: int) -> int:
        return drawn(settings.input_lengths, source.words, spread, f"{seed}:{c}:{offset + index}:in")

    if key is None:
        return lambda index: (source.prompt(words(index)), tokens(index))
    return lambda index: (source.keyed(f"{key}.{index}", words(index)), tokens(index))

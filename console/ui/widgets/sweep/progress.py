"""The Sweep pane's progress line: where a sweep is, and how long the rest should take."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from console.settings import RATE_KEY, SweepSettings
from console.sweep.model import LevelDone
from console.sweep.sweeps import SweepHandle
from console.sweep.words.verdicts import at, naming


@dataclass
class LiveLevel:
    """The level in progress, as its events tell it."""

    c: int | None = None  # None: the load generator has not started a level yet
    requests: int = 0  # to send, warm-up included
    done: int = 0
    tokens: int = 0  # of finished requests
    streamed: int = 0  # of every request so far, finished or not (the load generator's progress)
    in_flight: int | None = None
    reference: bool = False  # the first level measured again, for the sweep's drift
    started: float = field(default_factory=time.monotonic)

    @property
    def rate(self) -> float | None:
        """Output tokens a second so far in the level; None before the first."""
        streamed = max(self.tokens, self.streamed)
        return streamed / max(1e-6, time.monotonic() - self.started) if streamed else None


def progress_line(handle: SweepHandle, live: LiveLevel, done: list[LevelDone], elapsed: float) -> str:
    """Where the sweep is, and how long the rest should take: each level's waves of requests at the time a wave took
    (wave_s), on the line through the last two levels timed (this level's rate so far counts its first wave's prefill
    and ramp, and reads far below what it will be: it is used only where the level runs past that, or before two
    levels are timed). Until then the later levels cannot be timed (a request at C=250 takes longer than at C=1 by an
    amount only a second level shows), and the line says how long this level has left."""
    settings = handle.settings
    levels = list(handle.process.repeat or settings.level_keys())
    c = live.c
    k = levels.index(c) + 1 if c in levels else len(done)
    streamed = max(live.tokens, live.streamed)  # finished requests', or all streamed so far
    with naming(bool(settings.rates)):
        line = (
            f"{at(c or 0)} again, for the sweep's drift: {live.done}/{live.requests} requests"
            if live.reference
            else f"level {k} of {len(levels)} ({at(c or 0)}): {live.done}/{live.requests} requests"
        )
    # the time left next, before the details: a narrow pane shows the start of the line
    details = (f", {live.in_flight} in flight" if live.in_flight is not None else "") + (f", {streamed} tokens" if streamed else "")
    details += f", {elapsed:.0f} s into the sweep"
    if settings.rates and c is not None:  # open loop: a level lasts as long as its schedule, and the last answers after
        later = [] if live.reference else levels[k:]
        left = max(0, live.requests - live.done) * RATE_KEY / c + sum(settings.requests_for(r) * RATE_KEY / r for r in later)
        return line + f", about {left:.0f} s of arrivals left" + details
    if not (rate := live.rate) or c is None:
        return line + details
    now = max(0.0, live.requests * settings.max_tokens - streamed) / rate  # this level's tokens still to come
    later = [] if live.reference else levels[k:]
    timed = [(lv.c, lv.wall_s * lv.c / lv.requests) for lv in done if not lv.reference and lv.requests and lv.wall_s]
    points = sorted(dict(timed).items())
    if len(points) < 2:  # a request's time at this level's rate so far, until two levels say more
        points = sorted(dict([*timed, (c, settings.max_tokens * c / rate)]).items())
    elif (left := waves(settings, c) * wave_s(points, c) - (time.monotonic() - live.started)) > 0:
        now = left  # its rate counts its first wave's prefill and ramp: the levels before say better
    if later and len(points) < 2:
        return line + f", this level about {now:.0f} s left" + details
    later_s = sum(waves(settings, level) * wave_s(points, level) for level in later)
    return line + f", about {now + later_s:.0f} s left" + details


def waves(settings: SweepSettings, c: int) -> int:
    """How many times a level's C slots each send a request: its requests over C, rounded up."""
    return -(-settings.requests_for(c) // c)


def wave_s(points: list[tuple[int, float]], c: int) -> float:
    """How long a wave of C requests should take, from the (C, seconds) of the two nearest levels timed below it, on
    their line: at least as long as at the last one (requests slow down as C grows), at most C/C_last times as long
    (the server saturated: throughput flat). A level timed already (measured again: the sweep's drift) took its own."""
    if (timed := dict(points).get(c)) is not None:
        return timed
    (c1, w1), (c2, w2) = points[-2], points[-1]
    on_line = w2 + (c - c2) * (w2 - w1) / (c2 - c1)
    return min(max(on_line, w2), w2 * c / c2)

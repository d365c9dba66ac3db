"""The Sweep pane's progress line: where a sweep is, and how long the rest should take."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from console.actions.sweep import SweepHandle
from console.sweep.model import LevelDone


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
    """Where the sweep is, and how long the rest should take: each level's cost (requests × max_tokens) over the
    throughput measured so far (the live rate, else the last level's); never negative."""
    settings = handle.settings
    levels = list(handle.process.repeat or settings.levels)
    c = live.c
    k = levels.index(c) + 1 if c in levels else len(done)
    streamed = max(live.tokens, live.streamed)  # finished requests', or all streamed so far
    rate = live.rate or next((e.total_tok_s for e in reversed(done) if e.total_tok_s), None)
    line = (
        f"C={c} again, for the sweep's drift: {live.done}/{live.requests} requests"
        if live.reference
        else f"level {k} of {len(levels)} (C={c}): {live.done}/{live.requests} requests"
    )
    if live.in_flight is not None:
        line += f", {live.in_flight} in flight"
    if streamed:
        line += f", {streamed} tokens"
    line += f", {elapsed:.0f} s"
    if rate:
        remaining_now = max(0, live.requests * settings.max_tokens - streamed)  # this level's tokens still to come
        later = 0 if live.reference else sum(settings.requests_for(level) * settings.max_tokens for level in levels[k:])
        line += f", about {max(0.0, (remaining_now + later) / rate):.0f} s left"
    return line

"""The Sweep pane's progress line: where a sweep is, and how long the rest should take."""

from __future__ import annotations

import time
from typing import Any

from console.actions.sweep import SweepHandle


def progress_line(handle: SweepHandle, live: dict[str, Any], done: list[dict[str, Any]], elapsed: float) -> str:
    """Where the sweep is, and how long the rest should take: each level's cost (requests × max_tokens) over the
    throughput measured so far (the live rate, else the last level's); never negative."""
    settings = handle.settings
    levels = list(handle.process.repeat or settings.levels)
    c = live["c"]
    k = levels.index(c) + 1 if c in levels else len(done)
    streamed = max(live.get("tokens") or 0, live.get("streamed") or 0)  # finished requests', or all streamed so far
    rate = streamed / max(1e-6, time.monotonic() - live["started"]) if streamed else None
    rate = rate or next((e["total_tok_s"] for e in reversed(done) if e.get("total_tok_s")), None)
    line = f"level {k} of {len(levels)} (C={c}): {live['done']}/{live['requests']} requests"
    if live.get("in_flight") is not None:
        line += f", {live['in_flight']} in flight"
    if streamed:
        line += f", {streamed} tokens"
    line += f", {elapsed:.0f} s"
    if rate:
        remaining_now = max(0, live["requests"] * settings.max_tokens - streamed)  # this level's tokens still to come
        later = sum(settings.requests_for(level) * settings.max_tokens for level in levels[k:])
        line += f", about {max(0.0, (remaining_now + later) / rate):.0f} s left"
    return line

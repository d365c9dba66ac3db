"""Another tool's per-request records as pivot's own (console/sweep/metrics.py RequestRecord), so that a level imported
with them gets the same figures and 95 % intervals as a level pivot measured: level_metrics over its requests."""

from __future__ import annotations

import math
from collections.abc import Sequence

from console.sweep.level_stats import level_metrics
from console.sweep.metrics import RequestRecord
from console.sweep.model import LevelDone


def chunks_of(ttft: float, gaps: Sequence[float], tokens: int) -> tuple[tuple[float, int], ...]:
    """Arrivals from a first-token time and the gaps after it (each a streamed chunk), the request's tokens shared
    evenly among them (a tool that records gaps, not tokens per chunk, says no more)."""
    times = [ttft]
    for gap in gaps:
        times.append(times[-1] + gap)
    if tokens <= 0:
        return ()
    base, extra = divmod(tokens, len(times))
    shares = [base + (1 if i < extra else 0) for i in range(len(times))]
    return tuple((t, n) for t, n in zip(times, shares, strict=True) if n > 0)


def record(
    c: int,
    index: int,
    *,
    start: float,
    ttft: float | None,
    e2e: float | None,
    tokens: int,
    gaps: Sequence[float] = (),
    error: str | None = None,
) -> RequestRecord:
    """One request as pivot records it; times in seconds (start: since the level began)."""
    for what, value in (("start", start), ("ttft", ttft), ("e2e", e2e), *((f"gap {i}", g) for i, g in enumerate(gaps))):
        if value is not None and (not math.isfinite(value) or value < 0):
            raise ValueError(f"request {index}: {what} is {value}, not a time")
    if error:
        return RequestRecord(c, index, start, None, error, None, None, 0)
    chunks = chunks_of(ttft, gaps, tokens) if ttft is not None else ()
    return RequestRecord(c, index, start, 200, None, ttft, e2e, tokens, False, chunks, finish_reason="length")


def level_of(c: int, records: list[RequestRecord], wall_s: float, server: dict[str, float] | None = None) -> LevelDone:
    """The level's numbers from its requests, as pivot computes its own."""
    if not records:
        raise ValueError("no per-request records")
    metrics = level_metrics(c, records, wall_s, server)
    return LevelDone.model_validate(metrics.model_dump())

"""Per-request and per-level numbers from what the load generator recorded. Pure functions.

A speculative server sends several tokens in one chunk, so inter-token
latency is computed per token: a chunk of n tokens that arrived g seconds
after the previous one contributes n gaps of g/n. Token counts come from
the server's usage; where a server sent none, the chunk count stands in and
the result says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RequestRecord:
    c: int
    index: int
    start: float  # seconds since the level started
    status: int | None
    error: str | None
    ttft: float | None  # seconds to the first content
    e2e: float | None
    tokens: int  # output tokens (usage, or chunks when usage_missing)
    usage_missing: bool = False
    chunks: tuple[tuple[float, int], ...] = ()  # (seconds since start, tokens in the chunk)
    warmup: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def decode_tok_s(self) -> float | None:
        """This request's speed once tokens flow: tokens after the first over the time they took."""
        if not self.ok or self.ttft is None or self.e2e is None or self.tokens < 2 or self.e2e <= self.ttft:
            return None
        first_chunk = self.chunks[0][1] if self.chunks else 1
        return (self.tokens - first_chunk) / (self.e2e - self.ttft) if self.tokens > first_chunk else None

    def itl(self) -> list[float]:
        gaps = []
        for (t0, _), (t1, n) in zip(self.chunks, self.chunks[1:]):
            if n > 0:
                gaps += [(t1 - t0) / n] * n
        return gaps

    def to_dict(self) -> dict:
        return {"c": self.c, "i": self.index, "start": self.start, "status": self.status, "error": self.error,
                "ttft": self.ttft, "e2e": self.e2e, "tokens": self.tokens, "usage_missing": self.usage_missing,
                "chunks": [list(c) for c in self.chunks], "warmup": self.warmup}

    @classmethod
    def from_dict(cls, d: dict) -> RequestRecord:
        return cls(int(d["c"]), int(d["i"]), float(d["start"]), d.get("status"), d.get("error"), d.get("ttft"),
                   d.get("e2e"), int(d.get("tokens", 0)), bool(d.get("usage_missing")),
                   tuple((float(t), int(n)) for t, n in d.get("chunks", ())), bool(d.get("warmup")))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass(frozen=True)
class LevelMetrics:
    c: int
    requests: int
    errors: int
    wall_s: float
    output_tokens: int
    total_tok_s: float
    steady_tok_s: float | None  # only while all C slots were busy
    req_tok_s_mean: float | None
    req_tok_s_p50: float | None
    ttft_p50: float | None
    ttft_p90: float | None
    ttft_p99: float | None
    itl_p50: float | None
    itl_p90: float | None
    itl_p99: float | None
    e2e_p50: float | None
    e2e_p90: float | None
    e2e_p99: float | None
    requests_per_s: float
    usage_missing: int = 0
    server: dict = field(default_factory=dict)  # the server's own view (/metrics), means over the level

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


def level_metrics(c: int, records: Sequence[RequestRecord], wall_s: float, server: dict | None = None) -> LevelMetrics:
    counted = [r for r in records if not r.warmup]
    ok = [r for r in counted if r.ok]
    tokens = sum(r.tokens for r in ok)
    speeds = [s for r in ok if (s := r.decode_tok_s) is not None]
    itl = [g for r in ok for g in r.itl()]
    ttft = [r.ttft for r in ok if r.ttft is not None]
    e2e = [r.e2e for r in ok if r.e2e is not None]
    return LevelMetrics(
        c=c, requests=len(counted), errors=len(counted) - len(ok), wall_s=wall_s, output_tokens=tokens,
        total_tok_s=tokens / wall_s if wall_s > 0 else 0.0, steady_tok_s=steady_throughput(c, ok),
        req_tok_s_mean=sum(speeds) / len(speeds) if speeds else None, req_tok_s_p50=percentile(speeds, 50),
        ttft_p50=percentile(ttft, 50), ttft_p90=percentile(ttft, 90), ttft_p99=percentile(ttft, 99),
        itl_p50=percentile(itl, 50), itl_p90=percentile(itl, 90), itl_p99=percentile(itl, 99),
        e2e_p50=percentile(e2e, 50), e2e_p90=percentile(e2e, 90), e2e_p99=percentile(e2e, 99),
        requests_per_s=len(ok) / wall_s if wall_s > 0 else 0.0,
        usage_missing=sum(r.usage_missing for r in ok), server=server or {},
    )


def steady_throughput(c: int, records: Sequence[RequestRecord]) -> float | None:
    """Tokens per second over the window in which C requests were in flight at every moment.

    The window opens when the C-th request of the level has started and closes
    when the first slot finds no more work: the start of the last request.
    """
    timed = sorted((r for r in records if r.e2e is not None), key=lambda r: r.start)
    if len(timed) <= c:
        return None
    opened = timed[c - 1].start
    closed = timed[-1].start
    if closed - opened <= 0:
        return None
    tokens = sum(n for r in timed for t, n in r.chunks if opened <= r.start + t <= closed)
    return tokens / (closed - opened)

"""Per-request and per-level numbers from what the load generator recorded. Pure functions.

A speculative server sends several tokens at once, in one chunk (SGLang,
vLLM) or in a burst of one-token chunks (llama.cpp's llama-server), so
inter-token latency is computed per token over arrivals: chunks that came
within BURST_S of each other arrived together, and an arrival of n tokens
g seconds after the previous one contributes n gaps of g/n. Token counts come from
the server's usage; where a server sent none, the request says how it was
counted instead (see `token_source`).

Every level carries 95 % confidence intervals over its requests, so that a
comparison can tell a difference from noise:
- total tok/s: the level's throughput is C x (tokens / busy seconds) of its
  requests, a ratio of sums, whose relative interval comes from the delta
  method with Student's t (honest for the handful of requests of a C=1 level);
- per-request tok/s, TTFT and ITL: the interval of the mean over requests.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from console.sweep.model import LevelMetrics

BURST_S = 0.001  # chunks closer than this came in one read: no request decodes 1,000 tokens a second
FAILED_ERROR_RATE = 0.05  # a level with more failed requests than this is not measured: it is marked failed
_Z975 = NormalDist().inv_cdf(0.975)


@dataclass(frozen=True)
class RequestRecord:
    c: int
    index: int
    start: float  # seconds since the level started
    status: int | None
    error: str | None
    ttft: float | None  # seconds to the first content
    e2e: float | None
    tokens: int  # output tokens (see token_source)
    usage_missing: bool = False  # the server sent no usage: tokens were counted another way
    chunks: tuple[tuple[float, int], ...] = ()  # (seconds since start, tokens in the chunk)
    warmup: bool = False
    finish_reason: str | None = None  # "length", "stop", …: the server's own word on why the stream ended
    over_asked: bool = False  # the server reported more tokens than max_tokens asked for
    retried: bool = False  # sent again on a connection of its own: the server had closed the kept-alive one
    timings: dict[str, float] | None = None  # the server's own record of the request, where it sends one (llama-server)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def short(self) -> bool:
        """Ended before max_tokens because the model stopped (finish_reason "stop"): its tokens count."""
        return self.ok and self.finish_reason not in (None, "length")

    @property
    def decode_tok_s(self) -> float | None:
        """This request's speed once tokens flow: tokens after the first chunk over the time they took."""
        if not self.ok or self.ttft is None or self.e2e is None or self.tokens < 2 or self.e2e <= self.ttft:
            return None
        first = self.arrivals()[0][1] if self.chunks else 1
        return (self.tokens - first) / (self.e2e - self.ttft) if self.tokens > first else None

    def arrivals(self) -> list[tuple[float, int]]:
        """(time, tokens) of each arrival: the chunks that came within BURST_S of the one before, together."""
        merged: list[tuple[float, int]] = []
        last = -math.inf
        for t, n in self.chunks:
            if merged and t - last < BURST_S:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((t, n))
            last = t
        return merged

    def itl(self) -> list[float]:
        gaps = []
        for (t0, _), (t1, n) in itertools.pairwise(self.arrivals()):
            if n > 0:
                gaps += [(t1 - t0) / n] * n
        return gaps

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "c": self.c,
            "i": self.index,
            "start": self.start,
            "status": self.status,
            "error": self.error,
            "ttft": self.ttft,
            "e2e": self.e2e,
            "tokens": self.tokens,
            "usage_missing": self.usage_missing,
            "chunks": [list(c) for c in self.chunks],
            "warmup": self.warmup,
            "finish_reason": self.finish_reason,
        }
        if self.over_asked:
            d["over_asked"] = True
        if self.retried:
            d["retried"] = True
        if self.timings:
            d["timings"] = self.timings
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        return cls(
            int(d["c"]),
            int(d["i"]),
            float(d["start"]),
            d.get("status"),
            d.get("error"),
            d.get("ttft"),
            d.get("e2e"),
            int(d.get("tokens") or 0),
            bool(d.get("usage_missing")),
            tuple((float(t), int(n)) for t, n in d.get("chunks") or ()),
            bool(d.get("warmup")),
            d.get("finish_reason"),
            bool(d.get("over_asked")),
            bool(d.get("retried")),
            d["timings"] if isinstance(d.get("timings"), dict) else None,
        )


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def t975(df: int) -> float:
    """Student's t quantile for a two-sided 95 % interval (Cornish-Fisher; within 0.3 % of tables from df = 2)."""
    if df < 1:
        return math.inf
    if df == 1:
        return 12.706
    z = _Z975
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def mean_interval(values: Sequence[float]) -> tuple[float, float, float] | None:
    """(mean, low, high) of a 95 % interval of the mean; None with fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def ratio_relative_halfwidth(ys: Sequence[float], xs: Sequence[float]) -> float | None:
    """Relative half-width of a 95 % interval of sum(ys) / sum(xs) over pairs (delta method, Student's t)."""
    n = len(xs)
    if n < 2 or sum(xs) <= 0 or sum(ys) <= 0:
        return None
    ratio = sum(ys) / sum(xs)
    mean_x = sum(xs) / n
    residuals = [y - ratio * x for x, y in zip(xs, ys, strict=True)]
    se = math.sqrt(sum(r * r for r in residuals) / (n - 1) / n) / mean_x
    return t975(n - 1) * se / ratio


def _request_itl_mean(r: RequestRecord) -> float | None:
    speed = r.decode_tok_s
    return 1 / speed if speed else None


def drafted(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Speculation over these requests from the server's own record of each (llama-server's timings: draft tokens
    proposed and accepted, exact per request); {} where none drafted."""
    timed = [r.timings for r in records if r.ok and not r.warmup and r.timings]
    if not timed:
        return {}
    proposed = sum(t.get("draft_n", 0) for t in timed)
    accepted = sum(t.get("draft_n_accepted", 0) for t in timed)
    if proposed <= 0:  # the server's own record of every request: it drafted nothing (whatever it was set to do)
        return {"spec_draft_tokens": 0.0}
    if not 0 <= accepted <= proposed:
        return {}
    return {"spec_accept_rate": accepted / proposed, "spec_draft_tokens": proposed}


def level_metrics(
    c: int,
    records: Sequence[RequestRecord],
    wall_s: float,
    server: dict[str, float] | None = None,
    *,
    failed: str | None = None,
    attempts: int = 1,
) -> LevelMetrics:
    counted = [r for r in records if not r.warmup]
    ok = [r for r in counted if r.ok]
    tokens = sum(r.tokens for r in ok)
    speeds = [s for r in ok if (s := r.decode_tok_s) is not None]
    itl = [g for r in ok for g in r.itl()]
    ttft = [r.ttft for r in ok if r.ttft is not None]
    e2e = [r.e2e for r in ok if r.e2e is not None]
    total = tokens / wall_s if wall_s > 0 else 0.0
    busy = [(r.tokens, r.e2e) for r in ok if r.e2e]
    rel = ratio_relative_halfwidth([t for t, _ in busy], [s for _, s in busy])
    speed_ci = mean_interval(speeds)
    ttft_ci = mean_interval(ttft)
    itl_ci = mean_interval([m for r in ok if (m := _request_itl_mean(r)) is not None])
    errors = len(counted) - len(ok)
    if failed is None and counted and errors / len(counted) > FAILED_ERROR_RATE:
        failed = f"{errors} of {len(counted)} requests failed"
    return LevelMetrics(
        c=c,
        requests=len(counted),
        errors=errors,
        wall_s=wall_s,
        output_tokens=tokens,
        total_tok_s=total,
        steady_tok_s=steady_throughput(c, ok),
        req_tok_s_mean=sum(speeds) / len(speeds) if speeds else None,
        req_tok_s_p50=percentile(speeds, 50),
        ttft_p50=percentile(ttft, 50),
        ttft_p90=percentile(ttft, 90),
        ttft_p99=percentile(ttft, 99),
        itl_p50=percentile(itl, 50),
        itl_p90=percentile(itl, 90),
        itl_p99=percentile(itl, 99),
        e2e_p50=percentile(e2e, 50),
        e2e_p90=percentile(e2e, 90),
        e2e_p99=percentile(e2e, 99),
        requests_per_s=len(ok) / wall_s if wall_s > 0 else 0.0,
        usage_missing=sum(r.usage_missing for r in ok),
        server={**(server or {}), **drafted(counted)},
        total_tok_s_lo=total * (1 - rel) if rel is not None else None,
        total_tok_s_hi=total * (1 + rel) if rel is not None else None,
        req_tok_s_lo=speed_ci[1] if speed_ci else None,
        req_tok_s_hi=speed_ci[2] if speed_ci else None,
        ttft_mean=ttft_ci[0] if ttft_ci else None,
        ttft_lo=ttft_ci[1] if ttft_ci else None,
        ttft_hi=ttft_ci[2] if ttft_ci else None,
        itl_mean=itl_ci[0] if itl_ci else None,
        itl_lo=itl_ci[1] if itl_ci else None,
        itl_hi=itl_ci[2] if itl_ci else None,
        short=sum(r.short for r in ok),
        over_asked=sum(r.over_asked for r in ok),
        first_error=next((r.error for r in counted if r.error), None),
        failed=failed,
        attempts=attempts,
        retried=sum(r.retried for r in counted),
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

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
    chunks: tuple[tuple[float, int], ...] = ()  # (seconds since start, tokens): a read's chunks as one (BURST_S)
    warmup: bool = False
    finish_reason: str | None = None  # "length", "stop", …: the server's own word on why the stream ended
    over_asked: bool = False  # the server reported more tokens than max_tokens asked for
    retried: bool = False  # sent again on a connection of its own: the server had closed the kept-alive one
    timings: dict[str, float] | None = None  # the server's own record of the request, where it sends one (llama-server)
    prompt_tokens: int | None = None  # the prompt's tokens, by the server's usage (None: it did not say)

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
        return self.decode_speed(self.arrivals() if self.chunks else [])

    def decode_speed(self, arrivals: list[tuple[float, int]]) -> float | None:
        """decode_tok_s, from this request's arrivals."""
        if not self.ok or self.ttft is None or self.e2e is None or self.tokens < 2 or self.e2e <= self.ttft:
            return None
        first = arrivals[0][1] if arrivals else 1
        return (self.tokens - first) / (self.e2e - self.ttft) if self.tokens > first else None

    def arrivals(self) -> list[tuple[float, int]]:
        """(time, tokens) of each arrival: the chunks that came within BURST_S of the one before, together."""
        chunks = self.chunks
        if all(t1 - t0 >= BURST_S for (t0, _), (t1, _) in itertools.pairwise(chunks)):  # none together: most streams
            return list(chunks)
        merged: list[tuple[float, int]] = []
        last = -math.inf
        for t, n in chunks:
            if merged and t - last < BURST_S:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((t, n))
            last = t
        return merged

    def itl_gaps(self, arrivals: list[tuple[float, int]] | None = None) -> list[tuple[float, int]]:
        """(gap, n): an arrival of n tokens g seconds after the one before is n gaps of g/n."""
        return [((t1 - t0) / n, n) for (t0, _), (t1, n) in itertools.pairwise(self.arrivals() if arrivals is None else arrivals) if n > 0]

    def itl(self) -> list[float]:
        return [gap for gap, n in self.itl_gaps() for _ in range(n)]

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
            "chunks": self.chunks,  # (t, n) pairs: JSON arrays as they are written
            "warmup": self.warmup,
            "finish_reason": self.finish_reason,
        }
        if self.over_asked:
            d["over_asked"] = True
        if self.retried:
            d["retried"] = True
        if self.timings:
            d["timings"] = self.timings
        if self.prompt_tokens is not None:
            d["prompt_tokens"] = self.prompt_tokens
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
            int(d["prompt_tokens"]) if isinstance(d.get("prompt_tokens"), int) else None,
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


def drafted_from(proposed: float, accepted: float, predicted: float) -> dict[str, float]:
    """Speculation over a level's requests from the server's own record of each (llama-server's timings: draft tokens
    proposed and accepted, and tokens predicted, exact per request, summed here). Every decode step yields one token of
    the target model's and the drafts it accepted, so the steps were predicted - accepted, and a step kept
    predicted / (predicted - accepted) tokens."""
    if proposed <= 0:  # the server's own record of every request: it drafted nothing (whatever it was set to do)
        return {"spec_draft_tokens": 0.0, "spec_accepted_tokens": 0.0}
    if not 0 <= accepted <= proposed:
        return {}
    found = {"spec_accept_rate": accepted / proposed, "spec_draft_tokens": proposed, "spec_accepted_tokens": accepted}
    if predicted > accepted:
        found |= {"spec_output_tokens": predicted, "spec_accept_length": predicted / (predicted - accepted)}
    return found

"""A level's numbers gathered as its requests finish, so that what the load generator holds is bounded by the level's
rate, not its length: counts and sums for the means, their intervals and the throughput's (exact: they need sums, not
every request), and each distribution exact up to EXACT_UP_TO values (ITL_EXACT_UP_TO gaps), then in a DDSketch (a percentile within
SKETCH_ACCURACY of its value); the steady window's token arrivals past TIMELINE_EXACT_UP_TO in BIN_S bins (8 bytes
each: under 3 MiB for an hour). Each request is streamed to events.jsonl as it finishes and not kept. A level read
back whole (pooled repeats) is computed exactly: `level_metrics` lifts the bounds.
console/sweep/metrics.py says what each figure means; `level_metrics` there is these, fed a list."""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Iterable, Sequence

from ddsketch import DDSketch

from console.sweep.metrics import FAILED_ERROR_RATE, RequestRecord, drafted_from, percentile, t975
from console.sweep.model import LevelMetrics

EXACT_UP_TO = 50_000  # values of one distribution kept as they are (400 KB); past it, the sketch
# inter-token gaps, one a token: a sketch's add is Python's, a token's largest cost in the load generator's stats, so
# these are kept as they are longer (8 MB: a 4,000-request level of 250-token answers)
ITL_EXACT_UP_TO = 1_000_000
SKETCH_ACCURACY = 0.005  # a sketched percentile is within 0.5 % of the true one
TIMELINE_EXACT_UP_TO = 200_000  # token arrivals kept as they are; past it, counted in BIN_S bins
BIN_S = 0.01  # the steady window's edges are then as precise as this


class Quantiles:
    """One distribution: its values until there are EXACT_UP_TO, then a sketch of them."""

    def __init__(self, exact_up_to: float = EXACT_UP_TO) -> None:
        self._values = array("d")
        self._sketch: DDSketch | None = None
        self._exact_up_to = exact_up_to

    def add(self, value: float, weight: int = 1) -> None:
        self.add_weighted(((value, weight),))

    def add_weighted(self, pairs: Iterable[tuple[float, int]]) -> None:
        """Each value `weight` times: a request's inter-token gaps."""
        if self._sketch is not None:
            add = self._sketch.add
            for value, weight in pairs:
                add(value, weight)
            return
        for value, weight in pairs:
            if weight == 1:
                self._values.append(value)
            else:
                self._values.extend([value] * weight)
        if len(self._values) > self._exact_up_to:
            self._sketch = DDSketch(SKETCH_ACCURACY)
            for v in self._values:
                self._sketch.add(v)
            self._values = array("d")

    def percentile(self, q: float) -> float | None:
        if self._sketch is None:
            return percentile(self._values, q)
        return self._sketch.get_quantile_value(q / 100)


def percentile_interval(values: Quantiles, q: float, n: int) -> tuple[float | None, float | None]:
    """The 95 % interval of the q-th percentile from n independent draws, distribution-free: the values at the ranks
    the binomial distribution bounds (its normal approximation). A distribution of more values than n draws (ITL over
    every token of n requests: a request's tokens are not independent of each other) is read at those ranks as shares
    of it. (None, None) from fewer than two draws."""
    if n < 2:
        return None, None
    share = q / 100
    half = 1.96 * math.sqrt(n * share * (1 - share))
    low, high = math.floor(n * share - half), math.ceil(n * share + half)
    # a rank past the draws' ends: the interval's end lies beyond what was drawn, and is not known (None)
    return (
        values.percentile(100 * low / (n - 1)) if low >= 0 else None,
        values.percentile(100 * high / (n - 1)) if high <= n - 1 else None,
    )


class Moments:
    """The mean of some values and its 95 % interval (Welford's running mean and sum of squares)."""

    def __init__(self) -> None:
        self.n, self.mean, self._m2 = 0, 0.0, 0.0

    def add(self, value: float) -> None:
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self._m2 += delta * (value - self.mean)

    def interval(self) -> tuple[float, float, float] | None:
        """(mean, low, high); None with fewer than two values."""
        if self.n < 2:
            return None
        half = t975(self.n - 1) * math.sqrt(self._m2 / (self.n - 1)) / math.sqrt(self.n)
        return self.mean, self.mean - half, self.mean + half


class RatioSums:
    """sum(y) / sum(x) over pairs and the relative half-width of its 95 % interval (delta method, Student's t), from
    the sums of x, y and their squares and product: the residuals' sum of squares is Syy - 2R Sxy + R^2 Sxx."""

    def __init__(self) -> None:
        self.n = 0
        self.x = self.y = self.xx = self.yy = self.xy = 0.0

    def add(self, y: float, x: float) -> None:
        self.n += 1
        self.x, self.y = self.x + x, self.y + y
        self.xx, self.yy, self.xy = self.xx + x * x, self.yy + y * y, self.xy + x * y

    def relative_halfwidth(self) -> float | None:
        if self.n < 2 or self.x <= 0 or self.y <= 0:
            return None
        ratio = self.y / self.x
        residuals = max(0.0, self.yy - 2 * ratio * self.xy + ratio * ratio * self.xx)
        se = math.sqrt(residuals / (self.n - 1) / self.n) / (self.x / self.n)
        return t975(self.n - 1) * se / ratio


class SteadyWindow:
    """Tokens per second while all C slots were busy: from the C-th request's start to the last request's start
    (metrics.steady_throughput), from the requests' starts and their tokens' arrival times."""

    def __init__(self, c: int, exact_up_to: float = TIMELINE_EXACT_UP_TO) -> None:
        self.c, self.n, self._exact_up_to = c, 0, exact_up_to
        self._earliest: list[float] = []  # the C earliest starts, negated (a max-heap)
        self._last_start = -math.inf
        self._t, self._tokens = array("d"), array("q")  # arrivals, until TIMELINE_EXACT_UP_TO of them
        self._bins: array[int] | None = None  # then tokens per BIN_S

    def add(self, start: float, chunks: Sequence[tuple[float, int]]) -> None:
        self.n += 1
        self._last_start = max(self._last_start, start)
        if len(self._earliest) < self.c:
            heapq.heappush(self._earliest, -start)
        elif start < -self._earliest[0]:
            heapq.heapreplace(self._earliest, -start)
        if (bins := self._bins) is not None:
            for t, n in chunks:  # (the body of _bin: this runs for every chunk of a long level)
                i = max(0, int((start + t) / BIN_S))
                if i >= len(bins):
                    bins.extend([0] * (i + 1 - len(bins)))
                bins[i] += n
            return
        self._t.extend([start + t for t, _ in chunks])
        self._tokens.extend([n for _, n in chunks])
        if len(self._t) > self._exact_up_to:
            self._bins = array("q")
            for t_, n_ in zip(self._t, self._tokens, strict=True):
                self._bin(t_, n_)
            self._t, self._tokens = array("d"), array("q")

    def _bin(self, t: float, n: int) -> None:
        assert self._bins is not None
        i = max(0, int(t / BIN_S))
        if i >= len(self._bins):
            self._bins.extend([0] * (i + 1 - len(self._bins)))
        self._bins[i] += n

    def tok_s(self) -> float | None:
        if self.n <= self.c:
            return None
        opened, closed = -self._earliest[0], self._last_start
        if closed - opened <= 0:
            return None
        if self._bins is None:
            tokens = sum(n for t, n in zip(self._t, self._tokens, strict=True) if opened <= t <= closed)
        else:
            tokens = sum(self._bins[int(opened / BIN_S) : int(closed / BIN_S) + 1])
        return tokens / (closed - opened)


class LevelStats:
    """A level's requests, added as each finishes; `metrics` gives its numbers (as metrics.level_metrics would from
    all of them at once)."""

    def __init__(self, c: int, *, exact: bool = False) -> None:
        """exact: every value kept (a level read back whole, its records in memory already)."""
        self.c = c
        self.counted = self.ok = self.tokens = self.all_tokens = 0
        self.usage_missing = self.short = self.over_asked = self.over_asked_any = self.retried = 0
        self.first_error: str | None = None
        self.speeds, self.ttft, self.itl_means = Moments(), Moments(), Moments()
        bound = math.inf if exact else EXACT_UP_TO
        self.speed_q, self.ttft_q, self.e2e_q = (Quantiles(bound) for _ in range(3))
        self.itl_q = Quantiles(math.inf if exact else ITL_EXACT_UP_TO)
        self.busy = RatioSums()
        self.steady = SteadyWindow(c, math.inf if exact else TIMELINE_EXACT_UP_TO)
        self.timed, self.proposed, self.accepted, self.predicted = 0, 0.0, 0.0, 0.0  # where the server recorded them
        self.prompted, self.prompt_tokens = 0, 0  # requests whose usage counted their prompt, and its tokens

    def add(self, r: RequestRecord) -> None:
        self.over_asked_any += r.over_asked  # warm-up and failed requests too: the server overran max_tokens
        self.all_tokens += r.tokens  # warm-up too: what a server's own counters count
        if r.warmup:
            return
        self.counted += 1
        self.retried += r.retried
        if not r.ok:
            if self.first_error is None and r.error:
                self.first_error = r.error
            return
        self.ok += 1
        self.tokens += r.tokens
        self.usage_missing += r.usage_missing
        self.short += r.short
        self.over_asked += r.over_asked
        arrivals = r.arrivals()
        if (speed := r.decode_speed(arrivals)) is not None:
            self.speeds.add(speed)
            self.speed_q.add(speed)
            if speed:
                self.itl_means.add(1 / speed)
        self.itl_q.add_weighted(r.itl_gaps(arrivals))
        if r.ttft is not None:
            self.ttft.add(r.ttft)
            self.ttft_q.add(r.ttft)
        if r.e2e is not None:
            self.e2e_q.add(r.e2e)
            self.steady.add(r.start, r.chunks)
            if r.e2e:
                self.busy.add(r.tokens, r.e2e)
        if r.prompt_tokens is not None:
            self.prompted += 1
            self.prompt_tokens += r.prompt_tokens
        if r.timings:
            self.timed += 1
            self.proposed += r.timings.get("draft_n", 0)
            self.accepted += r.timings.get("draft_n_accepted", 0)
            self.predicted += r.timings.get("predicted_n", 0)

    def metrics(
        self, wall_s: float, server: dict[str, float] | None = None, *, failed: str | None = None, attempts: int = 1
    ) -> LevelMetrics:
        total = self.tokens / wall_s if wall_s > 0 else 0.0
        ttft_p90, itl_p90 = percentile_interval(self.ttft_q, 90, self.ttft.n), percentile_interval(self.itl_q, 90, self.ok)
        speed_p50 = percentile_interval(self.speed_q, 50, self.speeds.n)
        rel = self.busy.relative_halfwidth()
        speed_ci, ttft_ci, itl_ci = self.speeds.interval(), self.ttft.interval(), self.itl_means.interval()
        errors = self.counted - self.ok
        if failed is None and self.counted and errors / self.counted > FAILED_ERROR_RATE:
            failed = f"{errors} of {self.counted} requests failed"
        return LevelMetrics(
            c=self.c,
            requests=self.counted,
            errors=errors,
            wall_s=wall_s,
            output_tokens=self.tokens,
            prompt_tokens=self.prompt_tokens if self.prompted else None,
            prompt_tokens_mean=self.prompt_tokens / self.prompted if self.prompted else None,
            total_tok_s=total,
            steady_tok_s=self.steady.tok_s(),
            req_tok_s_mean=self.speeds.mean if self.speeds.n else None,
            req_tok_s_p50=self.speed_q.percentile(50),
            ttft_p50=self.ttft_q.percentile(50),
            ttft_p90=self.ttft_q.percentile(90),
            ttft_p90_lo=ttft_p90[0],
            ttft_p90_hi=ttft_p90[1],
            itl_p90_lo=itl_p90[0],
            itl_p90_hi=itl_p90[1],
            req_tok_s_p50_lo=speed_p50[0],
            req_tok_s_p50_hi=speed_p50[1],
            ttft_p99=self.ttft_q.percentile(99),
            itl_p50=self.itl_q.percentile(50),
            itl_p90=self.itl_q.percentile(90),
            itl_p99=self.itl_q.percentile(99),
            e2e_p50=self.e2e_q.percentile(50),
            e2e_p90=self.e2e_q.percentile(90),
            e2e_p99=self.e2e_q.percentile(99),
            requests_per_s=self.ok / wall_s if wall_s > 0 else 0.0,
            usage_missing=self.usage_missing,
            server={**(server or {}), **(drafted_from(self.proposed, self.accepted, self.predicted) if self.timed else {})},
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
            short=self.short,
            over_asked=self.over_asked,
            first_error=self.first_error,
            failed=failed,
            attempts=attempts,
            retried=self.retried,
        )


def level_metrics(
    c: int,
    records: Sequence[RequestRecord],
    wall_s: float,
    server: dict[str, float] | None = None,
    *,
    failed: str | None = None,
    attempts: int = 1,
) -> LevelMetrics:
    """A level's numbers from its requests at once (a pooled repeat: the attempts' requests read back), exactly."""
    stats = LevelStats(c, exact=True)
    for r in records:
        stats.add(r)
    return stats.metrics(wall_s, server, failed=failed, attempts=attempts)


def steady_throughput(c: int, records: Sequence[RequestRecord]) -> float | None:
    """Tokens per second over the window in which C requests were in flight at every moment: it opens when the C-th
    request of the level has started and closes when the first slot finds no more work, at the last request's start."""
    window = SteadyWindow(c)
    for r in records:
        if r.e2e is not None:
            window.add(r.start, r.chunks)
    return window.tok_s()

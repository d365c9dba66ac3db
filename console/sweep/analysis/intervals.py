"""A level's figures with their 95 % intervals, and the verdict of two of them against a margin of practical
equivalence: who leads by more than the margin, that the two are alike (within it), or that nobody can tell; and how
many more requests would tell (intervals narrow with Student's t and the square root of the count).

Significant is not the same as worth acting on: two levels 0.3 % apart with tight intervals are alike, not a win."""

from __future__ import annotations

import math
from dataclasses import dataclass

from console.sweep.analysis.sides import Side, other
from console.sweep.metrics import t975
from console.sweep.model import LevelDone

MAX_REPEAT_FACTOR = 100  # more than 100x the requests to settle a level: say so instead of a count
MARGIN = 0.02  # [compare] margin's default: within ±2 % of each other, two figures are alike
# A figure another tool gave without per-request data (an aggregate, imported) is taken to lie within ±5 % of what
# it says: the rule pivot states for evidence it cannot put an interval on. Two such figures then decide a difference
# beyond about 9 % (±7.1 % combined, and the margin); a 3 % one is not decided, and they are never called alike.
POINT_SPREAD = 0.05
METRICS = {  # name -> (the level's value, low, high)
    "total": ("total_tok_s", "total_tok_s_lo", "total_tok_s_hi"),
    "per_request": ("req_tok_s_mean", "req_tok_s_lo", "req_tok_s_hi"),
    "ttft": ("ttft_mean", "ttft_lo", "ttft_hi"),
    "itl": ("itl_mean", "itl_lo", "itl_hi"),
    "energy": ("joules_per_token", "joules_per_token_lo", "joules_per_token_hi"),
}


@dataclass(frozen=True)
class Estimate:
    value: float | None
    lo: float | None
    hi: float | None
    point: bool = False  # an aggregate without per-request data: its interval is POINT_SPREAD's, not measured
    imported: bool = False  # another tool measured it: pivot cannot measure it again

    @property
    def known(self) -> bool:
        return self.value is not None

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.value is None:
            return None
        return (self.lo if self.lo is not None else self.value, self.hi if self.hi is not None else self.value)

    @property
    def relative_half(self) -> float:
        if not self.value or self.lo is None or self.hi is None:
            return 0.0
        return (self.hi - self.lo) / 2 / abs(self.value)


def estimate(level: LevelDone, metric: str, *, imported: bool = False) -> Estimate:
    """imported: the level is another tool's: a figure it gave without an interval gets POINT_SPREAD's."""
    value, lo, hi = (getattr(level, name) for name in METRICS[metric])
    if imported and value is not None and (lo is None or hi is None):
        return Estimate(value, value * (1 - POINT_SPREAD), value * (1 + POINT_SPREAD), point=True, imported=True)
    return Estimate(value, lo, hi, imported=imported)


@dataclass(frozen=True)
class Verdict:
    """One metric at one level: B over A, its 95 % interval, and who leads by more than the margin ("a", "b"), or
    that they are alike (within it), or neither (None, not alike: cannot tell)."""

    a: Estimate
    b: Estimate
    leader: Side | None
    alike: bool = False
    margin: float = MARGIN
    drift: float = 0.0  # how far the runs moved while measured, beyond the margin: a lead must exceed margin + drift

    @property
    def ratio(self) -> float | None:
        return self.b.value / self.a.value if self.a.value and self.b.value is not None else None

    @property
    def spread(self) -> float | None:
        """The ratio's relative 95 % half-width (both runs' uncertainties combined)."""
        if self.ratio is None:
            return None
        return self.ratio * math.hypot(self.a.relative_half, self.b.relative_half)

    @property
    def point(self) -> bool:
        """Either side is an aggregate: its interval is POINT_SPREAD's, and no repeat of it can narrow it."""
        return self.a.point or self.b.point

    @property
    def within_drift(self) -> bool:
        """Undecided only because the runs drifted: without the drift, one would lead."""
        if self.leader or not self.drift or self.ratio is None:
            return False
        spread = self.spread or 0.0
        return self.ratio - spread > 1 + self.margin or self.ratio + spread < 1 - self.margin

    @property
    def word(self) -> str:
        """The judgement in one word: "A", "B", "alike" or "cannot tell"."""
        return self.leader.upper() if self.leader else "alike" if self.alike else "cannot tell"

    def needed(self) -> float | None:
        """The relative spread B/A must narrow to for the level to settle (alike within the margin, or a lead beyond
        margin + drift); None where no narrowing can (it sits on an edge, or between the two), or it is not measured."""
        if self.ratio is None:
            return None
        off = abs(self.ratio - 1)
        if off < self.margin:
            room = self.margin - off
        elif off > self.margin + self.drift:
            room = off - self.margin - self.drift
        else:
            return None
        return room / self.ratio if room > 0 else None


@dataclass(frozen=True)
class Level:
    """One level both runs measured, and the verdict of each figure there."""

    c: int
    total: Verdict
    per_request: Verdict
    ttft: Verdict | None  # None where latencies were not measurable (the client's loop ran late)
    itl: Verdict | None
    a: LevelDone
    b: LevelDone
    energy: Verdict | None = None  # joules per output token (None where a host read no GPU power)


def judge(a: Estimate, b: Estimate, higher_is_better: bool = True, margin: float = MARGIN, drift: float = 0.0) -> Verdict:
    """B/A with its 95 % interval against 1 ± margin: beyond it wholly, one leads; within it wholly, they are alike;
    across an edge, nobody can tell. drift: how far the runs moved while measured, beyond the margin: to lead, B/A
    must lie beyond 1 ± (margin + drift)."""
    verdict = Verdict(a, b, None, margin=margin, drift=drift)
    if verdict.ratio is None or None in (a.lo, a.hi, b.lo, b.hi):  # a figure without its interval decides nothing
        return verdict
    spread = verdict.spread or 0.0
    lo, hi = verdict.ratio - spread, verdict.ratio + spread
    higher: Side
    if lo > 1 + margin + drift:
        higher = "b"
    elif hi < 1 - margin - drift:
        higher = "a"
    else:
        return Verdict(a, b, None, alike=1 - margin <= lo and hi <= 1 + margin, margin=margin, drift=drift)
    return Verdict(a, b, higher if higher_is_better else other(higher), margin=margin, drift=drift)


def more_requests(n: int, half: float, room: float) -> int | None:
    """Requests to add to n so that a 95 % interval of half-width `half` narrows to `room`: its spread stays, Student's
    t and the square root of the count shrink it. None when that takes too many (the two are alike)."""
    if room <= 0:
        return None
    sd = half * math.sqrt(n) / t975(n - 1)
    need = n
    for _ in range(8):  # t depends on the count it decides: a few rounds settle it
        need = max(n + 1, math.ceil((t975(need - 1) * sd / room) ** 2))
    return need - n if need <= MAX_REPEAT_FACTOR * n else None

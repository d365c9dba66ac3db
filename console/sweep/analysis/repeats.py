"""What would settle a comparison's uncertain levels: for each level where nobody leads by more than the margin and
the two are not alike within it, how many more requests (of one run, or of both) would bring B/A's interval wholly
within the margin or wholly beyond it. Intervals narrow as the square root of the requests (and Student's t): an
estimate, made again from the numbers after each repeat."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from console.sweep.analysis.intervals import Level, Verdict, more_requests
from console.sweep.analysis.sides import SIDES, Side

# Why a level is to be repeated: the comparison "estimate"s how many more requests would settle it; or nothing pivot
# measures again would: an imported "aggregate" (only a sweep with pivot gives it an interval), a level of an
# "imported" run, the runs' "drift" (measuring the drifting run again would), or it sits on the margin's "edge".
RepeatWhy = Literal["estimate", "aggregate", "imported", "drift", "edge"]


@dataclass(frozen=True)
class Repeat:
    c: int
    metric: str  # "total" or "per_request": the figure that cannot be told
    verdict: Verdict
    why: RepeatWhy
    more_requests: int | None = None  # per run repeated, to settle the level; None: it cannot be told how many
    sides: tuple[Side, ...] = ("a", "b")  # whose level to repeat: the wider interval alone when that suffices
    alone: dict[Side, int] = field(default_factory=dict)  # the requests of that run alone that would settle it


def repeats(cmp_levels: list[Level]) -> list[Repeat]:
    """For each level where total throughput or per-request speed cannot be told (neither a lead beyond the margin
    nor alike within it): how many more requests would settle it, of one run where its interval alone is in the way.
    Intervals narrow as the square root of the requests; an estimate, made again after each repeat."""
    found = []
    for lv in cmp_levels:
        best: tuple[int, Repeat] | None = None
        for metric in ("total", "per_request"):
            v: Verdict = getattr(lv, metric)
            if v.leader or v.alike or v.ratio is None or min(lv.a.requests, lv.b.requests) < 2:
                continue
            options = [] if v.point else _options(lv, v)
            if not options:
                imported = v.a.imported or v.b.imported
                candidate, cost = Repeat(lv.c, metric, v, _why_not(v), sides=() if imported else ("a", "b")), 10**9
            else:
                more, sides = min(options, key=lambda o: o[0] * len(o[1]))
                alone = {s[0]: m for m, s in options if len(s) == 1}
                candidate, cost = Repeat(lv.c, metric, v, "estimate", more, sides, alone), more * len(sides)
            if best is None or cost < best[0]:
                best = (cost, candidate)
        if best is not None:
            found.append(best[1])
    return found


def _options(lv: Level, v: Verdict) -> list[tuple[int, tuple[Side, ...]]]:
    """(more requests, whose) that would settle the level: of both runs, or of one where its interval alone is in the
    way; never of an imported run (pivot cannot measure it again)."""
    needed = v.needed()
    if needed is None:
        return []
    ha, hb = v.a.relative_half, v.b.relative_half
    own = {s for s, e in zip(SIDES, (v.a, v.b), strict=True) if not e.imported}
    options: list[tuple[int, tuple[Side, ...]]] = []
    choices: tuple[tuple[tuple[Side, ...], float | None], ...] = (
        (("a", "b"), _narrowed(ha, hb, needed, both=True)),
        (("b",), _narrowed(hb, ha, needed)),
        (("a",), _narrowed(ha, hb, needed)),
    )
    for sides, narrowed in choices:
        if not own.issuperset(sides):
            continue
        half = ha if sides == ("a",) else hb if sides == ("b",) else max(ha, hb)
        count = lv.a.requests if sides == ("a",) else lv.b.requests if sides == ("b",) else min(lv.a.requests, lv.b.requests)
        if narrowed is not None and (more := more_requests(count, half, half * narrowed)) is not None:
            options.append((more, sides))
    return options


def _why_not(v: Verdict) -> RepeatWhy:
    """Why no count of more requests of pivot's would settle a level."""
    if v.point:
        return "aggregate"
    if v.a.imported or v.b.imported:
        return "imported"
    return "drift" if v.within_drift else "edge"


def _narrowed(own: float, other: float, needed: float, *, both: bool = False) -> float | None:
    """By what factor one run's relative half-width must narrow (both runs' when `both`) for the combined spread to
    come under `needed`; None when narrowing it cannot (the other run's alone is too wide), or it is not wide."""
    if both:
        total = math.hypot(own, other)
        return needed / total if total > needed else None
    if own <= 0 or other >= needed:
        return None
    factor = math.sqrt(needed**2 - other**2) / own
    return factor if factor < 1 else None


def repeat_seconds(levels: list[Level], side: Side, cs: list[int], requests: int) -> float | None:
    """About how long a repeat of these levels of one run takes at the rates they measured; None where a level has
    no measured rate."""
    measured = {lv.c: (lv.a if side == "a" else lv.b).requests_per_s for lv in levels}
    rates = [rate for c in cs if (rate := measured.get(c))]
    return sum(requests / rate for rate in rates) if len(rates) == len(cs) else None


REPEAT_ROUNDS = 3  # `u`, --repeat-uncertain: at most this many repeats, each estimated again from the numbers
REPEAT_CAP = 2000  # requests a level is repeated with at most in one round

# Why no level of the run is to be measured: every level is "settled"; the undecided levels are "imported" (pivot
# does not measure another tool's run again); none is one more requests would settle ("unsettleable"); neither run's
# server is running ("other_server": switch first); or this run's levels alone would not settle them ("not_alone").
Refusal = Literal["settled", "imported", "unsettleable", "other_server", "not_alone"]


@dataclass(frozen=True)
class RepeatPlan:
    """What one run's repeat would measure to settle a comparison, or why none would: decided once for the pane's `u`,
    `pivot sweep --repeat-uncertain` and a runbook's repeat."""

    side: Side | None  # the run to repeat
    wanted: dict[int, int]  # C -> requests of that run alone the comparison estimates would settle it
    refusal: Refusal | None = None  # why nothing of this run is to be measured (None: `wanted` is the plan)
    levels: tuple[int, ...] = ()  # "imported": those levels; "not_alone": those only both runs' repeats would settle
    need: tuple[Side, ...] = ()  # "other_server": the runs whose levels are to be repeated

    @property
    def estimate(self) -> int:
        return max(self.wanted.values(), default=0)

    @property
    def requests(self) -> int:
        """Requests each level is measured with in this round: the largest estimate, capped."""
        return min(REPEAT_CAP, self.estimate)


def repeat_plan(found: list[Repeat], side: Side | None) -> RepeatPlan:
    """side: the run whose server is running (None: neither's). An imported run's level is never repeated
    (Repeat.sides is empty)."""
    if not found:
        return RepeatPlan(side, {}, "settled")
    if not any(r.more_requests for r in found):
        imported = tuple(r.c for r in found if not r.sides)
        return RepeatPlan(side, {}, "imported", levels=imported) if imported else RepeatPlan(side, {}, "unsettleable")
    if side is None:
        return RepeatPlan(side, {}, "other_server", need=tuple(s for s in SIDES if any(r.more_requests and s in r.sides for r in found)))
    wanted = {r.c: r.alone[side] for r in found if side in r.alone}
    if not wanted:
        return RepeatPlan(side, {}, "not_alone", levels=tuple(r.c for r in found if r.more_requests and len(r.sides) == 2))
    return RepeatPlan(side, wanted)

"""Where the lead changes hands between two runs, read from the per-level verdicts, and why nobody leads where nobody
does: as data (console/sweep/words/ says it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from console.sweep.analysis.intervals import Level, Verdict
from console.sweep.analysis.sides import Side

# How the lead goes across the levels: "alike" at every level, "nobody" leads anywhere, "one" run leads wherever anyone
# does, the lead changes "many" times, or once: "between" two levels (undecided ones lie between) or "at" a C between
# two neighbouring levels, interpolated.
Shape = Literal["alike", "nobody", "one", "many", "between", "at"]


@dataclass(frozen=True)
class Crossover:
    metric: str
    shape: Shape
    at: float | None = None  # interpolated C where the lead changes hands ("at" only)
    leader_below: Side | None = None  # "one": the run that leads
    leader_above: Side | None = None
    below: int | None = None  # "between", "at": the last level led by leader_below
    above: int | None = None  # the first led by leader_above


# Why nobody can tell at a level (the per-level lines, the recommendation and the crossover say the same, so that the
# advice never contradicts a level's own line): a run's drift hides the difference; an imported aggregate's stated
# spread does; repeats would settle it; or it sits on the margin's edge, where more requests would hardly settle it.
Why = Literal["drift", "aggregate", "repeat", "edge"]
WHYS: tuple[Why, ...] = ("drift", "aggregate", "repeat", "edge")


def why_undecided(v: Verdict) -> Why:
    """Why a verdict nobody leads and that is not alike is undecided."""
    if v.within_drift:
        return "drift"
    if v.point:
        return "aggregate"
    return "repeat" if v.needed() is not None else "edge"


def unclear(verdicts: list[tuple[int, Verdict]]) -> list[tuple[Why, list[int]]]:
    """The undecided levels grouped by why, in the order of WHYS."""
    groups: dict[Why, list[int]] = {}
    for c, v in verdicts:
        if not v.leader and not v.alike:
            groups.setdefault(why_undecided(v), []).append(c)
    return [(why, groups[why]) for why in WHYS if why in groups]


def crossover(cmp_levels: list[Level], metric: str) -> Crossover:
    verdicts = [(lv.c, getattr(lv, metric)) for lv in cmp_levels]
    clear = [(c, v) for c, v in verdicts if v.leader]
    if not clear:
        return Crossover(metric, "alike" if all(v.alike for _, v in verdicts) else "nobody")
    if len({v.leader for _, v in clear}) == 1:
        leader = clear[0][1].leader
        return Crossover(metric, "one", leader_below=leader, leader_above=leader)
    changes = [i for i in range(len(clear) - 1) if clear[i][1].leader != clear[i + 1][1].leader]
    if len(changes) > 1:
        return Crossover(metric, "many")
    i = changes[0]
    (c0, v0), (c1, v1) = clear[i], clear[i + 1]
    if any(c0 < c < c1 for c, _ in verdicts):  # the intervals cannot place it on one of the levels between
        return Crossover(metric, "between", None, v0.leader, v1.leader, c0, c1)
    d0, d1 = (v0.b.value or 0) - (v0.a.value or 0), (v1.b.value or 0) - (v1.a.value or 0)
    frac = d0 / (d0 - d1) if d0 != d1 else 0.5
    at = math.exp(math.log(c0) + frac * (math.log(c1) - math.log(c0)))
    return Crossover(metric, "at", at, v0.leader, v1.leader, c0, c1)

"""Where the lead changes hands between two runs, read from the per-level verdicts: the crossover lines of a
comparison, and the words levels are named in ("C ≤ 5", "C ≥ 10", "C = 2, 30")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from console.sweep.analysis.intervals import POINT_SPREAD, Level, Verdict


@dataclass(frozen=True)
class Crossover:
    metric: str
    at: float | None  # interpolated C where the lead changes hands (None: it does not, or not at one point)
    leader_below: str | None  # "a" or "b"
    leader_above: str | None
    text: str


def where(subset: list[int], levels: list[int]) -> str:
    """Levels as the operator reads them: "C ≤ 5", "C ≥ 10", or a list when they are not one end."""
    if subset == levels:
        return "every level"
    if subset == levels[: len(subset)]:
        return f"C ≤ {subset[-1]}"
    if subset == levels[-len(subset) :]:
        return f"C ≥ {subset[0]}"
    return "C = " + ", ".join(str(c) for c in subset)


# Why nobody can tell at a level, and what would tell: the per-level lines, the recommendation and the crossover
# say the same, so that the advice never contradicts a level's own line.
Why = Literal["drift", "aggregate", "repeat", "edge"]
WHY_UNDECIDED: dict[Why, tuple[str, str]] = {
    "drift": ("a run's drift hides the difference", "measure the drifting run again"),
    "aggregate": (f"imported aggregates are taken as ±{POINT_SPREAD * 100:g} %", "measure them with pivot to know"),
    "repeat": ("the intervals cross the margin", "repeat them to know"),
    "edge": ("it sits on the margin's edge", "more requests would hardly settle it"),
}


def why_undecided(v: Verdict) -> Why:
    """The key in WHY_UNDECIDED for a verdict nobody leads and that is not alike."""
    if v.within_drift:
        return "drift"
    if v.point:
        return "aggregate"
    return "repeat" if v.needed() is not None else "edge"


def unclear(verdicts: list[tuple[int, Verdict]]) -> list[tuple[Why, list[int]]]:
    """The undecided levels grouped by why, in the order of WHY_UNDECIDED."""
    groups: dict[Why, list[int]] = {}
    for c, v in verdicts:
        if not v.leader and not v.alike:
            groups.setdefault(why_undecided(v), []).append(c)
    return [(why, groups[why]) for why in WHY_UNDECIDED if why in groups]


def undecided(verdicts: list[tuple[int, Verdict]], levels: list[int], what: str = "") -> str:
    """ "; alike at …; cannot tell at … (why: what would tell)" for the levels where nobody leads (in `what`, where it
    must be said)."""
    return undecided_text([c for c, v in verdicts if v.alike], unclear(verdicts), levels, what)


def undecided_text(alike: Sequence[int], groups: Sequence[tuple[Why, Sequence[int]]], levels: list[int], what: str = "") -> str:
    said = ((f"; alike in {what}" if what else "; alike") + f" at {where(list(alike), levels)}") if alike else ""
    if not groups:
        return said
    told = ", ".join(f"{where(list(cs), levels)} ({WHY_UNDECIDED[why][0]}: {WHY_UNDECIDED[why][1]})" for why, cs in groups)
    return said + (f"; cannot tell {what} at " if what else "; cannot tell at ") + told


def crossover(cmp_levels: list[Level], metric: str, names: dict[str, str], margin: float) -> Crossover:
    verdicts = [(lv.c, getattr(lv, metric)) for lv in cmp_levels]
    clear = [(c, v) for c, v in verdicts if v.leader]
    levels = [c for c, _ in verdicts]
    if not clear:
        if all(v.alike for _, v in verdicts):
            return Crossover(metric, None, None, None, f"none: alike at every level (within ±{margin * 100:g} %)")
        return Crossover(metric, None, None, None, "none: nobody leads by more than the margin" + undecided(verdicts, levels))
    leaders = {v.leader for _, v in clear}
    tail = undecided(verdicts, levels)
    if len(leaders) == 1:
        leader = clear[0][1].leader
        return Crossover(
            metric, None, leader, leader, f"none: {names[leader or 'b']} leads at {where([c for c, _ in clear], levels)}{tail}"
        )
    changes = [i for i in range(len(clear) - 1) if clear[i][1].leader != clear[i + 1][1].leader]
    if len(changes) > 1:
        return Crossover(metric, None, None, None, "the lead changes more than once: see the table")
    i = changes[0]
    (c0, v0), (c1, v1) = clear[i], clear[i + 1]
    below, above = v0.leader, v1.leader
    between = [(c, v) for c, v in verdicts if c0 < c < c1]
    if between:  # the intervals cannot place it on one of the levels between
        return Crossover(
            metric,
            None,
            below,
            above,
            f"between C = {c0} and C = {c1}: {names[below or 'b']} leads at "
            f"C ≤ {c0}, {names[above or 'b']} from C = {c1}{undecided(between, levels)}",
        )
    d0, d1 = (v0.b.value or 0) - (v0.a.value or 0), (v1.b.value or 0) - (v1.a.value or 0)
    frac = d0 / (d0 - d1) if d0 != d1 else 0.5
    at = math.exp(math.log(c0) + frac * (math.log(c1) - math.log(c0)))
    return Crossover(
        metric, at, below, above, f"C ≈ {at:.1f}: {names[below or 'b']} leads below (C ≤ {c0}), {names[above or 'b']} from C = {c1}{tail}"
    )

"""What would settle a comparison's uncertain levels: for each level where nobody leads by more than the margin and
the two are not alike within it, how many more requests (of one run, or of both) would bring B/A's interval wholly
within the margin or wholly beyond it. Intervals narrow as the square root of the requests (and Student's t): an
estimate, made again from the numbers after each repeat."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from console.sweep.analysis.intervals import POINT_SPREAD, Level, Verdict, more_requests


@dataclass(frozen=True)
class Repeat:
    c: int
    more_requests: int | None  # per run repeated, to settle the level; None: it cannot be told how many
    text: str
    sides: tuple[str, ...] = ("a", "b")  # whose level to repeat: the wider interval alone when that suffices
    alone: dict[str, int] = field(default_factory=dict)  # "a", "b": the requests of that run alone that would settle it


def repeats(cmp_levels: list[Level], names: dict[str, str]) -> list[Repeat]:
    """For each level where total throughput or per-request speed cannot be told (neither a lead beyond the margin
    nor alike within it): how many more requests would settle it, of one run where its interval alone is in the way.
    Intervals narrow as the square root of the requests; an estimate, made again after each repeat."""
    repeats = []
    for lv in cmp_levels:
        best: tuple[int, Repeat] | None = None
        for metric, unit in (("total", "tok/s"), ("per_request", "per-request tok/s")):
            v: Verdict = getattr(lv, metric)
            if v.leader or v.alike or v.ratio is None or min(lv.a.requests, lv.b.requests) < 2:
                continue
            options = [] if v.point else _options(lv, v)
            if not options:
                candidate, cost = (
                    Repeat(lv.c, None, _unsettled(lv.c, v, unit, names), () if v.a.imported or v.b.imported else ("a", "b")),
                    10**9,
                )
            else:
                more, sides = min(options, key=lambda o: o[0] * len(o[1]))
                whose = "in each run" if len(sides) == 2 else f"of {names[sides[0]]}"
                alone = {s[0]: m for m, s in options if len(s) == 1}
                text = f"C={lv.c}: {v.text(unit)}: cannot tell; about {more} more request(s) {whose} would settle it (an estimate)"
                candidate, cost = Repeat(lv.c, more, text, sides, alone), more * len(sides)
            if best is None or cost < best[0]:
                best = (cost, candidate)
        if best is not None:
            repeats.append(best[1])
    return repeats


def _options(lv: Level, v: Verdict) -> list[tuple[int, tuple[str, ...]]]:
    """(more requests, whose) that would settle the level: of both runs, or of one where its interval alone is in the
    way; never of an imported run (pivot cannot measure it again)."""
    needed = v.needed()
    if needed is None:
        return []
    ha, hb = v.a.relative_half, v.b.relative_half
    own = {s for s, e in (("a", v.a), ("b", v.b)) if not e.imported}
    options: list[tuple[int, tuple[str, ...]]] = []
    for sides, narrowed in (
        (("a", "b"), _narrowed(ha, hb, needed, both=True)),
        (("b",), _narrowed(hb, ha, needed)),
        (("a",), _narrowed(ha, hb, needed)),
    ):
        if not own.issuperset(sides):
            continue
        half = ha if sides == ("a",) else hb if sides == ("b",) else max(ha, hb)
        count = lv.a.requests if sides == ("a",) else lv.b.requests if sides == ("b",) else min(lv.a.requests, lv.b.requests)
        if narrowed is not None and (more := more_requests(count, half, half * narrowed)) is not None:
            options.append((more, sides))
    return options


def _unsettled(c: int, v: Verdict, unit: str, names: dict[str, str]) -> str:
    """Why no count of more requests would settle a level, and what would."""
    head = f"C={c}: {v.text(unit)}: cannot tell;"
    if v.point:  # an imported aggregate: only a measurement of pivot's own gives it an interval
        imported = [names[s] for s, e in (("a", v.a), ("b", v.b)) if e.point]
        return (
            f"{head} {' and '.join(imported)} {'are' if len(imported) > 1 else 'is'} imported aggregates (taken as "
            f"±{POINT_SPREAD * 100:g} %): a sweep of C={c} with pivot, per request, would give it an interval to decide on"
        )
    if v.a.imported or v.b.imported:
        whom = " and ".join(names[s] for s, e in (("a", v.a), ("b", v.b)) if e.imported)
        return f"{head} {whom} was imported, and is not measured again: a sweep of C={c} with pivot, on the same server, would settle it"
    bound = f"±{(v.margin + v.drift) * 100:.1f} %"
    if v.within_drift:
        return (
            f"{head} the runs' drift ({bound} here) hides the difference: more requests would not settle it; measuring "
            "the drifting run again would"
        )
    return f"{head} it sits on the margin's edge ({bound}): more requests would hardly settle it"


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


def repeat_time(levels: list[Level], side: str, cs: list[int], requests: int) -> str:
    """About how long a repeat of these levels of one run (side "a" or "b") takes, in words, at the rates they measured."""
    measured = {lv.c: (lv.a if side == "a" else lv.b).requests_per_s for lv in levels}
    rates = [rate for c in cs if (rate := measured.get(c))]
    if len(rates) < len(cs):
        return "how long it takes is not known: a level has no measured rate"
    seconds = sum(requests / rate for rate in rates)
    return ("under a minute" if seconds < 60 else f"about {round(seconds / 60)} min") + " at the rates they measured"


def requests_each(requests: int, levels: int) -> str:
    """A repeat's requests in words, with "each" where it measures several levels."""
    return f"{requests} request{'s' if requests != 1 else ''}" + (" each" if levels > 1 else "")


REPEAT_ROUNDS = 3  # `u`, --repeat-uncertain: at most this many repeats, each estimated again from the numbers
REPEAT_CAP = 2000  # requests a level is repeated with at most in one round


@dataclass(frozen=True)
class RepeatPlan:
    """What one run's repeat would measure to settle a comparison, or why none would: decided once for the pane's `u`,
    `pivot sweep --repeat-uncertain` and a runbook's repeat."""

    side: str | None  # "a" or "b": the run to repeat
    wanted: dict[int, int]  # C -> requests of that run alone the comparison estimates would settle it
    refusal: str | None = None  # why nothing of this run is to be measured (None: `wanted` is the plan)

    @property
    def estimate(self) -> int:
        return max(self.wanted.values(), default=0)

    @property
    def requests(self) -> int:
        """Requests each level is measured with in this round: the largest estimate, capped."""
        return min(REPEAT_CAP, self.estimate)


def repeat_plan(found: list[Repeat], names: dict[str, str], side: str | None, switch_to: dict[str, str] | None = None) -> RepeatPlan:
    """side: the run whose server is running (None: neither's); switch_to: each run's profile, to name the one to
    switch to. An imported run's level is never repeated (Repeat.sides is empty): its refusal says what would settle it."""
    if not found:
        return RepeatPlan(side, {}, "every level is settled")
    if not any(r.more_requests for r in found):
        imported = [r.c for r in found if not r.sides]
        if imported:
            return RepeatPlan(
                side,
                {},
                f"C = {', '.join(map(str, imported))}: imported results are not measured again; a sweep of those levels "
                "with pivot would give them intervals to decide on",
            )
        return RepeatPlan(side, {}, "no level is uncertain enough for more requests to settle (see the repeat: lines)")
    if side is None:
        need = sorted({s for r in found if r.more_requests for s in r.sides})
        switch = f": switch to {' or '.join(switch_to[s] for s in need)} first" if switch_to else ""
        return RepeatPlan(side, {}, f"the levels to repeat are {' and '.join(names[s] for s in need)}'s{switch}")
    wanted = {r.c: r.alone[side] for r in found if side in r.alone}
    if not wanted:
        both = [r.c for r in found if r.more_requests and len(r.sides) == 2]
        return RepeatPlan(
            side,
            {},
            f"{names[side]} alone would not settle them"
            + (
                f" (C = {', '.join(map(str, both))}: both runs' levels must be repeated; repeat the other run on its server too)"
                if both
                else ""
            ),
        )
    return RepeatPlan(side, wanted)

"""What would settle a comparison's uncertain levels, and what a repeat is about to measure, in words: the `repeat:`
lines, the refusals of `u` and `--repeat-uncertain`, and the question before each round."""

from __future__ import annotations

from console.sweep.analysis.intervals import POINT_SPREAD, Level
from console.sweep.analysis.repeats import REPEAT_CAP, REPEAT_ROUNDS, Repeat, RepeatPlan, repeat_seconds
from console.sweep.analysis.sides import Side
from console.sweep.words.verdicts import at, figures, listed

UNITS = {"total": "tok/s", "per_request": "per-request tok/s"}


def repeat_text(r: Repeat, names: dict[Side, str]) -> str:
    v = r.verdict
    head = f"{at(r.c)}: {figures(v, UNITS[r.metric])}: cannot tell;"
    if r.why == "estimate":
        whose = "in each run" if len(r.sides) == 2 else f"of {names[r.sides[0]]}"
        return f"{head} about {r.more_requests} more request(s) {whose} would settle it (an estimate)"
    if r.why == "aggregate":  # only a measurement of pivot's own gives it an interval
        imported = [names[s] for s, e in (("a", v.a), ("b", v.b)) if e.point]  # type: ignore[index]
        return (
            f"{head} {' and '.join(imported)} {'are' if len(imported) > 1 else 'is'} imported aggregates (taken as "
            f"±{POINT_SPREAD * 100:g} %): a sweep of {at(r.c)} with pivot, per request, would give it an interval to decide on"
        )
    if r.why == "imported":
        whom = " and ".join(names[s] for s, e in (("a", v.a), ("b", v.b)) if e.imported)  # type: ignore[index]
        return (
            f"{head} {whom} was imported, and is not measured again: a sweep of {at(r.c)} with pivot, on the same server, would settle it"
        )
    bound = f"±{(v.margin + v.drift) * 100:.1f} %"
    if r.why == "drift":
        return (
            f"{head} the runs' drift ({bound} here) hides the difference: more requests would not settle it; measuring "
            "the drifting run again would"
        )
    return f"{head} it sits on the margin's edge ({bound}): more requests would hardly settle it"


def refusal_text(plan: RepeatPlan, names: dict[Side, str], profiles: dict[Side, str] | None = None) -> str:
    """Why nothing of the run is to be measured; profiles: each run's, to name the one to switch to."""
    match plan.refusal:
        case "settled":
            return "every level is settled"
        case "imported":
            return (
                f"{listed(plan.levels)}: imported results are not measured again; a sweep of those levels with pivot would give "
                "them intervals to decide on"
            )
        case "unsettleable":
            return "no level is uncertain enough for more requests to settle (see the repeat: lines)"
        case "other_server":
            switch = f": switch to {' or '.join(profiles[s] for s in plan.need)} first" if profiles else ""
            return f"the levels to repeat are {' and '.join(names[s] for s in plan.need)}'s{switch}"
        case "not_alone":
            both = (
                f" ({listed(plan.levels)}: both runs' levels must be repeated; repeat the other run on its server too)"
                if plan.levels
                else ""
            )
            return f"{names[plan.side or 'b']} alone would not settle them{both}"
    return ""


def repeat_time(levels: list[Level], side: Side, cs: list[int], requests: int) -> str:
    """About how long a repeat of these levels of one run takes, in words, at the rates they measured."""
    seconds = repeat_seconds(levels, side, cs, requests)
    if seconds is None:
        return "how long it takes is not known: a level has no measured rate"
    return ("under a minute" if seconds < 60 else f"about {round(seconds / 60)} min") + " at the rates they measured"


def requests_each(requests: int, levels: int) -> str:
    """A repeat's requests in words, with "each" where it measures several levels."""
    return f"{requests} request{'s' if requests != 1 else ''}" + (" each" if levels > 1 else "")


def plan_lines(plan: RepeatPlan, levels: list[Level], name: str) -> list[str]:
    """What `u` is about to measure: the first round's levels and requests (the largest estimate of every level,
    capped) and about how long that takes at the rates the levels measured."""
    cs = sorted(plan.wanted)
    return [
        f"{listed(cs)} of {name}: {requests_each(plan.requests, len(cs))} "
        + (
            f"(the estimate, {plan.estimate}, capped at {REPEAT_CAP})"
            if plan.requests < plan.estimate
            else "(what the comparison estimates would settle them)"
        ),
        f"this round: {repeat_time(levels, plan.side or 'b', cs, plan.requests)}",
        f"compared again after it; up to {REPEAT_ROUNDS} rounds while a level stays undecided, each estimated again from "
        "the new numbers and asked before it starts",
    ]

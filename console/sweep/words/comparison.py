"""A comparison in sentences, as the terminal, the Sweep pane and the report print them under the table: the
recommendation, the crossovers, saturation, the parts beside them, what was left out, what to repeat and refine."""

from __future__ import annotations

from console.sweep.analysis.compare import Comparison, bracket
from console.sweep.analysis.crossover import Crossover
from console.sweep.analysis.sides import SIDES, Side
from console.sweep.words.advice import advice_text
from console.sweep.words.parts import capacities_text, energy_line, frontier_text, notes_text, slo_text, verification_text
from console.sweep.words.repeats import repeat_text
from console.sweep.words.verdicts import at, bound, naming, near, undecided, where


def recommendation(cmp: Comparison, names: dict[Side, str] | None = None) -> str:
    """names: what to call the runs (their labels unless said: the pane says A and B)."""
    with naming(cmp.rates):
        return advice_text(cmp.advice, names or cmp.names)


def crossover_text(cross: Crossover, cmp: Comparison, names: dict[Side, str] | None = None) -> str:
    with naming(cmp.rates):
        return _crossover(cross, cmp, names)


def _crossover(cross: Crossover, cmp: Comparison, names: dict[Side, str] | None) -> str:
    verdicts = [(lv.c, getattr(lv, cross.metric)) for lv in cmp.levels]
    levels = [c for c, _ in verdicts]
    names = names or cmp.names
    match cross.shape:
        case "alike":
            return f"none: alike at every level (within ±{cmp.margin * 100:g} %)"
        case "nobody":
            return "none: nobody leads by more than the margin" + undecided(verdicts, levels)
        case "one":
            led = [c for c, v in verdicts if v.leader]
            return f"none: {names[cross.leader_below or 'b']} leads at {where(led, levels)}{undecided(verdicts, levels)}"
        case "many":
            return "the lead changes more than once: see the table"
    below, above = names[cross.leader_below or "b"], names[cross.leader_above or "b"]
    if cross.shape == "between":
        between = [(c, v) for c, v in verdicts if (cross.below or 0) < c < (cross.above or 0)]
        lo, hi = cross.below or 0, cross.above or 0
        return f"between {at(lo, True)} and {at(hi, True)}: {below} leads at {bound(lo, '≤')}, {above} from {at(hi, True)}" + undecided(
            between, levels
        )
    lo, hi = cross.below or 0, cross.above or 0
    return f"{near(cross.at or 0)}: {below} leads below ({bound(lo, '≤')}), {above} from {at(hi, True)}" + undecided(verdicts, levels)


def refine_text(cmp: Comparison) -> str | None:
    """The line the comparison offers when a refinement would help."""
    found = bracket(cmp)
    if found is None or found.located:
        return None
    with naming(cmp.rates):
        return (
            f"refine: {found.what} lies between {at(found.lo, True)} and {at(found.hi, True)}; measuring {at(found.middle, True)} on both "
            f"runs narrows it (pivot sweep --refine {cmp.a.name} {cmp.b.name})"
        )


def short_names(cmp: Comparison) -> dict[Side, str] | None:
    """The runs called A and B, where the lines above the verdict define them: a name said in full each time fills
    the lines the verdict needs. None (their full names) where both have the same name: A and B say which is which."""
    return None if cmp.names["a"] == cmp.names["b"] else {"a": "A", "b": "B"}


def report(cmp: Comparison, names: dict[Side, str] | None = None) -> list[str]:
    """The comparison in sentences, one a line; names: what to call the runs (their labels unless said)."""
    with naming(cmp.rates):
        return _report(cmp, names)


def _report(cmp: Comparison, names: dict[Side, str] | None) -> list[str]:
    names, levels = names or cmp.names, [lv.c for lv in cmp.levels]
    aliases = {cmp.names[s]: names[s] for s in SIDES}  # a run the verification names by its label
    sat = "; ".join(f"{names[s]}: {at(c)}" if c else f"{names[s]}: not within the levels" for s, c in cmp.saturation.items())
    lines = [f"not comparable, compared anyway: {d}" for d in cmp.differences]
    lines += [
        f"recommendation: {recommendation(cmp, names)}",
        *([f"verification: {'; '.join(verification_text(v, aliases) for v in cmp.verification)}"] if cmp.verification else []),
        *([f"slo: {slo_text(cmp.slo, names)}"] if cmp.slo else []),
        *([capacities_text(cmp.capacity, names)] if cmp.capacity else []),
        f"crossover, total tok/s: {crossover_text(cmp.total, cmp, names)}",
        f"crossover, per-request tok/s: {crossover_text(cmp.per_request, cmp, names)}",
        f"saturation (< 10 % more to the next level): {sat}",
        *([frontier_text(cmp.frontier, names)] if cmp.frontier else []),
        *([energy_line(cmp.energy, cmp.levels, names)] if cmp.energy else []),
    ]
    lines += [f"{at(c)}: left out: " + "; ".join(f"{names[s]}: {w}" for s, w in why.items()) for c, why in sorted(cmp.excluded.items())]
    lines += [f"repeat: {repeat_text(r, names)}" for r in cmp.repeats]
    refine = refine_text(cmp)
    return lines + ([refine] if refine else []) + notes_text(cmp.notes, names, cmp.margin, levels)

"""How levels are named ("C ≤ 5", "C ≥ 10", "C = 2, 30"), a figure against another, and why nobody can tell where
nobody can: the words every verdict line of a comparison is made of."""

from __future__ import annotations

from collections.abc import Sequence

from console.sweep.analysis.crossover import Why, unclear
from console.sweep.analysis.intervals import POINT_SPREAD, Verdict

WHY_WORDS: dict[Why, tuple[str, str]] = {  # why nobody can tell, and what would tell
    "drift": ("a run's drift hides the difference", "measure the drifting run again"),
    "aggregate": (f"imported aggregates are taken as ±{POINT_SPREAD * 100:g} %", "measure them with pivot to know"),
    "repeat": ("the intervals cross the margin", "repeat them to know"),
    "edge": ("it sits on the margin's edge", "more requests would hardly settle it"),
}


def where(subset: Sequence[int], levels: Sequence[int]) -> str:
    """Levels as the operator reads them: "C ≤ 5", "C ≥ 10", or a list when they are not one end."""
    subset, levels = list(subset), list(levels)
    if subset == levels:
        return "every level"
    if subset == levels[: len(subset)]:
        return f"C ≤ {subset[-1]}"
    if subset == levels[-len(subset) :]:
        return f"C ≥ {subset[0]}"
    return "C = " + ", ".join(str(c) for c in subset)


def figures(v: Verdict, unit: str, digits: int = 1) -> str:
    """A against B and the change, with its 95 % interval: "27.6 vs 16.2 tok/s, -41.3 % ± 2.0 %"."""
    if v.ratio is None or v.a.value is None or v.b.value is None:
        return "not measured by both"
    change = f"{(v.ratio - 1) * 100:+.1f} % ± {(v.spread or 0) * 100:.1f} %"
    return f"{v.a.value:.{digits}f} vs {v.b.value:.{digits}f} {unit}, {change}"


def undecided_text(alike: Sequence[int], groups: Sequence[tuple[Why, Sequence[int]]], levels: Sequence[int], what: str = "") -> str:
    """ "; alike at …; cannot tell at … (why: what would tell)" for the levels where nobody leads (in `what`, where it
    must be said)."""
    said = ((f"; alike in {what}" if what else "; alike") + f" at {where(alike, levels)}") if alike else ""
    if not groups:
        return said
    told = ", ".join(f"{where(cs, levels)} ({WHY_WORDS[why][0]}: {WHY_WORDS[why][1]})" for why, cs in groups)
    return said + (f"; cannot tell {what} at " if what else "; cannot tell at ") + told


def undecided(verdicts: list[tuple[int, Verdict]], levels: Sequence[int], what: str = "") -> str:
    return undecided_text([c for c, v in verdicts if v.alike], unclear(verdicts), levels, what)

"""How levels are named ("C ≤ 5", "C ≥ 10", "C = 2, 30"), a figure against another, and why nobody can tell where
nobody can: the words every verdict line of a comparison is made of."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from console.settings import RATE_KEY
from console.sweep.analysis.crossover import Why, unclear
from console.sweep.analysis.intervals import POINT_SPREAD, Verdict

WHY_WORDS: dict[Why, tuple[str, str]] = {  # why nobody can tell, and what would tell
    "drift": ("a run's drift hides the difference", "measure the drifting run again"),
    "aggregate": (f"imported aggregates are taken as ±{POINT_SPREAD * 100:g} %", "measure them with pivot to know"),
    "repeat": ("the intervals cross the margin", "repeat them to know"),
    "edge": ("it sits on the margin's edge", "more requests would hardly settle it"),
}


# Whether the levels being named are rates (a run's key in thousandths of a request per second) or concurrencies: set
# by whoever words a rate run or a comparison of two (`naming`), for every sentence made within, as a decimal
# context sets how numbers round
_RATES: ContextVar[bool] = ContextVar("rates", default=False)


@contextmanager
def naming(rates: bool) -> Iterator[None]:
    token = _RATES.set(rates)
    try:
        yield
    finally:
        _RATES.reset(token)


def value(c: float) -> str:
    """A level's number alone: 8, or 2.5 (requests per second)."""
    return f"{c / RATE_KEY:g}" if _RATES.get() else f"{c:g}"


def at(c: float, spaced: bool = False) -> str:
    """A level as the operator reads it: C=8 (C = 8, spaced), or 2.5 req/s."""
    return f"{value(c)} req/s" if _RATES.get() else f"C = {value(c)}" if spaced else f"C={value(c)}"


def axis() -> str:
    """What the levels are, in a table's head: C, or req/s."""
    return "req/s" if _RATES.get() else "C"


def listed(subset: Sequence[int]) -> str:
    """Some levels named together: "C = 2, 30", or "0.5, 2 req/s"."""
    return ", ".join(value(c) for c in subset) + " req/s" if _RATES.get() else "C = " + ", ".join(str(c) for c in subset)


def bound(c: float, sign: str) -> str:
    """ "C ≤ 5", or "≤ 2 req/s"."""
    return f"{sign} {at(c)}" if _RATES.get() else f"C {sign} {value(c)}"


def near(x: float) -> str:
    """Where a crossover lies between levels: "C ≈ 1.1", or "≈ 0.75 req/s"."""
    return f"≈ {x / RATE_KEY:.2f} req/s" if _RATES.get() else f"C ≈ {x:.1f}"


def where(subset: Sequence[int], levels: Sequence[int]) -> str:
    """Levels as the operator reads them: "C ≤ 5", "C ≥ 10", or a list when they are not one end."""
    subset, levels = list(subset), list(levels)
    if subset == levels:
        return "every level"
    if subset == levels[: len(subset)]:
        return bound(subset[-1], "≤")
    if subset == levels[-len(subset) :]:
        return bound(subset[0], "≥")
    return listed(subset)


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

"""Refinement: where the drafting decision changes between two measured levels far apart (say C=10 and C=30),
measure the level between them on a log scale, on both runs' servers, until the change is located within
±15 % or the two levels are neighbours. The adaptive profile then uses the refined threshold.

The servers are switched by whoever drives this (the command line, a runbook, the console), through
`Driver`; this module only decides what to measure next and merges the measurements into the runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from console.settings import level_name
from console.sweep.analysis.compare import Comparison, bracket, compare, label
from console.sweep.analysis.intervals import MARGIN
from console.sweep.runs.store import Run


class Driver(Protocol):
    async def switch_to(self, run: Run) -> None:
        """Have the server that measured this run (its profile) running and ready."""

    async def measure(self, run: Run, level: int) -> None:
        """Measure this level on the running server, merged into the run."""

    def running(self) -> str | None:
        """The profile of the server running now."""


async def refine(
    a: Run, b: Run, driver: Driver, say: Callable[[str], None] = print, max_rounds: int = 6, margin: float = MARGIN
) -> Comparison:
    """Measure middle levels until the change is located; the last comparison. Each round measures on the
    server running now first, so that every round but the first switches servers once."""
    cmp = compare(a, b, margin)
    for _ in range(max_rounds):
        found = bracket(cmp)
        if found is None or found.located:
            break
        level = found.middle
        lo, hi, at = (level_name(c, cmp.rates) for c in (found.lo, found.hi, level))
        say(f"refining {found.what}: {lo}..{hi}, measuring {at}")
        order = (b, a) if driver.running() == b.profile else (a, b)
        for run in order:
            if driver.running() != run.profile:
                say(f"  switching to {run.profile} for {label(run)}")
                await driver.switch_to(run)
            await driver.measure(run, level)
        cmp = compare(a, b, margin)
    found = bracket(cmp)
    if found is not None:
        lo, hi = (level_name(c, cmp.rates) for c in (found.lo, found.hi))
        say(f"{found.what}: between {lo} and {hi}" + (" (located)" if found.located else ""))
    return cmp

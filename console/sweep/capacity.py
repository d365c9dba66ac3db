"""Capacity under an SLO (`pivot sweep --find-capacity 'ttft_p90_ms<=500,itl_p90_ms<=30'`): the highest load, in
users (C) or requests per second, that still meets it, bracketed to a stated precision.

The search doubles the load from its first level until a level fails the SLO, then bisects between the highest level
that met it and the lowest that did not, until they lie within `capacity_precision` of each other (and one user
apart, for concurrencies). Each level is held to the SLO with the 95 % intervals of its percentiles: it serves it when
every bound holds over the whole interval, fails it when one is broken over the whole interval; in between it is
measured again with twice the requests (twice at most), and a level still undecided then counts as failing, and is
said. Ships with the load generator (console/zipapp.py), which runs the search wherever it runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from console.settings import RATE_KEY, slo_terms
from console.sweep.model import Capacity, CapacityStep, LevelDone

Decision = Literal["serves", "fails", "unsure"]
SAID = {"serves": "meets the SLO", "fails": "does not meet the SLO", "unsure": "cannot tell whether it meets the SLO"}
AGAIN = 2  # times a level the SLO cannot decide is measured again, each with twice the requests
MOST_C = 4096  # the search stops doubling here (a level above it is no server's)
MOST_RATE = 100_000 * RATE_KEY
LEAST_RATE_SHARE = 16  # a rate search halves to a sixteenth of its first level at most: lower takes hours of arrivals
LEAST_REQUESTS = 64  # a level's p90 interval needs about this many requests not to end at its largest value


def decide(level: LevelDone, slo: str) -> tuple[Decision, str]:
    """Whether the level serves the SLO (every bound holds over its figure's whole 95 % interval), fails it (one is
    broken over the whole interval) or cannot say yet; and why, in words."""
    if level.failed:
        return "fails", f"the level failed ({level.failed})"
    if level.client_bound:
        return "unsure", f"the client was the limit ({level.client_bound})"
    if level.rate is None and level.peak_in_flight is not None and level.peak_in_flight < level.c:
        return "unsure", f"it never had C={level.c} requests in flight (at most {level.peak_in_flight})"
    broken, unsure = [], []
    for key, bound in slo_terms(slo).items():
        name, lo, hi, scale, most = {
            "ttft_p90_ms": ("TTFT p90", level.ttft_p90_lo, level.ttft_p90_hi, 1000, True),
            "itl_p90_ms": ("ITL p90", level.itl_p90_lo, level.itl_p90_hi, 1000, True),
            "user_tok_s": ("a user's tok/s (p50)", level.req_tok_s_p50_lo, level.req_tok_s_p50_hi, 1, False),
        }[key]
        if key != "user_tok_s" and level.lagging:
            unsure.append(f"{name} not measured ({level.lagging})")
            continue
        # an end of None lies past the largest (or smallest) value measured: too few requests to know it
        low, high = (None if v is None else v * scale for v in (lo, hi))
        shown = f"{name} {'?' if low is None else f'{low:.1f}'}–{'?' if high is None else f'{high:.1f}'}"
        if (high is not None and high <= bound) if most else (low is not None and low >= bound):
            continue
        if (low is not None and low > bound) if most else (high is not None and high < bound):
            broken.append(f"{shown} {'>' if most else '<'} {bound:g}")
        else:
            unsure.append(f"{shown} around {bound:g}" if low is not None and high is not None else f"{shown}: more requests to bound it")
    if broken:
        return "fails", "; ".join(broken)
    if unsure:
        return "unsure", "; ".join(unsure)
    return "serves", "every bound holds over its interval"


@dataclass
class CapacitySearch:
    """The levels to measure, one at a time, and what they found. Keys are a run's: users, or thousandths of a request
    per second."""

    slo: str
    start: int
    precision: float
    rates: bool
    served: int | None = None  # the highest level that met the SLO
    failed: int | None = None  # the lowest level that did not
    undecided: list[int] = field(default_factory=list)  # levels counted as failing after AGAIN more measures
    steps: list[CapacityStep] = field(default_factory=list)  # each level measured, in turn

    def next(self) -> int | None:
        """The next level to measure; None when the capacity is bracketed (or beyond what a level can be)."""
        lo, hi = self.served, self.failed
        floor = max(1, self.start // LEAST_RATE_SHARE) if self.rates else 1
        if hi is None:
            if lo is None:
                return self.start
            up = lo * 2
            return up if up <= (MOST_RATE if self.rates else MOST_C) else None
        if lo is None:
            down = hi // 2
            return down if down >= floor and down != hi else None
        if hi - lo <= max(1 if not self.rates else 0, math.ceil(self.precision * lo)):
            return None
        middle = (lo + hi) // 2
        return middle if lo < middle < hi else None

    def record(self, key: int, decision: Decision, why: str) -> None:
        self.steps.append(CapacityStep(c=key, decision=decision, why=why))
        if decision == "serves":
            self.served = max(self.served or 0, key)
        else:
            self.failed = key if self.failed is None else min(self.failed, key)
            if decision == "unsure":
                self.undecided.append(key)

    def result(self) -> Capacity:
        return Capacity(
            slo=self.slo,
            served=self.served,
            failed=self.failed,
            precision=self.precision,
            undecided=sorted(set(self.undecided)),
            rates=self.rates,
            steps=list(self.steps),
        )

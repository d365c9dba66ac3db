"""Comparing runs level by level, with the uncertainty of each level: who leads where, the crossovers,
saturation, and what to do about speculation.

At each level the ratio B/A and its 95 % interval are held against a margin of practical equivalence
([compare] margin, 2 % unless set): a run leads only where the whole interval lies beyond the margin,
the two are alike where it lies within, and elsewhere the comparison says it cannot tell, with the
numbers, and how many more requests would settle it.
Levels that failed (errors, a lost link or server) or where the load generator was the limit are
left out of every verdict and said to be. The recommendation, the crossover lines and the table are
all read from the same per-level verdicts, so they cannot contradict each other.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from console.settings import RATE_KEY
from console.sweep.analysis.advice import Advice, advise
from console.sweep.analysis.comparable import Difference, NotComparable, differences
from console.sweep.analysis.crossover import Crossover, crossover
from console.sweep.analysis.drift import Drift
from console.sweep.analysis.drift import drift as drift_of
from console.sweep.analysis.energy import Energy, energy
from console.sweep.analysis.frontier import Frontier, dominance
from console.sweep.analysis.intervals import MARGIN, Level, Verdict, estimate, judge
from console.sweep.analysis.notes import Note, drafted_nothing, notes
from console.sweep.analysis.repeats import Repeat, repeats
from console.sweep.analysis.sides import SIDES, Side
from console.sweep.analysis.slo import Slo, SloAnswer, answer, goodput
from console.sweep.analysis.verification import Verification, verification
from console.sweep.model import Capacity, LevelDone
from console.sweep.runs.store import Run, label

if TYPE_CHECKING:
    import polars as pl

REFINE_TOLERANCE = 0.15  # a change of decision is located once it lies within ±15 % of the middle of its bracket
SATURATION_GAIN = 0.10  # past this level, throughput grows by less than 10 % to the next


@dataclass(frozen=True)
class Comparison:
    """Two runs compared, as data: console/sweep/words/ says it in sentences, `pivot compare --json` dumps it."""

    a: Run
    b: Run
    levels: list[Level]
    excluded: dict[int, dict[Side, str]]  # C -> why it is in no verdict: each failing run's reason
    total: Crossover
    per_request: Crossover
    saturation: dict[Side, int | None]  # the level past which throughput grows by under 10 % to the next
    advice: Advice  # what it advises about speculation
    repeats: list[Repeat] = field(default_factory=list)
    notes: tuple[Note, ...] = ()
    margin: float = MARGIN
    differences: list[Difference] = field(default_factory=list)  # what the runs measured differently (--anyway)
    verification: tuple[Verification, ...] = ()  # of an adaptive profile's run: whether it kept what it was written to keep
    slo: SloAnswer | None = None  # under the SLO asked: how many users each run serves, and which to run
    goodput: dict[Side, dict[int, float]] = field(default_factory=dict)  # per C, requests/s meeting the SLO
    frontier: Frontier | None = None  # where one run's throughput per GPU at a user's speed lies above the other's
    energy: Energy | None = None  # who spends less energy per output token where
    capacity: dict[Side, Capacity] = field(default_factory=dict)  # each run's capacity search, where both searched

    @property
    def drafting(self) -> Run:
        return drafting(self.a, self.b)

    @property
    def rates(self) -> bool:
        """Its levels are request rates (open loop), not concurrencies (two runs compared are the same kind)."""
        return self.a.rates

    @property
    def axis(self) -> str:
        """What its levels are, as a table's head says: C, or req/s."""
        return "req/s" if self.rates else "C"

    def level(self, c: int) -> str:
        """A level's number as a table shows it: 8, or 2.5 (requests per second)."""
        return f"{c / RATE_KEY:g}" if self.rates else str(c)

    @property
    def names(self) -> dict[Side, str]:
        return {"a": label(self.a), "b": label(self.b)}

    @property
    def helps_up_to(self) -> int | None:
        """The largest measured C where drafting should stay on (None: no adaptive setting helps)."""
        return self.advice.cut

    @property
    def table(self) -> pl.DataFrame:
        """One row per compared level: both runs' figures, B/A ratios with their spread, and who leads."""
        import polars as pl  # here: the console's first screen imports this module and does not wait for polars

        rows = []
        for lv in self.levels:
            row: dict[str, Any] = {"c": lv.c}
            for name in ("total", "per_request", "ttft", "itl", "energy"):
                v: Verdict | None = getattr(lv, name)
                row[f"a_{name}"] = v.a.value if v else None
                row[f"b_{name}"] = v.b.value if v else None
                row[f"ratio_{name}"] = v.ratio if v else None
                row[f"spread_{name}"] = v.spread if v else None
                row[f"leader_{name}"] = v.leader if v else None
                row[f"alike_{name}"] = v.alike if v else None
            for side, level in (("a", lv.a), ("b", lv.b)):  # speculation's own figures, where the server gave them
                row[f"{side}_accept_rate"] = level.accept_rate
                row[f"{side}_accept_length"] = level.accept_length
            if self.goodput:
                row["a_goodput"], row["b_goodput"] = self.goodput["a"].get(lv.c), self.goodput["b"].get(lv.c)
            row["a_errors"], row["b_errors"] = lv.a.errors, lv.b.errors
            row["a_requests"], row["b_requests"] = lv.a.requests, lv.b.requests
            rows.append(row)
        return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame({"c": []})


@dataclass(frozen=True)
class Bracket:
    lo: int  # the largest measured C on one side of the change
    hi: int  # the smallest on the other
    what: str

    @property
    def located(self) -> bool:
        return self.hi - self.lo <= 1 or self.hi / self.lo <= (1 + REFINE_TOLERANCE) / (1 - REFINE_TOLERANCE)

    @property
    def middle(self) -> int:
        """The level halfway on a log scale, strictly between the two."""
        return min(self.hi - 1, max(self.lo + 1, round(math.sqrt(self.lo * self.hi))))


def bracket(cmp: Comparison) -> Bracket | None:
    """Where the decision changes: above the last level that keeps drafting (the adaptive cut), or else where the
    lead in total throughput changes hands; None when there is no such change to locate."""
    levels = [lv.c for lv in cmp.levels]
    if cmp.helps_up_to is not None and cmp.helps_up_to in levels and cmp.helps_up_to != levels[-1]:
        return Bracket(cmp.helps_up_to, levels[levels.index(cmp.helps_up_to) + 1], "where drafting stops paying off")
    leaders = [(lv.c, lv.total.leader) for lv in cmp.levels if lv.total.leader]
    for (c0, l0), (c1, l1) in itertools.pairwise(leaders):
        if l0 != l1:
            return Bracket(c0, c1, "where the lead in total throughput changes")
    return None


def drafting(a: Run, b: Run) -> Run:
    """Of two runs, the one whose server drafts (B when both or neither do)."""
    return a if a.speculative and not b.speculative else b


def counterpart(run: Run, runs: list[Run]) -> Run | None:
    """The earlier run to hold this one against: of the runs that measured the same thing (console/sweep/analysis/
    comparable.py), the newest of the other kind (drafting or not), so that an adaptive profile is checked against
    the baseline; else the newest of another profile; None without one."""
    others = [r for r in runs if r.name != run.name and r.profile != run.profile and r.has_measured_levels and not differences(r, run)]
    other_kind = [r for r in others if r.speculative != run.speculative]
    candidates = other_kind or others
    return candidates[-1] if candidates else None


def why_out(level: LevelDone) -> str | None:
    """Why a level is left out of a comparison: failed, or its client was the limit."""
    if level.failed:
        return f"failed ({level.failed})"
    if level.client_bound:
        return f"client-bound ({level.client_bound})"
    return None


def _levels(a: Run, b: Run, margin: float, drifts: dict[Side, Drift]) -> tuple[list[Level], dict[int, dict[Side, str]]]:
    """drifts: "a", "b": each run's drift, where it drifted: at each level, a lead must exceed both (drift.py)."""
    levels_a = {level.c: level for level in a.levels()}
    levels_b = {level.c: level for level in b.levels()}
    imported = {"a": bool(a.meta.imported_from), "b": bool(b.meta.imported_from)}
    levels: list[Level] = []
    excluded: dict[int, dict[Side, str]] = {}
    for c in sorted(set(levels_a) & set(levels_b)):
        ra, rb = levels_a[c], levels_b[c]
        why: dict[Side, str] = {side: w for side, level in zip(SIDES, (ra, rb), strict=True) if (w := why_out(level))}
        if why:
            excluded[c] = why
            continue
        drift = sum(d.at(ra.total_tok_s if side == "a" else rb.total_tok_s) for side, d in drifts.items())

        def verdict(metric: str, higher_is_better: bool = True, ra: LevelDone = ra, rb: LevelDone = rb, drift: float = drift) -> Verdict:
            return judge(
                estimate(ra, metric, imported=imported["a"]),
                estimate(rb, metric, imported=imported["b"]),
                higher_is_better=higher_is_better,
                margin=margin,
                drift=drift,
            )

        latency = not (ra.lagging or rb.lagging)
        energy = verdict("energy", higher_is_better=False) if ra.joules_per_token is not None and rb.joules_per_token is not None else None
        levels.append(
            Level(
                c,
                verdict("total"),
                verdict("per_request"),
                verdict("ttft", higher_is_better=False) if latency else None,
                verdict("itl", higher_is_better=False) if latency else None,
                ra,
                rb,
                energy,
            )
        )
    return levels, excluded


def saturation(levels: list[int], tps: list[float], gain: float = SATURATION_GAIN) -> int | None:
    for i in range(len(levels) - 1):
        if tps[i] > 0 and (tps[i + 1] - tps[i]) / tps[i] < gain:
            return levels[i]
    return None


def compare(
    a: Run,
    b: Run,
    margin: float = MARGIN,
    *,
    anyway: bool = False,
    may_differ: frozenset[str] = frozenset(),
    verify: bool = True,
    slo: Slo | None = None,
) -> Comparison:
    """margin: [compare] margin, as a fraction (0.02: within ±2 % two figures are alike). Runs that measured different
    things (comparable.differences, but for `may_differ`) raise NotComparable, unless `anyway`: then each difference
    heads the report."""
    found = differences(a, b, may_differ)
    if found and not anyway:
        raise NotComparable(
            f"{label(a)} and {label(b)} did not measure the same thing: {'; '.join(map(str, found))} "
            "(pivot compare --anyway compares them, saying so; --may-differ KEY lets one key differ)"
        )
    la, lb = a.measured(), b.measured()
    if not la or not lb:
        missing = a if not la else b
        raise ValueError(f"{label(missing)} has no measured level" + (f" ({missing.corrupt})" if missing.corrupt else ""))
    sides: tuple[tuple[Side, Run], ...] = (("a", a), ("b", b))
    drifts = {side: d for side, run in sides if (d := drift_of(run, margin)) is not None and d.amount}
    cmp_levels, excluded = _levels(a, b, margin, drifts)
    if not cmp_levels:
        raise ValueError(
            f"{label(a)} and {label(b)} have no level that both measured"
            + (
                ": " + "; ".join(f"C={c} {label(a if s == 'a' else b)}: {w}" for c, why in excluded.items() for s, w in why.items())
                if excluded
                else ""
            )
        )
    sat: dict[Side, int | None] = {
        side: saturation([lv.c for lv in m], [lv.total_tok_s for lv in m]) for side, m in zip(SIDES, (la, lb), strict=True)
    }
    spec_side: Side | None = None if a.speculative == b.speculative else ("a" if drafting(a, b) is a else "b")
    advice = advise(cmp_levels, spec_side, spec_side is not None and drafted_nothing(a if spec_side == "a" else b), tuple(drifts))
    return Comparison(
        a,
        b,
        cmp_levels,
        excluded,
        crossover(cmp_levels, "total"),
        crossover(cmp_levels, "per_request"),
        sat,
        advice,
        repeats=repeats(cmp_levels),
        notes=notes(a, b, drifts, cmp_levels),
        margin=margin,
        differences=found,
        verification=tuple(v for run in (a, b) if (v := verification(run, lambda x, y: compare(x, y, margin, verify=False).levels)))
        if verify
        else (),
        slo=answer(a, b, slo, margin) if slo else None,
        goodput={"a": goodput(a, slo), "b": goodput(b, slo)} if slo else {},
        frontier=dominance(a, b, margin),
        energy=energy(a, b, cmp_levels),
        capacity={"a": a.meta.capacity, "b": b.meta.capacity} if a.meta.capacity and b.meta.capacity else {},
    )

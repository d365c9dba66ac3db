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

from console.sweep.analysis.acceptance import acceptance_notes, drafted_nothing
from console.sweep.analysis.advice import Advice, Side, advise
from console.sweep.analysis.comparable import Difference, NotComparable, differences
from console.sweep.analysis.crossover import Crossover, crossover, where
from console.sweep.analysis.drift import Drift
from console.sweep.analysis.drift import drift as drift_of
from console.sweep.analysis.energy import energy_line
from console.sweep.analysis.frontier import dominance
from console.sweep.analysis.intervals import MARGIN, POINT_SPREAD, Level, Verdict, estimate, judge
from console.sweep.analysis.repeats import Repeat, repeats
from console.sweep.analysis.slo import Slo, answer, goodput
from console.sweep.model import LevelDone
from console.sweep.runs.store import Run, RunError, label, open_run
from console.sweep.words import advice_text

if TYPE_CHECKING:
    import polars as pl

REFINE_TOLERANCE = 0.15  # a change of decision is located once it lies within ±15 % of the middle of its bracket
SATURATION_GAIN = 0.10  # past this level, throughput grows by less than 10 % to the next


@dataclass(frozen=True)
class Comparison:
    a: Run
    b: Run
    levels: list[Level]
    excluded: dict[int, str]  # C -> why it is in no verdict
    total: Crossover
    per_request: Crossover
    saturation: dict[str, int | None]
    advice: Advice  # what it advises about speculation, as data (the recommendation is its words)
    repeats: list[Repeat] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    margin: float = MARGIN
    differences: list[Difference] = field(default_factory=list)  # what the runs measured differently (--anyway)
    verification: str | None = None  # of an adaptive profile's run: whether it kept what it was written to keep
    slo: str | None = None  # under the SLO asked: how many users each run serves, and which to run
    goodput: dict[str, dict[int, float]] = field(default_factory=dict)  # "a", "b": per C, requests/s meeting the SLO
    frontier: str | None = None  # where one run's throughput per GPU at a user's speed lies above the other's
    energy: str | None = None  # who spends less energy per output token where (or why it is not known)

    @property
    def drafting(self) -> Run:
        return drafting(self.a, self.b)

    @property
    def names(self) -> dict[Side, str]:
        return {"a": label(self.a), "b": label(self.b)}

    @property
    def recommendation(self) -> str:
        return advice_text(self.advice, self.names)

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

    def name(self, side: str | None) -> str:
        return label(self.a if side == "a" else self.b)

    def report(self) -> list[str]:
        """The comparison in sentences, as the terminal and the pane print them under the table."""
        sat = "; ".join(f"{name}: C={c}" if c else f"{name}: not within the levels" for name, c in self.saturation.items())
        lines = [f"not comparable, compared anyway: {d}" for d in self.differences]
        lines += [
            f"recommendation: {self.recommendation}",
            *([f"verification: {self.verification}"] if self.verification else []),
            *([f"slo: {self.slo}"] if self.slo else []),
            f"crossover, total tok/s: {self.total.text}",
            f"crossover, per-request tok/s: {self.per_request.text}",
            f"saturation (< 10 % more to the next level): {sat}",
            *([self.frontier] if self.frontier else []),
            *([self.energy] if self.energy else []),
        ]
        lines += [f"C={c}: left out: {why}" for c, why in sorted(self.excluded.items())]
        lines += [f"repeat: {r.text}" for r in self.repeats]
        refine = refine_suggestion(self)
        return lines + ([refine] if refine else []) + self.notes


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


def refine_suggestion(cmp: Comparison) -> str | None:
    """The line the comparison offers when a refinement would help."""
    found = bracket(cmp)
    if found is None or found.located:
        return None
    return (
        f"refine: {found.what} lies between C = {found.lo} and C = {found.hi}; measuring C = {found.middle} on both "
        f"runs narrows it (pivot sweep --refine {cmp.a.name} {cmp.b.name})"
    )


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


def _why_out(level: LevelDone) -> str | None:
    if level.failed:
        return f"failed ({level.failed})"
    if level.client_bound:
        return f"client-bound ({level.client_bound})"
    return None


def _levels(a: Run, b: Run, margin: float, drifts: dict[Side, Drift]) -> tuple[list[Level], dict[int, str]]:
    """drifts: "a", "b": each run's drift, where it drifted: at each level, a lead must exceed both (drift.py)."""
    levels_a = {level.c: level for level in a.levels()}
    levels_b = {level.c: level for level in b.levels()}
    imported = {"a": bool(a.meta.imported_from), "b": bool(b.meta.imported_from)}
    levels, excluded = [], {}
    for c in sorted(set(levels_a) & set(levels_b)):
        ra, rb = levels_a[c], levels_b[c]
        why = [f"{label(run)}: {w}" for run, level in ((a, ra), (b, rb)) if (w := _why_out(level))]
        if why:
            excluded[c] = "; ".join(why)
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


def _client_note(a: Run, b: Run) -> list[str]:
    """The client's CPU and the machines' load, when they differ between the runs (noise that is not the server's)."""

    def worst(run: Run, key: str) -> float | None:
        values = [v for level in run.levels() if (v := getattr(level, key)) is not None]
        return max(values) if values else None

    parts = []
    for key, what, gap, fmt in (
        ("client_cpu", "its load generator's CPU", 0.2, "{:.0%} of a core"),
        ("load_avg", "the client machine's load", 1.0, "{:.1f}"),
        ("host_load_avg", "the server host's load", 1.0, "{:.1f}"),
    ):
        va, vb = worst(a, key), worst(b, key)
        if va is not None and vb is not None and abs(va - vb) >= gap:
            parts.append(f"{what} peaked at {fmt.format(va)} in {label(a)} and {fmt.format(vb)} in {label(b)}")
    if a.client_placement and b.client_placement and a.client_placement != b.client_placement:
        parts.append(f"the load generator ran {a.client_placement} in {label(a)} and {b.client_placement} in {label(b)}")
    return [f"note: {'; '.join(parts)}"] if parts else []


def _quality_notes(run: Run) -> list[str]:
    measured = run.measured()
    notes = []
    for what, count in (
        ("usage missing: tokens counted from chunks or finish_reason", sum(lv.usage_missing for lv in measured)),
        ("ended early (finish_reason stop): their tokens count", sum(lv.short for lv in measured)),
    ):
        if count:
            notes.append(f"note: {label(run)}: {count} request(s) {what}")
    if lagging := [lv for lv in measured if lv.lagging]:
        notes.append(
            f"note: {label(run)}: latencies not measured at {where([lv.c for lv in lagging], [lv.c for lv in measured])}"
            f" ({lagging[0].lagging})"
        )
    source = run.meta.source or "another tool"
    if run.meta.imported_from and any(lv.total_tok_s_lo is None for lv in measured):
        notes.append(
            f"note: {label(run)} is aggregates imported from {source}, without per-request data: each figure it gave "
            f"without an interval is taken as ±{POINT_SPREAD * 100:g} %, so a lead must exceed that"
        )
    elif run.meta.imported_from:
        notes.append(f"note: {label(run)} was imported from {source} with its per-request records: its intervals are pivot's own")
    elif any(lv.total_tok_s_lo is None for lv in measured):
        notes.append(f"note: {label(run)} has levels under two requests: their numbers carry no interval and decide nothing")
    return notes


def _drift_notes(drifts: list[tuple[Run, Drift]], cmp_levels: list[Level], margin: float) -> list[str]:
    """The runs that drifted beyond the margin while measured: what that says, and what it does to the verdicts."""
    notes = []
    held = [lv.c for lv in cmp_levels if lv.total.within_drift]  # (the drifts of both runs together)
    for run, d in drifts:
        notes.append(
            f"note: {d.text(run)}: the server or the machine changed while it ran. A lead must exceed the ±{margin * 100:g} % "
            f"margin and that drift: ±{d.amount * 100:.1f} % at C={d.c}, its {d.tok_s:.1f} tok/s as a share of each "
            "other level's throughput" + (f"; the drift alone leaves {where(held, [lv.c for lv in cmp_levels])} undecided" if held else "")
        )
    return notes


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
            + (": " + "; ".join(f"C={c} {w}" for c, w in excluded.items()) if excluded else "")
        )
    names = {"a": label(a), "b": label(b)}
    sat = {
        names["a"]: saturation([lv.c for lv in la], [lv.total_tok_s for lv in la]),
        names["b"]: saturation([lv.c for lv in lb], [lv.total_tok_s for lv in lb]),
    }
    spec_side: Side | None = None if a.speculative == b.speculative else ("a" if drafting(a, b) is a else "b")
    advice = advise(cmp_levels, spec_side, spec_side is not None and drafted_nothing(a if spec_side == "a" else b), tuple(drifts))
    notes = (
        acceptance_notes(a)
        + acceptance_notes(b)
        + _client_note(a, b)
        + _quality_notes(a)
        + _quality_notes(b)
        + _drift_notes([(a if side == "a" else b, d) for side, d in drifts.items()], cmp_levels, margin)
    )
    verified = [v for run in (a, b) if (v := verification(run, margin))] if verify else []
    return Comparison(
        a,
        b,
        cmp_levels,
        excluded,
        crossover(cmp_levels, "total", names, margin),
        crossover(cmp_levels, "per_request", names, margin),
        sat,
        advice,
        repeats=repeats(cmp_levels, names),
        notes=notes,
        margin=margin,
        differences=found,
        verification="; ".join(verified) or None,
        slo=answer(a, b, slo, margin) if slo else None,
        goodput={"a": goodput(a, slo), "b": goodput(b, slo)} if slo else {},
        frontier=dominance(a, b, margin),
        energy=energy_line(a, b, cmp_levels, names),
    )


def verification(run: Run, margin: float = MARGIN) -> str | None:
    """Of a run of an adaptive profile pivot wrote (its meta names the baseline's and the drafting run it came from),
    whether it kept what it was written to keep, level by level: where the drafting run led the baseline beyond the
    margin (total throughput or per-request speed), that gain; elsewhere the baseline's total throughput. None for
    any other run."""
    if not run.meta.measured_from or len(run.meta.measured_from) != 2:
        return None
    try:
        base, spec = (open_run(run.dir.parent.parent, name) for name in run.meta.measured_from)
        parents, vs_spec, vs_base = (compare(x, y, margin, verify=False) for x, y in ((base, spec), (spec, run), (base, run)))
    except (RunError, ValueError) as e:
        return f"{label(run)} cannot be held against the runs it was written from: {e}"
    by_c = [{lv.c: lv for lv in cmp.levels} for cmp in (parents, vs_spec, vs_base)]
    levels = sorted(set(by_c[0]) & set(by_c[1]) & set(by_c[2]))
    kept: dict[str, list[int]] = {"spec": [], "base": [], "unsure": []}
    short: list[str] = []
    for c in levels:
        gains = [m for m in ("total", "per_request") if getattr(by_c[0][c], m).leader == "b"]
        against, checked = (by_c[1][c], gains) if gains else (by_c[2][c], ["total"])
        verdicts: list[Verdict] = [getattr(against, m) for m in checked]
        if behind := [v for v in verdicts if v.leader == "a"]:
            short.append(f"C={c}: {label(spec if gains else base)} leads it ({behind[0].text('tok/s')})")
        else:
            settled = all(v.leader == "b" or v.alike for v in verdicts)
            kept[("spec" if gains else "base") if settled else "unsure"].append(c)
    parts = []
    if kept["spec"]:
        parts.append(f"keeps the gain of {label(spec)} at {where(kept['spec'], levels)}")
    if kept["base"]:
        alike = all(by_c[2][c].total.alike for c in kept["base"])
        parts.append(f"{'matches' if alike else 'matches or beats'} {label(base)} at {where(kept['base'], levels)}")
    if kept["unsure"]:
        parts.append(f"cannot tell at {where(kept['unsure'], levels)} (repeat those levels of {label(run)})")
    said = f"{label(run)} " + (", ".join(parts) if parts else "has no level in common with the runs it was written from")
    if short:
        said += "; falls short at " + "; ".join(short) + _known_costs(run)
    return said


def _known_costs(run: Run) -> str:
    """What the engine is known to cost an adaptive setting, where the run's engine is one that does."""
    if run.meta.kind == "vllm":
        return (
            " (vLLM runs a dynamic speculative schedule with PIECEWISE CUDA graphs instead of FULL_AND_PIECEWISE, "
            "reported at about 14 % single-stream, and reported to stall under concurrency at the schedule's "
            "threshold: vllm-project/vllm issues 48494 and 49548)"
        )
    return ""

"""Of a run of an adaptive profile pivot wrote (its meta names the baseline's run and the drafting run it came from):
whether it kept what it was written to keep, level by level. Where the drafting run led the baseline beyond the
margin (total throughput or per-request speed), that gain; elsewhere the baseline's total throughput."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from console.sweep.analysis.intervals import Level, Verdict
from console.sweep.runs.store import Run, RunError, label, open_run

Compared = Callable[[Run, Run], list[Level]]  # two runs' compared levels (compare.py's, passed in: no import cycle)


@dataclass(frozen=True)
class Shortfall:
    c: int
    parent: Literal["spec", "base"]  # which of the runs it was written from leads it there
    verdict: Verdict  # that run (A) against this one (B), total tok/s


@dataclass(frozen=True)
class Verification:
    run: str  # the adaptive profile's run, and the runs it was written from, as the comparison names them
    base: str
    spec: str
    engine: str | None  # the run's engine kind: what it is known to cost an adaptive setting
    levels: tuple[int, ...] = ()  # the levels all three measured
    kept_gain: tuple[int, ...] = ()  # where the drafting run's gain is kept
    matched: tuple[int, ...] = ()  # where the baseline's throughput is matched (or beaten)
    alike: bool = True  # matched within the margin at every such level (not beaten)
    unsure: tuple[int, ...] = ()  # cannot tell: repeat those levels of this run
    short: tuple[Shortfall, ...] = ()
    error: str | None = None  # why it cannot be held against its parents


def verification(run: Run, levels_of: Compared) -> Verification | None:
    """The check; None for a run of any other profile."""
    if not run.meta.measured_from or len(run.meta.measured_from) != 2:
        return None
    base_name, spec_name = run.meta.measured_from
    try:
        base, spec = (open_run(run.dir.parent.parent, name) for name in run.meta.measured_from)
        parents, vs_spec, vs_base = (levels_of(x, y) for x, y in ((base, spec), (spec, run), (base, run)))
    except (RunError, ValueError) as e:
        return Verification(label(run), base_name, spec_name, run.meta.kind, error=str(e))
    return _kept(run, base, spec, (parents, vs_spec, vs_base))


def _kept(run: Run, base: Run, spec: Run, compared: tuple[list[Level], list[Level], list[Level]]) -> Verification:
    by_c = [{lv.c: lv for lv in levels} for levels in compared]
    levels = sorted(set(by_c[0]) & set(by_c[1]) & set(by_c[2]))
    kept: dict[str, list[int]] = {"spec": [], "base": [], "unsure": []}
    short: list[Shortfall] = []
    for c in levels:
        gains = [m for m in ("total", "per_request") if getattr(by_c[0][c], m).leader == "b"]
        against, checked = (by_c[1][c], gains) if gains else (by_c[2][c], ["total"])
        verdicts: list[Verdict] = [getattr(against, m) for m in checked]
        if behind := [v for v in verdicts if v.leader == "a"]:
            short.append(Shortfall(c, "spec" if gains else "base", behind[0]))
        else:
            settled = all(v.leader == "b" or v.alike for v in verdicts)
            kept[("spec" if gains else "base") if settled else "unsure"].append(c)
    return Verification(
        label(run),
        label(base),
        label(spec),
        run.meta.kind,
        tuple(levels),
        tuple(kept["spec"]),
        tuple(kept["base"]),
        all(by_c[2][c].total.alike for c in kept["base"]),
        tuple(kept["unsure"]),
        tuple(short),
    )

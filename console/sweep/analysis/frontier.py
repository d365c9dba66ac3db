"""The frontier: what a run gives in total throughput per GPU at each speed a user sees (per-request tok/s), one point
per level. Two runs' frontiers are compared over the users' speeds both reach: where one gives more throughput per
GPU by more than the margin, it dominates there (from the levels' own figures, interpolated between them)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from console.sweep.analysis.sides import Side
from console.sweep.model import LevelDone
from console.sweep.runs.store import Run


@dataclass(frozen=True)
class Span:
    leader: Side | None  # the run that gives more here (None: alike within the margin)
    lo: float  # a user's tok/s, from
    hi: float  # to
    most: float  # the largest ratio of the leader's throughput to the other's in the span (1 where alike)


@dataclass(frozen=True)
class Frontier:
    per_gpu: bool  # throughput per GPU (both runs say how many), else total
    margin: float
    spans: tuple[Span, ...]  # over the users' speeds both reach; empty: they reach none in common


def points(levels: list[LevelDone], gpus: int | None) -> list[tuple[float, float]]:
    """(a user's tok/s, total tok/s per GPU) of each measured level, by a user's speed."""
    per = gpus or 1
    return sorted((lv.req_tok_s_mean, lv.total_tok_s / per) for lv in levels if lv.measured and lv.req_tok_s_mean)


def _at(frontier: list[tuple[float, float]], x: float) -> float:
    """The frontier's throughput at a user's speed within its range, linearly between its points."""
    for (x0, y0), (x1, y1) in itertools.pairwise(frontier):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return frontier[-1][1] if x >= frontier[-1][0] else frontier[0][1]


def dominance(a: Run, b: Run, margin: float) -> Frontier | None:
    """Where one run's frontier lies above the other's by more than the margin; None where either has under two points."""
    per_gpu = bool(a.meta.gpu_count and b.meta.gpu_count)  # per GPU only where both say how many
    pa = points(a.measured(), a.meta.gpu_count if per_gpu else None)
    pb = points(b.measured(), b.meta.gpu_count if per_gpu else None)
    if len(pa) < 2 or len(pb) < 2:
        return None
    lo, hi = max(pa[0][0], pb[0][0]), min(pa[-1][0], pb[-1][0])
    spans: list[Span] = []
    for x in sorted({x for x, _ in pa + pb if lo <= x <= hi}) if lo < hi else []:
        ratio = _at(pb, x) / _at(pa, x)
        who: Side | None = "b" if ratio > 1 + margin else "a" if ratio < 1 - margin else None
        lead = 1.0 if who is None else ratio if who == "b" else 1 / ratio
        if spans and spans[-1].leader == who:
            spans[-1] = Span(who, spans[-1].lo, x, max(spans[-1].most, lead))
        else:
            spans.append(Span(who, x, x, lead))
    return Frontier(per_gpu, margin, tuple(spans))

"""The frontier: what a run gives in total throughput per GPU at each speed a user sees (per-request tok/s), one point
per level. Two runs' frontiers are compared over the users' speeds both reach: where one gives more throughput per
GPU by more than the margin, it dominates there (from the levels' own figures, interpolated between them)."""

from __future__ import annotations

import itertools

from console.sweep.model import LevelDone
from console.sweep.runs.store import Run, label


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


def dominance(a: Run, b: Run, margin: float) -> str | None:
    """Where one run's frontier lies above the other's by more than the margin, in words; None without two."""
    per_gpu = bool(a.meta.gpu_count and b.meta.gpu_count)  # per GPU only where both say how many
    pa = points(a.measured(), a.meta.gpu_count if per_gpu else None)
    pb = points(b.measured(), b.meta.gpu_count if per_gpu else None)
    if len(pa) < 2 or len(pb) < 2:
        return None
    unit = "total tok/s per GPU" if per_gpu else "total tok/s"
    lo, hi = max(pa[0][0], pb[0][0]), min(pa[-1][0], pb[-1][0])
    if lo >= hi:
        return f"frontier ({unit} against a user's tok/s): the two reach no user's speed in common"
    spans: list[tuple[str, float, float, float]] = []  # (who, from, to, the largest ratio in it)
    for x in sorted({x for x, _ in pa + pb if lo <= x <= hi}):
        ratio = _at(pb, x) / _at(pa, x)
        who = "b" if ratio > 1 + margin else "a" if ratio < 1 - margin else "="
        lead = ratio if who == "b" else 1 / ratio
        if spans and spans[-1][0] == who:
            spans[-1] = (who, spans[-1][1], x, max(spans[-1][3], lead))
        else:
            spans.append((who, x, x, lead))
    names = {"a": label(a), "b": label(b)}

    def at(x0: float, x1: float) -> str:
        return f"at {x0:.1f} tok/s a user" if x0 == x1 else f"at {x0:.1f}–{x1:.1f} tok/s a user"

    said = [
        f"{names[who]} gives more {at(x0, x1)} (up to ×{most:.2f})" if who != "=" else f"alike {at(x0, x1)}" for who, x0, x1, most in spans
    ]
    return f"frontier ({unit} against a user's tok/s, within ±{margin * 100:g} %): " + "; ".join(said)

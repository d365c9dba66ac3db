"""Comparing runs level by level: ratios, crossovers, saturation, and what to do about speculation."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import polars as pl

from console.sweep.store import Run

SATURATION_GAIN = 0.10  # past this level, throughput grows by less than 10 % to the next
EVEN = 0.03  # within 3 % at a level: a short sweep's noise (measured in pivot demo), nobody leads


@dataclass(frozen=True)
class Crossover:
    metric: str
    at: float | None  # interpolated C where B starts to lead (or stops leading)
    leader_below: str | None  # which run leads below the crossover
    leader_above: str | None
    text: str


@dataclass(frozen=True)
class Comparison:
    a: Run
    b: Run
    table: pl.DataFrame  # c, a_*, b_*, ratio_* per level both runs measured
    total: Crossover
    per_request: Crossover
    saturation: dict[str, int | None]
    recommendation: str
    helps_up_to: int | None  # the largest measured C where speculation still helps total throughput (None: nowhere)

    @property
    def drafting(self) -> Run:
        return drafting(self.a, self.b)


def drafting(a: Run, b: Run) -> Run:
    """Of two runs, the one whose server drafts (B when both or neither do)."""
    return a if a.speculative and not b.speculative else b


def _crossover(levels: list[int], a: list[float], b: list[float], a_name: str, b_name: str, metric: str) -> Crossover:
    diffs = [y - x for x, y in zip(a, b)]
    if all(d <= 0 for d in diffs):
        return Crossover(metric, None, a_name, a_name, f"none: {a_name} leads at every level")
    if all(d > 0 for d in diffs):
        return Crossover(metric, None, b_name, b_name, f"none: {b_name} leads at every level")
    for i in range(len(diffs) - 1):
        if (diffs[i] > 0) != (diffs[i + 1] > 0):
            # interpolate where the difference crosses zero, on a log C axis
            lo, hi = math.log(levels[i]), math.log(levels[i + 1])
            frac = diffs[i] / (diffs[i] - diffs[i + 1])
            at = math.exp(lo + frac * (hi - lo))
            below = b_name if diffs[i] > 0 else a_name
            above = a_name if diffs[i] > 0 else b_name
            return Crossover(metric, at, below, above,
                             f"C ≈ {at:.1f}: {below} leads below (C ≤ {levels[i]}), {above} from C = {levels[i + 1]}")
    return Crossover(metric, None, None, None, "the lead changes more than once: see the table")


def saturation(levels: list[int], tps: list[float], gain: float = SATURATION_GAIN) -> int | None:
    for i in range(len(levels) - 1):
        if tps[i] > 0 and (tps[i + 1] - tps[i]) / tps[i] < gain:
            return levels[i]
    return None


def counterpart(run: Run, runs: list[Run]) -> Run | None:
    """The earlier run to hold this one against: the newest of the other kind (drafting or not), so that an
    adaptive profile is checked against the baseline; else the newest of another profile; None without one."""
    others = [r for r in runs if r.name != run.name and r.profile != run.profile
              and not r.meta.get("corrupt") and r.levels().height]
    other_kind = [r for r in others if r.speculative != run.speculative]
    return (other_kind or others or [None])[-1]


def compare(a: Run, b: Run) -> Comparison:
    la, lb = a.levels(), b.levels()
    if la.is_empty() or lb.is_empty():
        raise ValueError(f"{a.name if la.is_empty() else b.name} has no completed level")
    cols = ["c", "total_tok_s", "req_tok_s_mean", "ttft_p50", "itl_p50", "errors"]
    joined = la.select([c for c in cols if c in la.columns]).join(
        lb.select([c for c in cols if c in lb.columns]), on="c", suffix="_b").sort("c")
    table = joined.rename({k: f"a_{k}" for k in cols[1:] if k in joined.columns}).rename(
        {f"{k}_b": f"b_{k}" for k in cols[1:] if f"{k}_b" in joined.columns})
    table = table.with_columns(
        (pl.col("b_total_tok_s") / pl.col("a_total_tok_s")).alias("ratio_total"),
        (pl.col("b_req_tok_s_mean") / pl.col("a_req_tok_s_mean")).alias("ratio_per_request"),
    )
    levels = table["c"].to_list()
    total = _crossover(levels, table["a_total_tok_s"].to_list(), table["b_total_tok_s"].to_list(), a.name, b.name, "total")
    per_request = _crossover(levels, [x or 0 for x in table["a_req_tok_s_mean"].to_list()],
                             [x or 0 for x in table["b_req_tok_s_mean"].to_list()], a.name, b.name, "per-request")
    sat = {a.name: saturation(la["c"].to_list(), la["total_tok_s"].to_list()),
           b.name: saturation(lb["c"].to_list(), lb["total_tok_s"].to_list())}
    recommendation, helps_up_to = recommend(a, b, table)
    return Comparison(a, b, table, total, per_request, sat, recommendation, helps_up_to)


def _where(subset: list[int], levels: list[int]) -> str:
    """Levels as the operator reads them: "C ≤ 5", "C ≥ 10", or a list when they are not one end."""
    if subset == levels:
        return "every level"
    if subset == levels[: len(subset)]:
        return f"C ≤ {subset[-1]}"
    if subset == levels[-len(subset):]:
        return f"C ≥ {subset[0]}"
    return "C = " + ", ".join(str(c) for c in subset)


def _which_leads(a: Run, b: Run, table: pl.DataFrame) -> str:
    """Two runs of the same kind (both drafting, or neither): no speculation verdict, only who leads where."""
    levels, ratios = table["c"].to_list(), table["ratio_total"].to_list()
    b_leads = [c for c, r in zip(levels, ratios) if r > 1 + EVEN]
    a_leads = [c for c, r in zip(levels, ratios) if r < 1 - EVEN]
    best = max(zip(ratios, levels))
    if not b_leads and not a_leads:
        return f"{a.profile} and {b.profile} are even (within {EVEN:.0%}) at every level"
    if not b_leads:
        return f"{a.profile} leads total throughput at {_where(a_leads, levels)}: {b.profile} brings no gain"
    text = f"{b.profile} leads total throughput at {_where(b_leads, levels)} (×{best[0]:.2f} at C={best[1]})"
    if a_leads:
        return text + f", {a.profile} at {_where(a_leads, levels)}"
    return text + ("; even elsewhere" if len(b_leads) < len(levels) else "")


def recommend(a: Run, b: Run, table: pl.DataFrame) -> tuple[str, int | None]:
    """One actionable line, and the C above which drafting should be off (None: no adaptive setting helps).
    The speculative run is the one whose command line drafts; differences within EVEN are nobody's."""
    if a.speculative == b.speculative:
        return _which_leads(a, b, table), None
    spec = drafting(a, b)
    flip = (lambda r: r) if spec is b else (lambda r: 1 / r)  # noqa: E731
    levels = table["c"].to_list()
    total = [flip(r) for r in table["ratio_total"].to_list()]
    speed = [flip(r) if r else None for r in table["ratio_per_request"].to_list()]
    wins = [c for c, r in zip(levels, total) if r > 1 + EVEN]
    losses = [c for c, r in zip(levels, total) if r < 1 - EVEN]
    speed_wins = [c for c, r in zip(levels, speed) if r and r > 1 + EVEN]
    who = f"speculation ({spec.profile})"
    if not losses:
        if not wins and not speed_wins:
            return f"{who} is even with the baseline at every level (within {EVEN:.0%}): it buys nothing", None
        gains = [f"per-request speed at {_where(speed_wins, levels)}"] if speed_wins else []
        gains += [f"total throughput at {_where(wins, levels)}"] if wins else []
        return f"{who} helps {' and '.join(gains)}, costs no total throughput anywhere: keep it", None
    if not wins and not speed_wins:
        return f"{who} loses total throughput at {_where(losses, levels)} and helps nowhere: disable it", None
    speed_text = f"helps per-request speed only at {_where(speed_wins, levels)}" if speed_wins else "never helps per-request speed"
    total_text = (f"wins total throughput at {_where(wins, levels)} and loses it at {_where(losses, levels)}" if wins
                  else f"loses total throughput at {_where(losses, levels)}")
    safe = [c for c in levels[: levels.index(losses[0])]]  # the levels below the first loss
    cut = safe[-1] if safe and (set(safe) & set(wins + speed_wins)) else None
    verdict = f"turn drafting off above C={cut}" if cut else "disable it"
    return f"{who} {speed_text}{', ' if wins else ' and '}{total_text}: {verdict}", cut


def sglang_adaptive_config(off_above: int, steps: int = 3) -> dict:
    """--speculative-adaptive-config: draft at running batches up to `off_above`, not beyond."""
    return {"batch_size_tiers": [{"min_batch_size": 1, "candidate_steps": [steps]},
                                 {"min_batch_size": off_above + 1, "candidate_steps": [0]}]}


def vllm_speculative_config(off_above: int, tokens: int = 3) -> dict:
    return {"num_speculative_tokens": tokens,
            "num_speculative_tokens_per_batch_size": [[1, tokens], [off_above + 1, 0]]}


def adaptive_profile_text(spec_profile: str, config_path: str) -> str:
    return (f'# written by pivot compare: {spec_profile} with drafting off above the crossover\n'
            f'description = "{spec_profile} + adaptive speculation from pivot compare"\n'
            f'extends = "{spec_profile}"\n\n[flags]\nspeculative-adaptive = true\n'
            f'speculative-adaptive-config = {json.dumps(config_path)}\n')

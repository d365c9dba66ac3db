"""Energy: what each output token cost the server host's GPUs, from their power read while a level's requests were in
flight (console/sweep/loadgen/generator.py sample_power) over the level's throughput. Held against the margin like every other figure
(lower is better), its interval from the readings and the throughput's."""

from __future__ import annotations

from dataclasses import dataclass

from console.sweep.analysis.intervals import Level
from console.sweep.analysis.sides import SIDES, Side
from console.sweep.runs.store import Run


def unknown_power(run: Run) -> bool:
    return not any(lv.gpu_watts is not None for lv in run.measured())


@dataclass(frozen=True)
class Energy:
    """Who spends less energy per output token where; `dark`: the runs that read no GPU power at all (then nothing
    else is known). Levels without an energy verdict on both sides are in no list."""

    dark: tuple[Side, ...]
    levels: tuple[int, ...]  # the levels both runs read power at
    gpus: int | None  # the GPUs each side's figure covers, where both say the same
    less: dict[Side, tuple[int, ...]]  # where each side spends less beyond the margin
    most: dict[Side, float]  # each side's largest saving there, as the ratio of its J/tok to the other's (×0.80)


def energy(a: Run, b: Run, levels: list[Level]) -> Energy:
    dark = tuple(side for side, run in zip(SIDES, (a, b), strict=True) if unknown_power(run))
    verdicts = [(lv.c, lv.energy) for lv in levels if lv.energy is not None] if not dark else []
    less: dict[Side, tuple[int, ...]] = {}
    most: dict[Side, float] = {}
    for side in SIDES:
        mine = [(c, v) for c, v in verdicts if v.leader == side]
        if mine:
            less[side] = tuple(c for c, _ in mine)
            most[side] = min((v.ratio or 1) if side == "b" else 1 / (v.ratio or 1) for _, v in mine)
    gpus = a.meta.gpu_count if a.meta.gpu_count and a.meta.gpu_count == b.meta.gpu_count else None
    return Energy(dark, tuple(c for c, _ in verdicts), gpus, less, most)

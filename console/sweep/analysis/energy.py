"""Energy: what each output token cost the server host's GPUs, from their power read each second while a level ran
(console/sweep/loadgen/generator.py sample_power) over the level's throughput. Held against the margin like every
other figure (lower is better), its interval the throughput's: power is read, not sampled per request."""

from __future__ import annotations

from console.sweep.analysis.crossover import undecided, where
from console.sweep.analysis.intervals import Level
from console.sweep.runs.store import Run, label


def unknown_power(run: Run) -> bool:
    return not any(lv.gpu_watts is not None for lv in run.measured())


def energy_line(a: Run, b: Run, levels: list[Level], names: dict[str, str]) -> str:
    """Who spends less energy per output token where, in one line; or why it is not known."""
    missing = [label(run) for run in (a, b) if unknown_power(run)]
    if missing:
        return (
            f"energy per token: not known: {' and '.join(missing)} read no GPU power (a host without nvidia-smi or "
            "power readings, a server across nodes or behind a URL)"
        )
    verdicts = [(lv.c, lv.energy) for lv in levels if lv.energy is not None]
    if not verdicts:
        return "energy per token: not known at any level both runs measured"
    cs = [c for c, _ in verdicts]
    first = next(lv for lv in levels if lv.energy is not None)
    gpus = f" of {a.meta.gpu_count} GPU(s)" if a.meta.gpu_count and a.meta.gpu_count == b.meta.gpu_count else ""
    said = [f"J per output token{gpus}, A {first.a.joules_per_token:.2f} vs B {first.b.joules_per_token:.2f} at C={first.c}"]
    for side in ("b", "a"):
        less = [(c, v) for c, v in verdicts if v.leader == side]
        if less:
            most = min((v.ratio or 1) if side == "b" else 1 / (v.ratio or 1) for _, v in less)
            said.append(f"{names[side]} spends less at {where([c for c, _ in less], cs)} (down to ×{most:.2f})")
    return "energy: " + "; ".join(said) + undecided(verdicts, cs)

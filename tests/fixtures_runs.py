"""Runs on disk with the campaign's numbers, for comparison tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from console.sweep.model import RunMeta
from console.sweep.runs.store import EVENTS, create_run

BASELINE = {
    1: (84.5, 92.6),
    2: (166.0, 84.0),
    5: (315.0, 64.0),
    10: (450.0, 46.0),
    30: (631.0, 21.5),
    70: (713.0, 10.5),
    100: (735.0, 7.5),
    250: (773.0, 3.1),
}
EAGLE3 = {
    1: (88.0, 96.1),
    2: (150.0, 76.0),
    5: (225.0, 46.0),
    10: (273.0, 28.0),
    30: (324.0, 11.0),
    70: (341.0, 4.9),
    100: (347.0, 3.5),
    250: (354.0, 1.4),
}
SPEC_FLAGS = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]


def level(c: int, total: float, per: float, spread: float = 0.01, **extra: object) -> dict[str, object]:
    """A level_done event with 95 % intervals of ±spread around its figures."""
    return {
        "type": "level_done",
        "c": c,
        "requests": max(c, 4),
        "errors": 0,
        "wall_s": 10.0,
        "output_tokens": int(total * 10),
        "total_tok_s": total,
        "steady_tok_s": total,
        "total_tok_s_lo": total * (1 - spread),
        "total_tok_s_hi": total * (1 + spread),
        "req_tok_s_mean": per,
        "req_tok_s_p50": per,
        "req_tok_s_lo": per * (1 - spread),
        "req_tok_s_hi": per * (1 + spread),
        "ttft_p50": 0.05,
        "itl_p50": 1 / per,
        "itl_mean": 1 / per,
        "itl_lo": 1 / per * (1 - spread),
        "itl_hi": 1 / per * (1 + spread),
        **extra,
    }


def write_run(
    campaign: Path,
    name: str,
    profile: str,
    numbers: dict[int, tuple[float, float]],
    *,
    speculative: bool,
    complete: bool = True,
    spread: float = 0.01,
    kind: str = "sglang",
    argv: list[str] | None = None,
    settings: Mapping[str, object] | None = None,
    every_level: Mapping[str, object] | None = None,
    **meta: object,
) -> None:
    """settings: the sweep's, beside its levels; every_level: more of each level_done (gpu_watts, …); meta: more of
    run.toml (host, gpu_count, …)."""
    levels = sorted(numbers) if complete else sorted(numbers)[:3]
    argv = argv or ["python", "-m", "sglang.launch_server", *(SPEC_FLAGS if speculative else [])]
    run = create_run(
        campaign,
        RunMeta.model_validate(
            {"profile": profile, "kind": kind, "argv": argv, **meta, "settings": {"levels": sorted(numbers), **(settings or {})}}
        ),
        name=name,
    )
    with open(run.dir / EVENTS, "a") as f:
        f.write(json.dumps({"type": "sweep_started"}) + "\n")
        for c in levels:
            total, per = numbers[c]
            f.write(json.dumps({"type": "level_started", "c": c, "requests": c}) + "\n")
            f.write(json.dumps(level(c, total, per, spread, **(every_level or {}))) + "\n")
        if complete:
            f.write(json.dumps({"type": "sweep_done", "aborted": False, "stopped": False}) + "\n")
        else:
            f.write(json.dumps({"type": "level_started", "c": sorted(numbers)[3], "requests": 9}) + "\n")
    run.finish()

"""Old campaigns in: SGLang's `bench_serving --output-file` JSONL (one line per run, one run per
concurrency) becomes a pivot run, one level per line, so it can be compared with new sweeps."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from console.remote.command import shell_line
from console.sweep.model import LevelDone, RunMeta, SweepDone
from console.sweep.runs.store import EVENTS, Run, RunError, create_run


def _ms(value: Any) -> float | None:
    return None if value is None else float(value) / 1000.0


def _checked(line: dict[str, Any]) -> None:
    """Every number a finite, non-negative one: NaN, infinities and negative counts are no measurement."""
    for key, value in line.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{key} is {value}, not a measurement")
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"{key} is negative ({value})")


def level_from_bench_serving(line: dict[str, Any]) -> LevelDone:
    _checked(line)
    c = line.get("max_concurrency") or line.get("concurrency")
    if not isinstance(c, (int, float)) or c < 1:
        raise ValueError("no max_concurrency: pivot compares runs by concurrency")
    tpot = line.get("mean_tpot_ms")
    completed = int(line.get("completed", 0))
    return LevelDone.model_validate(
        {
            "c": int(c),
            "requests": completed,
            "errors": 0,
            "wall_s": line.get("duration"),
            "output_tokens": line.get("total_output_tokens", line.get("total_output")),
            "total_tok_s": float(line["output_throughput"]),
            "steady_tok_s": None,
            "req_tok_s_mean": 1000.0 / tpot if tpot else None,
            "req_tok_s_p50": None,
            "ttft_p50": _ms(line.get("median_ttft_ms")),
            "ttft_p90": _ms(line.get("p90_ttft_ms")),
            "ttft_p99": _ms(line.get("p99_ttft_ms")),
            "itl_p50": _ms(line.get("median_itl_ms")),
            "itl_p90": _ms(line.get("p90_itl_ms")),
            "itl_p99": _ms(line.get("p99_itl_ms")),
            "e2e_p50": _ms(line.get("median_e2e_latency_ms")),
            "e2e_p90": _ms(line.get("p90_e2e_latency_ms")),
            "e2e_p99": _ms(line.get("p99_e2e_latency_ms")),
            "requests_per_s": line.get("request_throughput"),
            "imported": True,
        },
        strict=False,
    )


def import_bench_serving(
    campaign_dir: Path, path: Path, *, name: str | None, profile: str, argv: list[str] | None = None, kind: str | None = None
) -> Run:
    """argv, kind: the profile's, when it is known here, so that the comparison knows whether the run drafted."""
    levels = []
    try:
        text_lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        raise RunError(f"{path}: cannot read: {e.strerror}") from None
    for number, text in enumerate(text_lines, 1):
        if not text.strip():
            continue
        try:
            levels.append(level_from_bench_serving(json.loads(text)))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise RunError(f"{path}:{number}: not a bench_serving result line ({e})") from None
    if not levels:
        raise RunError(f"{path}: no result lines")
    by_c = {level.c: level for level in levels}  # a later line for the same C wins, as a rerun would
    meta = RunMeta(
        profile=profile,
        imported_from=str(path),
        source="sglang bench_serving",
        settings={"levels": sorted(by_c)},
        argv=argv,
        command_line=shell_line(argv) if argv else None,
        kind=kind if argv else None,
    )
    run = create_run(campaign_dir, meta, name=name)
    with open(run.dir / EVENTS, "a", encoding="utf-8") as f:
        for c in sorted(by_c):
            f.write(by_c[c].model_dump_json() + "\n")
        f.write(SweepDone().model_dump_json() + "\n")
    run.finish()
    return run

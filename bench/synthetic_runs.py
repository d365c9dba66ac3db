"""Two stored runs as a long sweep leaves them, for timing what reads runs: a baseline and an EAGLE-3 run of
16,000 streamed requests each (64 tokens, one chunk per token for the baseline, several for EAGLE-3), written
as the load generator writes them (events.jsonl, run.toml), without the Parquet tables a finished sweep adds:
what `pivot runs`, `runs show` and `compare` meet after a console was killed mid-sweep, and what `Run.finish()`
turns into tables at the end of a sweep.

    python -m bench.synthetic_runs CAMPAIGN_DIR [--requests 16000]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from console.sweep.level_stats import level_metrics
from console.sweep.metrics import RequestRecord
from console.sweep.model import RunMeta
from console.sweep.runs.store import EVENTS, create_run

LEVELS = (1, 2, 5, 10, 30, 70, 100, 250, 500, 1000)
SPEC_FLAGS = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]
MAX_TOKENS = 64


def _requests_per_level(total: int) -> dict[int, int]:
    weights = {c: max(16, 8 * c) for c in LEVELS}
    scale = total / sum(weights.values())
    counts = {c: max(1, round(w * scale)) for c, w in weights.items()}
    counts[LEVELS[-1]] += total - sum(counts.values())
    return counts


def _record(rng: random.Random, c: int, index: int, start: float, per_token: float, tokens_per_chunk: int) -> RequestRecord:
    ttft = 0.05 + rng.random() * 0.1
    t, chunks, left = ttft, [], MAX_TOKENS
    while left > 0:
        n = min(left, tokens_per_chunk if tokens_per_chunk == 1 else rng.randint(1, tokens_per_chunk))
        chunks.append((round(t, 6), n))
        t += per_token * n * (0.8 + 0.4 * rng.random())
        left -= n
    return RequestRecord(
        c=c,
        index=index,
        start=round(start, 6),
        status=200,
        error=None,
        ttft=chunks[0][0],
        e2e=round(t, 6),
        tokens=MAX_TOKENS,
        chunks=tuple(chunks),
        finish_reason="length",
    )


def write_run(campaign: Path, name: str, *, speculative: bool, requests: int, seed: int) -> None:
    rng = random.Random(seed)
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/m", *(SPEC_FLAGS if speculative else [])]
    meta = RunMeta(profile=name, kind="sglang", argv=argv, host="bench", settings={"levels": list(LEVELS), "max_tokens": MAX_TOKENS})
    run = create_run(campaign, meta, name=name)
    now = time.time()
    with open(run.dir / EVENTS, "w") as f:

        def emit(event: dict) -> None:
            f.write(json.dumps({"t": round(now, 4), **event}, separators=(",", ":")) + "\n")

        emit(
            {
                "type": "sweep_started",
                "url": "http://127.0.0.1:1",
                "model": "m",
                "server": {},
                "resumed": [],
                "repeat": [],
                "warnings": [],
                "pid": 1,
            }
        )
        for c, count in _requests_per_level(requests).items():
            emit({"type": "level_started", "c": c, "requests": count, "warmup": 0, "repeat": False})
            per_token = (0.011 if not speculative else 0.010) * (1 + c / (100 if not speculative else 40))
            records = []
            for i in range(count):
                record = _record(rng, c, i, i / c * per_token * MAX_TOKENS, per_token, 3 if speculative else 1)
                records.append(record)
                emit({"type": "request", **record.to_dict()})
            wall = count / c * per_token * MAX_TOKENS
            metrics = level_metrics(c, records, wall)
            emit(
                {
                    "type": "level_done",
                    "c": c,
                    "peak_in_flight": c,
                    "repeat": False,
                    **metrics.model_dump(exclude={"c"}),
                    "client_cpu": 0.3,
                    "loop_lag_p50": 0.0,
                    "loop_lag_p90": 0.001,
                    "loop_lag_p99": 0.002,
                    "load_avg": 1.0,
                    "client_bound": None,
                    "lagging": None,
                }
            )
        emit({"type": "sweep_done", "aborted": False, "stopped": False, "failed": None})


def write_pair(campaign: Path, requests: int = 16000) -> tuple[str, str]:
    write_run(campaign, "bench-baseline", speculative=False, requests=requests, seed=1)
    write_run(campaign, "bench-eagle3", speculative=True, requests=requests, seed=2)
    return "bench-baseline", "bench-eagle3"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path)
    parser.add_argument("--requests", type=int, default=16000)
    args = parser.parse_args()
    print(" ".join(write_pair(args.campaign, args.requests)))


if __name__ == "__main__":
    main()

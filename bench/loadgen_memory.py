"""The load generator's memory over one long level: a `duration_s` level at C=64 (64-token answers) against the
simulated server run 30x fast, the generator run directly (--url) as its own process, its RSS read from /proc every
second. Figures: requests per second, RSS when the level has run 10 % and 90 % of its time, the growth between per
minute, per request, and what it would be over an hour at the same rate; the peak (the run's tables written at the end). Figures only.

    python -m bench.loadgen_memory [--tree PATH] [--seconds 180]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, SimHost, load, status_mib, tree_env
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run

C = 64


def measure(tree: Path, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="perf-bench-loadgen-memory-") as tmp:
        work = Path(tmp)
        sim = SimHost(work / "sim", time_scale=30, traffic=False)
        try:
            settings = {"levels": [C], "duration_s": seconds, "max_tokens": 64, "warmup": 0}
            run = create_run(work / "campaign", RunMeta(profile="bench", settings=settings))
            argv = [sys.executable, "-m", "console.sweep.loadgen", "--url", f"http://127.0.0.1:{sim.server_port}"]
            events = (work / "stdout.jsonl").open("w")  # a file, not a pipe nobody reads while the level runs
            proc = subprocess.Popen([*argv, "--run-dir", str(run.dir)], stdout=events, env=tree_env(tree), cwd=tree)
            samples: list[tuple[float, float]] = []
            t0 = time.monotonic()
            while proc.poll() is None:
                if (rss := status_mib(proc.pid)) is not None:
                    samples.append((time.monotonic() - t0, rss))
                time.sleep(1.0)
            events.close()
            out = (work / "stdout.jsonl").read_text()
        finally:
            sim.close()
    done = [e for line in out.splitlines() if (e := json.loads(line)).get("type") == "level_done"]
    level = done[-1] if done else {}

    def at(fraction: float) -> tuple[float, float] | None:
        return next(((t, rss) for t, rss in samples if t >= fraction * seconds), None)

    early, late = at(0.1), at(0.9)  # the level running: past its start, before the run's tables are written at its end
    growth = late[1] - early[1] if early and late else None
    per_min = growth / (late[0] - early[0]) * 60 if growth is not None and late and early and late[0] > early[0] else None
    rate = level.get("requests_per_s")
    return {
        "requests_per_s": rate,
        "requests": level.get("requests"),
        "rss_at_10_pct_mib": early and round(early[1], 1),
        "rss_at_90_pct_mib": late and round(late[1], 1),
        "growth_mib_per_min": per_min and round(per_min, 2),
        "growth_mib_per_hour": per_min and round(per_min * 60),
        "growth_kib_per_request": round(per_min * 1024 / 60 / rate, 3) if per_min is not None and rate else None,
        "rss_peak_mib": round(max(r for _, r in samples), 1) if samples else None,  # with the run's tables written
        "rss_every_tenth": [round(s[1], 1) for k in range(1, 11) if (s := at(k / 10 - 0.05))],
        "load": load(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--seconds", type=float, default=180.0, help="the level's duration_s")
    args = parser.parse_args()
    print(json.dumps(measure(args.tree, args.seconds), indent=2))


if __name__ == "__main__":
    main()

"""The load generator's memory over one long level: a `duration_s` level at C=64 (64-token answers) against the
simulated server run 30x fast, the generator run directly (--url) as its own process, its RSS read from /proc every
second. Figures: requests per second, RSS when the level has run 10 % of its time and at its end, the growth per
minute, per request, and what that growth would be over an hour at the same rate. Figures only.

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

from bench.common import ROOT, SimHost, load, tree_env
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run

C = 64


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def measure(tree: Path, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="perf-bench-loadgen-memory-") as tmp:
        work = Path(tmp)
        sim = SimHost(work / "sim", time_scale=30, traffic=False)
        try:
            settings = {"levels": [C], "duration_s": seconds, "max_tokens": 64, "warmup": 0}
            run = create_run(work / "campaign", RunMeta(profile="bench", settings=settings))
            argv = [sys.executable, "-m", "console.sweep.loadgen", "--url", f"http://127.0.0.1:{sim.server_port}"]
            proc = subprocess.Popen([*argv, "--run-dir", str(run.dir)], stdout=subprocess.PIPE, text=True, env=tree_env(tree), cwd=tree)
            samples: list[tuple[float, float]] = []
            t0 = time.monotonic()
            while proc.poll() is None:
                if (rss := rss_mib(proc.pid)) is not None:
                    samples.append((time.monotonic() - t0, rss))
                time.sleep(1.0)
            out, _ = proc.communicate()
        finally:
            sim.close()
    done = [e for line in out.splitlines() if (e := json.loads(line)).get("type") == "level_done"]
    level = done[-1] if done else {}
    early = next((rss for t, rss in samples if t >= 0.1 * seconds), None)
    late_t, late = samples[-1] if samples else (0.0, None)
    early_t = next((t for t, _ in samples if t >= 0.1 * seconds), 0.0)
    per_min = (late - early) / (late_t - early_t) * 60 if late is not None and early is not None and late_t > early_t else None
    return {
        "requests_per_s": level.get("requests_per_s"),
        "requests": level.get("requests"),
        "rss_early_mib": round(early, 1) if early else None,
        "rss_end_mib": round(late, 1) if late else None,
        "rss_peak_mib": round(max(r for _, r in samples), 1) if samples else None,
        "growth_mib_per_min": round(per_min, 2) if per_min is not None else None,
        "growth_mib_per_hour": round(per_min * 60) if per_min is not None else None,
        "growth_kib_per_request": round((late - early) * 1024 / (0.9 * level["requests"]), 2)
        if late is not None and early is not None and level.get("requests")
        else None,
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

"""The load generator on several processes (`[sweep] workers`, issue 25): against the simulated server run 30x fast,
directly (--url), the same level by one process and by two.

- ceiling: C=250, 3,000 requests of 64 tokens. Per count of workers: tokens per second reached, the busiest
  process's CPU, the CPU of all of the load generator's processes together (its own and its workers', from
  getrusage), the tokens per second of that CPU, and the machine's load. On a machine whose cores the simulated server
  shares, the server is the limit: the figures then say what each process spends, not the ceiling of several cores.
- alike: levels C=16 and C=48 (160 requests of 64 tokens), which one process carries, by one process and by two,
  compared as `pivot compare` does (margin 2 %), beside one process against itself: each level's B/A throughput,
  its spread and who leads (None: alike or cannot tell).

    python -m bench.loadgen_workers [--tree PATH] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, SimHost, load, median, tree_env
from console.sweep.analysis.compare import compare
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run, open_run


def one_sweep(tree: Path, campaign: Path, url: str, settings: dict[str, Any], name: str) -> tuple[list[dict[str, Any]], float]:
    """The levels' events of one sweep, and the CPU of the load generator's processes over its wall time."""
    run = create_run(campaign, RunMeta(profile="bench", settings=settings), name=name)
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "console.sweep.loadgen", "--url", url, "--run-dir", str(run.dir)],
        capture_output=True,
        text=True,
        cwd=tree,
        env=tree_env(tree),
        timeout=600,
    )
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic() - t0
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / wall
    levels = [e for line in done.stdout.splitlines() if line.startswith("{") and (e := json.loads(line))["type"] == "level_done"]
    return levels, cpu


def _alike(row: dict[str, Any], b: str) -> dict[str, Any]:
    return {
        "c": row["c"],
        "b": b,
        "ratio": round(row["ratio_total"], 4),
        "spread": round(row["spread_total"], 4),
        "leader": row["leader_total"],
        "itl_ratio": round(row["ratio_itl"], 4) if row["ratio_itl"] else None,
        "ttft_ratio": round(row["ratio_ttft"], 4) if row["ratio_ttft"] else None,
    }


def measure(tree: Path, runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {"ceiling": {}, "alike": []}
    with tempfile.TemporaryDirectory(prefix="perf-bench-workers-") as tmp:
        work = Path(tmp)
        sim = SimHost(work / "sim", time_scale=30, traffic=False)
        url = f"http://127.0.0.1:{sim.server_port}"
        try:
            common = {"max_tokens": 64, "drift_check": False}
            for workers in (1, 2):
                results = []
                for i in range(runs):
                    settings = {**common, "levels": [250], "requests": 3000, "workers": workers}
                    levels, cpu = one_sweep(tree, work / "campaign", url, settings, f"ceiling-{workers}-{i}")
                    level = levels[0]
                    results.append(
                        {
                            "tok_s": round(level["total_tok_s"]),
                            "busiest_cpu": level["client_cpu"],
                            "all_cpu": round(cpu, 3),
                            "tok_per_cpu_s": round(level["total_tok_s"] / cpu),
                            "tok_per_cpu_s_of_a_worker": round(level["total_tok_s"] / workers / level["client_cpu"]),
                            "errors": level["errors"],
                            "load": round(load(), 2),
                        }
                    )
                out["ceiling"][workers] = {
                    "runs": results,
                    **{
                        k: median(r[k] for r in results)
                        for k in ("tok_s", "busiest_cpu", "all_cpu", "tok_per_cpu_s", "tok_per_cpu_s_of_a_worker")
                    },
                }
            for i in range(runs):
                for name, workers in (("one", 1), ("one-again", 1), ("two", 2)):
                    settings = {**common, "levels": [16, 48], "requests": 160, "workers": workers}
                    one_sweep(tree, work / "campaign", url, settings, f"alike-{name}-{i}")
                for b in ("one-again", "two"):  # one process against itself: how alike two runs are at all
                    cmp = compare(open_run(work / "campaign", f"alike-one-{i}"), open_run(work / "campaign", f"alike-{b}-{i}"), margin=0.02)
                    out["alike"] += [_alike(row, b) for row in cmp.table.iter_rows(named=True)]
        finally:
            sim.close()
    one, two = out["ceiling"][1], out["ceiling"][2]
    out["one_tok_s"], out["two_tok_s"] = one["tok_s"], two["tok_s"]
    out["two_over_one"] = round(two["tok_s"] / one["tok_s"], 3)
    out["cpu_per_token_two_over_one"] = round(one["tok_per_cpu_s"] / two["tok_per_cpu_s"], 3)
    out["one_tok_per_cpu_s"], out["a_worker_tok_per_cpu_s"] = one["tok_per_cpu_s_of_a_worker"], two["tok_per_cpu_s_of_a_worker"]
    two_levels = [a for a in out["alike"] if a["b"] == "two"]
    out["two_levels_led"] = f"{sum(a['leader'] is not None for a in two_levels)} of {len(two_levels)}"
    out["two_ratio_range"] = f"{min(a['ratio'] for a in two_levels):.3f}-{max(a['ratio'] for a in two_levels):.3f}"
    again = [a for a in out["alike"] if a["b"] == "one-again"]
    out["again_ratio_range"] = f"{min(a['ratio'] for a in again):.3f}-{max(a['ratio'] for a in again):.3f}"
    out["load"] = load()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(measure(args.tree, args.runs), indent=1))


if __name__ == "__main__":
    main()

"""The load generator's ceiling: levels C=250 and C=1000 (64-token answers) against the simulated server run 30x
faster than its calibration, directly (as a load generator on the GPU host would reach it) and through an SSH
forward to OpenSSH's sshd (as a console's on the jump host does). Per path: the throughput reached, the load
generator's CPU, and the tokens it handles per second of its CPU (its ceiling on one core). Figures only.

    python -m bench.loadgen_figures [--tree PATH] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import ROOT, OpenSshHost, SimHost, load, median, tree_env
from console.sweep.store import create_run

LEVELS = (250, 1000)


def one_sweep(tree: Path, target: list[str], campaign: Path) -> list[dict[str, Any]]:
    run = create_run(campaign, {"profile": "bench", "settings": {"levels": list(LEVELS), "requests": "c",
                                                                  "min_requests": 2 * max(LEVELS), "max_tokens": 64}})
    done = subprocess.run([sys.executable, "-m", "console.sweep.loadgen", *target, "--run-dir", str(run.dir)],
                          capture_output=True, text=True, env=tree_env(tree), cwd=tree, timeout=300)
    levels = []
    for line in done.stdout.splitlines():
        event = json.loads(line)
        if event.get("type") == "level_done":
            cpu = event.get("client_cpu") or 0
            levels.append({"c": event["c"], "tok_s": round(event["total_tok_s"]), "client_cpu": cpu,
                           "tok_per_cpu_s": round(event["total_tok_s"] / cpu) if cpu else None,
                           "client_bound": bool(event.get("client_bound")), "lagging": bool(event.get("lagging")),
                           "errors": event["errors"], "load": round(event.get("load_avg") or 0, 2)})
    return levels


def measure(tree: Path, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="perf-bench-loadgen-") as tmp:
        work = Path(tmp)
        sim = SimHost(work / "sim", time_scale=30, traffic=False)
        host = OpenSshHost(work / "sshd", sim)
        config = host.config(work / "pivot.toml", work / "campaign")
        paths = {"direct": ["--url", f"http://127.0.0.1:{sim.server_port}"],
                 "ssh": ["--config", str(config), "--host", "gpu", "--port", str(sim.server_port)]}
        try:
            results = {name: [one_sweep(tree, target, work / "campaign") for _ in range(runs)]
                       for name, target in paths.items()}
        finally:
            host.close()
            sim.close()
    out: dict[str, Any] = {"runs": results, "load": load()}
    for name, sweeps in results.items():
        best = [max(levels, key=lambda lv: lv["tok_s"]) for levels in sweeps if levels]
        out[f"{name}_tok_s"] = median(b["tok_s"] for b in best)
        out[f"{name}_client_cpu"] = median(b["client_cpu"] for b in best)
        out[f"{name}_tok_per_cpu_s"] = median(lv["tok_per_cpu_s"] for levels in sweeps for lv in levels)
        out[f"{name}_client_bound_levels"] = sum(lv["client_bound"] for levels in sweeps for lv in levels)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(measure(args.tree, args.runs), indent=1))


if __name__ == "__main__":
    main()

"""The load generator's ceiling: levels C=250 and C=1000 (64-token answers) against the simulated server run 30x
faster than its calibration, by three paths: direct (--url), through an SSH forward to OpenSSH's sshd (`client =
"console"`: generated on the console's machine), and on the host (`client = "host"`: uploaded and run by sshd's
session next to the server, its events relayed back over SSH). Per path: the throughput reached, the load generator's
CPU, the tokens it handles per second of its CPU (its ceiling on one core), and the CPU the console's machine spends
(the whole local process: the generator itself, or only the relay of what the host's generator sends). And rate levels
(open loop, Poisson arrivals; a tree that knows `rates`), direct: RATES requests per second of 64-token answers, the
requests per second it sent against those asked, how late it sent against its schedule (p90), its CPU and tokens per
second of it. Figures only.

    python -m bench.loadgen_figures [--tree PATH] [--runs 3]
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

from bench.common import ROOT, OpenSshHost, SimHost, load, median, tree_env
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run

LEVELS = (250, 1000)
RATES = (100.0, 300.0, 600.0)  # requests a second of 64 tokens: 6,400 to 38,400 tok/s asked, past the closed loop's ceiling


def knows_rates(tree: Path) -> bool:
    return "rates:" in (tree / "console" / "settings.py").read_text()


def has_on_host(tree: Path) -> bool:
    """Whether the tree can run the load generator on the host (it moved into console/sweep/loadgen/ since)."""
    return any((tree / "console" / "sweep" / where / "on_host.py").exists() for where in ("", "loadgen"))


def one_sweep(tree: Path, target: list[str], campaign: Path, client: str) -> list[dict[str, Any]]:
    settings: dict[str, Any] = {"levels": list(LEVELS), "requests": "c", "min_requests": 2 * max(LEVELS), "max_tokens": 64}
    if client == "rates":
        settings = {"rates": list(RATES), "requests": 3000, "max_tokens": 64, "drift_check": False}
    elif has_on_host(tree):  # (an older tree knows no `client`, and generates every load itself)
        settings["client"] = client
    run = create_run(campaign, RunMeta(profile="bench", settings=settings))
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "console.sweep.loadgen", *target, "--run-dir", str(run.dir)],
        capture_output=True,
        text=True,
        env=tree_env(tree),
        cwd=tree,
        timeout=300,
    )
    after, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic() - t0
    local_cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / wall
    levels = []
    for line in done.stdout.splitlines():
        event = json.loads(line)
        if event.get("type") == "level_done":
            cpu = event.get("client_cpu") or 0
            levels.append(
                {
                    "c": event["c"],
                    "tok_s": round(event["total_tok_s"]),
                    "client_cpu": cpu,
                    "tok_per_cpu_s": round(event["total_tok_s"] / cpu) if cpu else None,
                    "client_bound": bool(event.get("client_bound")),
                    "lagging": bool(event.get("lagging")),
                    "errors": event["errors"],
                    "load": round(event.get("load_avg") or 0, 2),
                    "console_machine_cpu": round(local_cpu, 3),
                    "rate": event.get("rate"),
                    "sent_per_s": round(event["requests_per_s"], 1) if event.get("requests_per_s") else None,
                    "late_p90_ms": round(event["late_p90"] * 1000, 2) if event.get("late_p90") is not None else None,
                }
            )
    return levels


def measure(tree: Path, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="perf-bench-loadgen-") as tmp:
        work = Path(tmp)
        sim = SimHost(work / "sim", time_scale=30, traffic=False)
        host = OpenSshHost(work / "sshd", sim)
        config = host.config(work / "pivot.toml", work / "campaign")
        via_ssh = ["--config", str(config), "--host", "gpu", "--port", str(sim.server_port)]
        paths = {
            "direct": (["--url", f"http://127.0.0.1:{sim.server_port}"], "console"),
            "ssh": (via_ssh, "console"),
            **({"host": (via_ssh, "host")} if has_on_host(tree) else {}),
            **({"rates": (["--url", f"http://127.0.0.1:{sim.server_port}"], "rates")} if knows_rates(tree) else {}),
        }
        try:
            results = {
                name: [one_sweep(tree, target, work / "campaign", client) for _ in range(runs)] for name, (target, client) in paths.items()
            }
        finally:
            host.close()
            sim.close()
    out: dict[str, Any] = {"runs": results, "load": load()}
    for name, sweeps in results.items():
        if name == "rates":
            for rate in RATES:
                at = [lv for levels in sweeps for lv in levels if lv["rate"] == rate]
                out[f"rate_{rate:g}_sent_per_s"] = median(lv["sent_per_s"] for lv in at)
                out[f"rate_{rate:g}_late_p90_ms"] = median(lv["late_p90_ms"] for lv in at)
                out[f"rate_{rate:g}_tok_per_cpu_s"] = median(lv["tok_per_cpu_s"] for lv in at)
                out[f"rate_{rate:g}_not_offered"] = sum(lv["client_bound"] for lv in at)
            continue
        best = [max(levels, key=lambda lv: lv["tok_s"]) for levels in sweeps if levels]
        out[f"{name}_tok_s"] = median(b["tok_s"] for b in best)
        out[f"{name}_client_cpu"] = median(b["client_cpu"] for b in best)
        out[f"{name}_tok_per_cpu_s"] = median(lv["tok_per_cpu_s"] for levels in sweeps for lv in levels)
        out[f"{name}_client_bound_levels"] = sum(lv["client_bound"] for levels in sweeps for lv in levels)
        out[f"{name}_console_machine_cpu"] = median(levels[0]["console_machine_cpu"] for levels in sweeps if levels)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(measure(args.tree, args.runs), indent=1))


if __name__ == "__main__":
    main()

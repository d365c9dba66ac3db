"""Commands on the terminal: `pivot --help`, and `pivot runs`, `runs show`, `compare` on two 16,000-request runs
without tables (as a console killed mid-sweep leaves them), and `Run.finish()` turning one into tables (time and
the process's peak memory). Medians of several runs. Figures only.

    python -m bench.cli_figures [--tree PATH] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, load, median, tree_env
from bench.synthetic_runs import write_pair

# The process's own peak (VmHWM: a fork's inherited high-water mark, which ru_maxrss keeps, is not in it).
PEAK = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024"
FINISH = f"""
import sys, time
from pathlib import Path
from console.sweep.runs.store import open_run
run = open_run(Path(sys.argv[1]), sys.argv[2])
before = {PEAK}
t0 = time.perf_counter()
run.finish()
print(time.perf_counter() - t0, before, {PEAK})
"""


def timed(argv: list[str], tree: Path) -> float:
    """Wall seconds of one command."""
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=tree_env(tree), cwd="/", check=True)
    return time.perf_counter() - t0


def measure(tree: Path, runs: int) -> dict[str, Any]:
    pivot = [sys.executable, "-m", "console"]
    with tempfile.TemporaryDirectory(prefix="perf-bench-cli-") as tmp:
        work = Path(tmp)
        source = work / "source"
        a, b = write_pair(source)
        config = work / "pivot.toml"
        config.write_text(f'campaign_dir = "{work / "campaign"}"\n')
        out: dict[str, Any] = {"load_start": load()}
        for name, argv in (
            ("help", [*pivot, "--help"]),
            ("runs", [*pivot, "--config", str(config), "runs"]),
            ("runs_show", [*pivot, "--config", str(config), "runs", "show", a]),
            ("compare", [*pivot, "--config", str(config), "compare", a, b]),
        ):
            times = []
            for _ in range(runs):
                shutil.rmtree(work / "campaign", ignore_errors=True)
                shutil.copytree(source, work / "campaign")  # no tables: every command reads the events
                times.append(timed(argv, tree))
            out[f"{name}_s"] = median(times)
        finish = []
        for _ in range(runs):
            shutil.rmtree(work / "campaign", ignore_errors=True)
            shutil.copytree(source, work / "campaign")
            done = subprocess.run(
                [sys.executable, "-c", FINISH, str(work / "campaign"), a],
                capture_output=True,
                text=True,
                env=tree_env(tree),
                cwd="/",
                check=True,
            )
            finish.append([float(x) for x in done.stdout.split()])
        out["finish_s"] = median(f[0] for f in finish)
        out["finish_before_mib"] = median(f[1] for f in finish)  # the process, its imports and the run opened
        out["finish_peak_mib"] = median(f[2] for f in finish)
        out["events_mib"] = round((source / "runs" / a / "events.jsonl").stat().st_size / 2**20, 1)
        out["load_end"] = load()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.tree, args.runs), indent=1))


if __name__ == "__main__":
    main()

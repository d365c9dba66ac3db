"""The load generator against a server that is never the limit (issue 40): bench/fast_server.py in one process per
core, and bench/bare_reader.py beside it as the floor, in the same run.

- at the margin: `pivot sweep --url` (the whole command, its load generator process included) and the bare reader,
  each at C=64 with 1,000 and with 10,000 requests of 64 one-token chunks; the tokens the extra 9,000 requests cost
  per CPU-second (the per-token cost, start-up left out) of each, their ratio, and the sweep's fixed cost (the CPU of
  the 1,000-request command less its tokens at the marginal cost);
- C=256 with 64-token answers: whether pivot's level says "client-bound", and whether the floor itself was (its
  process at 90 % of a core or more, pivot's own rule);
- workers: the same C=256 level (4,000 requests) by 1, 2, 4 and 8 load generator processes (`--workers`), as many as
  the machine has cores: tok/s reached, against one.

The server shares the machine's cores with the client: on a 2-core machine the tok/s reached is bounded by both, and
only the CPU figures say what the client costs.

    python -m bench.loadgen_ceiling [--tree PATH] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, free_port, load, median, tree_env

C, TOKENS, FEW, MANY = 64, 64, 1000, 10_000  # the margin is 9,000 requests: a command's fixed cost varies by a tenth
WIDE, WIDE_REQUESTS = 256, 4000


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def start_server(port: int) -> subprocess.Popen[str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.fast_server", "--port", str(port), "--processes", str(os.cpu_count() or 1)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert server.stdout is not None
    server.stdout.readline()  # "serving on ...": every process listens
    return server


def floor(url: str, c: int, requests: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.bare_reader", "--url", url, "--c", str(c), "--requests", str(requests), "--max-tokens", str(TOKENS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=True,
    )
    read = json.loads(done.stdout)
    return {"tokens": read["events"], "cpu_s": read["cpu_s"], "wall_s": read["wall_s"]}


def pivot_sweep(tree: Path, url: str, home: Path, c: int, requests: int, workers: int = 1) -> dict[str, Any]:
    """The whole `pivot sweep --url` command: its CPU and its level's event."""
    env = {**tree_env(tree), "HOME": str(home), "XDG_DATA_HOME": str(home / "share"), "XDG_CONFIG_HOME": str(home / "config")}
    argv = [sys.executable, "-m", "console", "sweep", "--url", url, "--levels", str(c), "--requests", str(requests)]
    argv += ["--max-tokens", str(TOKENS), "--warmup", "0", "--no-drift-check", "--workers", str(workers)]
    cpu0, t0 = _children_cpu(), time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=home, env=env, timeout=600)
    cpu, wall = _children_cpu() - cpu0, time.monotonic() - t0
    saved = next((line.removeprefix("saved: ") for line in done.stdout.splitlines() if line.startswith("saved: ")), None)
    if saved is None:
        raise RuntimeError(f"pivot sweep saved no run: {done.returncode}: {done.stderr[-400:]}")
    events = [json.loads(line) for line in (home / saved / "events.jsonl").read_text().splitlines()]
    level = next(e for e in events if e["type"] == "level_done")
    if done.returncode != 0 or level["errors"]:
        raise RuntimeError(f"pivot sweep: {done.returncode}, {level['errors']} errors: {done.stderr[-400:]}")
    return {"tokens": level["output_tokens"], "cpu_s": cpu, "wall_s": wall, "level": level}


def _margin(few: dict[str, Any], many: dict[str, Any]) -> float:
    return (many["tokens"] - few["tokens"]) / (many["cpu_s"] - few["cpu_s"])


def measure(tree: Path, runs: int) -> dict[str, Any]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(port)
    out: dict[str, Any] = {"load_start": load(), "runs": []}
    try:
        with tempfile.TemporaryDirectory(prefix="perf-bench-ceiling-") as tmp:
            home = Path(tmp)
            floor(url, C, 200)  # a first pass: the server's answers made, the page cache warm
            for _ in range(runs):
                f = {n: floor(url, C, n) for n in (FEW, MANY)}
                p = {n: pivot_sweep(tree, url, home, C, n) for n in (FEW, MANY)}
                floor_margin, pivot_margin = _margin(f[FEW], f[MANY]), _margin(p[FEW], p[MANY])
                out["runs"].append(
                    {
                        "floor_tok_per_cpu_s": round(floor_margin),
                        "pivot_tok_per_cpu_s": round(pivot_margin),
                        "ratio": round(pivot_margin / floor_margin, 3),
                        "fixed_cpu_s": round(p[FEW]["cpu_s"] - p[FEW]["tokens"] / pivot_margin, 3),
                        "command_cpu_s": round(p[FEW]["cpu_s"], 3),
                        "load": load(),
                    }
                )
            wide_floor = floor(url, WIDE, WIDE_REQUESTS)
            out["floor_wide_cpu_share"] = round(wide_floor["cpu_s"] / wide_floor["wall_s"], 3)
            out["floor_wide_tok_s"] = round(wide_floor["tokens"] / wide_floor["wall_s"])
            workers: dict[int, dict[str, Any]] = {}
            for n in (w for w in (1, 2, 4, 8) if w <= (os.cpu_count() or 1)):
                level = pivot_sweep(tree, url, home, WIDE, WIDE_REQUESTS, n)["level"]
                workers[n] = {"tok_s": round(level["total_tok_s"]), "client_cpu": level["client_cpu"]}
                workers[n]["client_bound"] = level.get("client_bound")
            out["workers"] = workers
            out["load"] = load()
    finally:
        server.terminate()
        server.wait(timeout=30)
    for key in ("floor_tok_per_cpu_s", "pivot_tok_per_cpu_s", "ratio", "fixed_cpu_s", "command_cpu_s"):
        out[key] = median(r[key] for r in out["runs"])
    one = out["workers"][1]
    out["wide_client_bound"] = one["client_bound"] or "no"
    out["floor_wide_client_bound"] = "yes" if out["floor_wide_cpu_share"] >= 0.9 else "no"
    out["one_worker_tok_s"] = one["tok_s"]
    for n, figures in out["workers"].items():
        out[f"workers_{n}_over_one"] = round(figures["tok_s"] / one["tok_s"], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(measure(args.tree, args.runs), indent=1))


if __name__ == "__main__":
    main()

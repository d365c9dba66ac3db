"""Can the simulated server keep up with a real sweep level on this machine?

Starts the simulated SGLang server (baseline and EAGLE-3), drives C concurrent
streaming requests at it from this process with httpx, and reports the total
output tok/s the client saw against what the calibrated model predicts, plus
the server's CPU use. If the server process cannot keep up, measured falls
below predicted: that gap is the number to watch.

    python -m bench.sim_throughput [--concurrency 250] [--max-tokens 64] [--time-scale 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from console.sim import state
from console.sim.calibration import DEFAULT
from console.sim.engine import BatchScheduler, StaticDrafting, simulate_level
from console.sim.launch_server import READY_LINE

SPEC = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "{draft}", "--speculative-num-steps", "3"]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def level(url: str, concurrency: int, max_tokens: int) -> tuple[int, float]:
    body = {
        "prompt": "benchmark " * 64,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def one() -> int:
            tokens = 0
            async with client.stream("POST", "/v1/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: {"):
                        usage = json.loads(line[6:]).get("usage")
                        if usage:
                            tokens = usage["completion_tokens"]
            return tokens

        t0 = time.monotonic()
        counts = await asyncio.gather(*(one() for _ in range(concurrency)))
        return sum(counts), time.monotonic() - t0


def run(name: str, flags: list[str], args: argparse.Namespace, root: Path) -> None:
    port = 31000 + os.getpid() % 1000
    env = {**os.environ, state.ENV: str(root / "sim"), "PIVOT_SIM_TIME_SCALE": str(args.time_scale)}
    log = open(root / f"{name}.log", "wb")  # noqa: SIM115 - the server writes it until it ends
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "console.sim.launch_server",
            "--model-path",
            str(root / "model"),
            "--port",
            str(port),
            "--tp-size",
            "8",
            *[f.format(draft=root / "draft") for f in flags],
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        while READY_LINE not in (root / f"{name}.log").read_text():
            assert proc.poll() is None, (root / f"{name}.log").read_text()
            time.sleep(0.1)
        cpu0 = cpu_seconds(proc.pid)
        tokens, wall = asyncio.run(level(f"http://127.0.0.1:{port}", args.concurrency, args.max_tokens))
        cpu = cpu_seconds(proc.pid) - cpu0
        spec = StaticDrafting(3) if flags else None
        predicted = (
            simulate_level(
                BatchScheduler(DEFAULT, spec=spec), args.concurrency, args.concurrency, prompt_tokens=160, max_tokens=args.max_tokens
            )
            * args.time_scale
        )
        print(
            f"{name:9s} C={args.concurrency:<4d} tokens={tokens:<7d} wall={wall:6.1f} s  "
            f"measured={tokens / wall:7.1f} tok/s  predicted={predicted:7.1f} tok/s  "
            f"({100 * tokens / wall / predicted:5.1f} %)  server CPU {100 * cpu / wall:5.1f} % of one core"
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=250)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--time-scale", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pivot-bench-") as tmp:
        root = Path(tmp)
        state.init_home(root / "sim", state.GpuSpec())
        (root / "model").mkdir()
        (root / "draft").mkdir()
        run("baseline", [], args, root)
        run("eagle3", SPEC, args, root)


if __name__ == "__main__":
    main()

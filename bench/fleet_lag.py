"""The fleet screen's event loop with N hosts followed at once (issue 12): `pivot demo --serve --hosts N` (no server,
so that only telemetry and the server probes run), `pivot --fleet`'s app under Textual's Pilot, and a 50 ms sleep
on its loop timed for how late it wakes, once every host sends samples at 1 s; then `pivot gpus --all`'s wall time.

The simulated hosts run on this machine: at 64 their agents and fake nvidia-smi need several cores (about 60 ms of
CPU per nvidia-smi call, two a sample). `--nice 19` runs them (and all they start) at the lowest priority, standing
in for hosts of their own: the app and the bare process beside it come first, and the samples the app received in
the window are counted, since starved hosts send fewer than one a second.

    python -m bench.fleet_lag [--hosts 1,4,16] [--seconds 20] [--nice 19]
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

from bench.common import percentile

TICK_S = 0.05
# A bare python process beside it, timing the same sleep over the same window: what the machine's load alone does
BARE = """import json, sys, time
lags, end = [], time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    before = time.monotonic(); time.sleep(0.05); lags.append((time.monotonic() - before - 0.05) * 1000)
lags.sort(); print(json.dumps({"bare_lag_p50_ms": lags[len(lags) // 2], "bare_lag_p99_ms": lags[int(len(lags) * 0.99)]}))
"""


async def measure(config_path: str, seconds: float) -> dict[str, float | None]:
    from console import config
    from console.ui.fleet_app import FleetApp

    app = FleetApp(config.load(config_path))
    async with app.run_test(size=(160, 48)):
        received = SampleCount(app.fleet._latest)  # the samples that reach the app, in the window below
        app.fleet._latest = received
        deadline = time.monotonic() + 120
        while not all(v.gpus is not None for v in app.fleet.views()):
            assert time.monotonic() < deadline, "not every host sent a sample"
            await asyncio.sleep(0.2)
        bare = await asyncio.create_subprocess_exec(sys.executable, "-c", BARE, str(seconds), stdout=subprocess.PIPE)
        loop, lags, cpu0 = asyncio.get_running_loop(), [], time.process_time()
        received.count = 0
        end = loop.time() + seconds
        while loop.time() < end:
            before = loop.time()
            await asyncio.sleep(TICK_S)
            lags.append((loop.time() - before - TICK_S) * 1000)
        cpu = 100 * (time.process_time() - cpu0) / seconds
        beside = json.loads((await bare.communicate())[0])
    return {
        "lag_p50_ms": percentile(lags, 50),
        "lag_p99_ms": percentile(lags, 99),
        "lag_max_ms": max(lags),
        **beside,
        "cpu_pct": round(cpu, 1),
        "samples_per_s": round(received.count / seconds, 1),
        "load": round(os.getloadavg()[0], 2),
    }


class SampleCount(dict):  # type: ignore[type-arg]
    """The fleet's last word per host, counting each sample as it arrives."""

    count = 0

    def __setitem__(self, key: object, value: object) -> None:
        from console.gpu.samples import Sample

        self.count += isinstance(value, Sample)
        super().__setitem__(key, value)


def gpus_all_s(config: str) -> float | None:
    """`pivot gpus --all`: every host looked at once, as a new process would."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "console", "--config", config, "gpus", "--all"], capture_output=True, timeout=600)
    return round(time.monotonic() - started, 2) if done.returncode == 0 else None


def one(hosts: int, seconds: float, nice: int) -> dict[str, float | int | None]:
    """`pivot demo --serve --hosts N` in its own process, the fleet app on it here."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "console",
                "demo",
                "--serve",
                "--hosts",
                str(hosts),
                "--dir",
                str(Path(tmp) / "fleet"),
                "--server",
                "none",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            preexec_fn=(lambda: os.nice(nice)) if nice else None,
        )
        try:
            assert proc.stdout is not None
            config = next(line for line in (proc.stdout.readline() for _ in range(2)) if line.startswith("config: "))
            config = config.removeprefix("config: ").strip()
            return {"hosts": hosts, "nice": nice, **asyncio.run(measure(config, seconds)), "gpus_all_s": gpus_all_s(config)}
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.fleet_lag")
    parser.add_argument("--hosts", default="1,4,16")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--nice", type=int, default=0, help="the simulated hosts' niceness (19: the lowest priority)")
    args = parser.parse_args()
    for n in (int(h) for h in args.hosts.split(",")):
        print(json.dumps(one(n, args.seconds, args.nice)), flush=True)


if __name__ == "__main__":
    main()

"""Soak (issue 13, item 20): the real console watching 8 simulated GPUs at 0.25 s while one C=250 level runs against
the simulated server for ten minutes. Measures the console's and the load generator's memory (after a warm-up, every
minute, at the end), the console's event-loop lag, how long a key takes to change the screen, and the console's CPU.
Numbers, never pass/fail.

    python -m bench.soak [--minutes 10] [--time-scale 5] [--json soak.json]

The host is `pivot demo --serve` in its own process, as a user starts it (its background traffic included); the
console is PivotApp under Textual's Pilot in this process, so this process's memory is the console's.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from bench.common import status_mib
from console import config
from console.server.lifecycle import ServerState
from console.session import Session
from console.settings import SweepSettings
from console.sweep.model import LevelDone, Request, Shown
from console.sweep.sweeps import SweepHandle
from console.ui.app import PivotApp
from console.ui.widgets.host_status import HostStatus
from console.ui.widgets.sweep.pane import SweepPane

WARMUP_S = 30.0
SAMPLE_S = 60.0
KEY_EVERY_S = 30.0
LAG_TICK_S = 0.1
# The same 0.1 s tick in a bare process beside the console: on a shared machine, the lag that is the machine's.
CONTROL = "import time\nwhile True:\n    t = time.monotonic(); time.sleep(0.1)\n    print(time.monotonic() - t - 0.1, flush=True)"


def cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_host(root: Path, time_scale: float, server: str) -> tuple[subprocess.Popen[str], Path]:
    """`pivot demo --serve` as a user runs it; its `config: PATH` line says where the console's pivot.toml is."""
    log = open(root / "host.log", "w")  # noqa: SIM115 - the host writes it until it ends
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "console",
            "demo",
            "--serve",
            "--dir",
            str(root / "host"),
            "--time-scale",
            str(time_scale),
            "--server",
            server,
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        if line.startswith("config: "):
            return proc, Path(line.removeprefix("config: ").strip())
    raise SystemExit(f"the simulated host did not start; see {root / 'host.log'}")


def stop_host(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)  # the host ends its server and the processes it started
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def watch_lag(lags: list[float]) -> None:
    """How late the console's own loop wakes from a 0.1 s sleep: a late loop is a console that answers late."""
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(LAG_TICK_S)
        lags.append(loop.time() - before - LAG_TICK_S)


async def until(check: Callable[[], bool], timeout: float, what: str, step: float = 0.005) -> float:
    """Seconds until check() holds (polled on the console's loop); SystemExit naming `what` past the timeout."""
    t0 = time.perf_counter()
    while not check():
        if time.perf_counter() - t0 > timeout:
            raise SystemExit(f"soak: {what} did not happen within {timeout:g} s")
        await asyncio.sleep(step)
    return time.perf_counter() - t0


async def keypress(pilot: Pilot[None]) -> float:
    """`z` pressed as the operator does; seconds until the app's zoom flipped (the screen's state changed)."""
    app = pilot.app
    before = app.zoomed  # type: ignore[attr-defined]  # PivotApp's
    press = asyncio.create_task(pilot.press("z"))  # watched beside it: press() returns only once the screen is idle
    took = await until(lambda: app.zoomed is not before, 60, "the zoom after z")  # type: ignore[attr-defined]
    await press
    return took


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


def start_control(out: Path) -> subprocess.Popen[bytes]:
    with open(out, "w") as f:  # started once, before the measured window
        return subprocess.Popen([sys.executable, "-c", CONTROL], stdout=f)


def lag_figures(lags: list[float]) -> dict[str, float]:
    return {
        "n": len(lags),
        "p50": round(pct(lags, 50) * 1000, 1),
        "p99": round(pct(lags, 99) * 1000, 1),
        "max": round(max(lags, default=float("nan")) * 1000, 1),
    }


async def soak(config_path: Path, args: argparse.Namespace, host_pid: int) -> dict[str, Any]:
    cfg = dataclasses.replace(config.load(config_path), telemetry_interval_s=0.25)
    session = Session(cfg, "demo", via="console")
    app = PivotApp(session)
    figures: dict[str, Any] = {
        "minutes": args.minutes,
        "time_scale": args.time_scale,
        "server": args.server,
        "nproc": os.cpu_count(),
        "samples": [],
        "keys_s": [],
        "notes": [],
    }
    async with app.run_test(size=(200, 50)) as pilot:
        header = app.query_one(HostStatus)
        ready = await until(
            lambda: header.server_status is not None and header.server_status.state == ServerState.READY, 300, "the demo server ready"
        )
        figures["server_ready_s"] = round(ready, 1)

        handles: list[SweepHandle] = []
        session.sweeps.add_listener(handles.append)
        counts = {"requests": 0, "failed": 0}
        ended = asyncio.Event()

        def on_event(event: Shown) -> None:
            if isinstance(event, Request):
                counts["requests"] += 1
                counts["failed"] += getattr(event, "error", None) is not None
            elif isinstance(event, LevelDone):  # the load generator's own word on whether it kept up
                figures["level"] = {
                    k: getattr(event, k)
                    for k in ("total_tok_s", "client_cpu", "loop_lag_p50", "loop_lag_p99", "client_bound", "lagging", "failed", "errors")
                }

        # One level of C=250 for the whole soak, the demo's other [sweep] settings kept (max_tokens 64). The
        # demo's background traffic keeps the server busy, so the pane would ask "Sweep a busy server?": the
        # operator's "Sweep anyway" is allow_busy.
        duration = args.minutes * 60 + WARMUP_S
        settings = SweepSettings.from_dict({**cfg.sweep.to_dict(), "levels": [250], "duration_s": duration})
        app.query_one(SweepPane).start_sweep(settings, allow_busy=True)
        try:
            await until(lambda: bool(handles) and handles[0].process.proc is not None, 120, "the load generator's start")
        except SystemExit as e:  # the pane said why in a notification
            said = "; ".join(n.message for n in app._notifications)
            raise SystemExit(f"{e} ({said or 'nothing said'})") from None
        handle = handles[0]
        handle.subscribe(on_event, ended=lambda _: ended.set())
        assert handle.process.proc is not None
        loadgen = handle.process.proc.pid
        started = time.monotonic()
        figures["run"] = handle.run.name

        lags: list[float] = []
        lag_task = asyncio.create_task(watch_lag(lags))
        await asyncio.sleep(WARMUP_S)
        lags.clear()
        control_out = config_path.parent / "control-lag.txt"
        control = start_control(control_out)
        t0, cpu0, lg_cpu0, load0 = time.monotonic(), time.process_time(), cpu_s(loadgen), os.getloadavg()

        def sample(label: str) -> None:
            row = {
                "label": label,
                "t_s": round(time.monotonic() - started),
                "console_rss_mib": status_mib("self"),
                "loadgen_rss_mib": status_mib(loadgen),
                "host_rss_mib": status_mib(host_pid),
                "requests": counts["requests"],
                "failed": counts["failed"],
                "load_1m": round(os.getloadavg()[0], 2),
            }
            figures["samples"].append(row)
            print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)

        sample("start")
        next_sample, next_key = t0 + SAMPLE_S, t0
        end = t0 + args.minutes * 60 - 5  # the last sample while the level still runs
        while time.monotonic() < end and not ended.is_set():
            now = time.monotonic()
            if now >= next_key:
                figures["keys_s"] += [await keypress(pilot), await keypress(pilot)]  # zoom, and back
                next_key += KEY_EVERY_S
            if now >= next_sample:
                sample(f"{round((now - t0) / 60)} min")
                next_sample += SAMPLE_S
            await asyncio.sleep(min(1.0, max(0.0, min(next_key, next_sample, end) - time.monotonic())))
        if ended.is_set():
            figures["notes"].append(f"the sweep ended early: {handle.end} {handle.reason or ''}")
        sample("end")
        control.terminate()
        control.wait()
        wall = time.monotonic() - t0
        figures["console_cpu"] = round((time.process_time() - cpu0) / wall, 3)
        lg_cpu1 = cpu_s(loadgen)
        figures["loadgen_cpu"] = round((lg_cpu1 - lg_cpu0) / wall, 3) if lg_cpu0 is not None and lg_cpu1 is not None else None
        figures["load_avg_start"], figures["load_avg_end"] = [round(x, 2) for x in load0], [round(x, 2) for x in os.getloadavg()]
        figures["window_s"] = round(wall)
        figures["requests_per_s"] = round((figures["samples"][-1]["requests"] - figures["samples"][0]["requests"]) / wall, 1)
        figures["lag_ms"] = lag_figures(lags)
        figures["control_lag_ms"] = lag_figures([float(x) for x in control_out.read_text().split()])

        # The level's end: the run's files written (in a thread) and the pane showing the finished run.
        lags.clear()
        finish = await until(ended.is_set, 600, "the sweep's end", step=0.05)
        await pilot.pause()
        figures["after_end"] = {
            "wait_s": round(finish, 1),
            "end": handle.end,
            "reason": handle.reason,
            "console_rss_mib": status_mib("self"),
            "console_peak_rss_mib": status_mib("self", "VmHWM"),
            "lag_max_ms": round(max(lags, default=float("nan")) * 1000, 1),
        }
        figures["after_end"]["keys_s"] = [await keypress(pilot), await keypress(pilot)]
        lag_task.cancel()
        figures["keys_ms"] = {
            "n": len(figures["keys_s"]),
            "median": round(statistics.median(figures["keys_s"]) * 1000, 1),
            "max": round(max(figures["keys_s"]) * 1000, 1),
        }
    return figures


def report(f: dict[str, Any]) -> None:
    first, last = f["samples"][0], f["samples"][-1]
    minutes = max(1e-9, (last["t_s"] - first["t_s"]) / 60)
    print(
        f"\nsoak: {f['window_s']} s measured after {WARMUP_S:g} s of warm-up, C=250, time scale {f['time_scale']:g}, "
        f"{f['nproc']} CPUs, load {f['load_avg_start'][0]} → {f['load_avg_end'][0]}"
    )
    print(f"{'':16s}{'start':>9s}{'end':>9s}{'MiB/min':>9s}")
    for key, name in (("console_rss_mib", "console RSS"), ("loadgen_rss_mib", "loadgen RSS"), ("host_rss_mib", "host RSS")):
        a, b = first[key], last[key]
        if a is not None and b is not None:
            print(f"{name:16s}{a:9.1f}{b:9.1f}{(b - a) / minutes:9.2f}")
    lag, keys, after = f["lag_ms"], f["keys_ms"], f["after_end"]
    print(f"loop lag (0.1 s tick, {lag['n']} ticks): p50 {lag['p50']} ms, p99 {lag['p99']} ms, max {lag['max']} ms")
    control = f["control_lag_ms"]
    print(f"the same tick in a bare process beside it: p50 {control['p50']} ms, p99 {control['p99']} ms, max {control['max']} ms")
    print(f"z answered ({keys['n']} presses): median {keys['median']} ms, max {keys['max']} ms")
    print(
        f"console CPU {f['console_cpu']:.0%} of a core, load generator {f['loadgen_cpu']:.0%}; "
        f"{f['requests_per_s']} requests/s, {last['requests']} requests, {last['failed']} failed"
    )
    print(
        f"after the level ended ({after['end']}, {after['wait_s']} s later): console RSS {after['console_rss_mib']} MiB "
        f"(peak {after['console_peak_rss_mib']} MiB), loop lag max {after['lag_max_ms']} ms while the run was written"
    )
    if level := f.get("level"):
        print("the level, as the load generator saw it: " + ", ".join(f"{k} {v}" for k, v in level.items() if v is not None))
    for note in f["notes"]:
        print(f"note: {note}")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="measured time, after a 30 s warm-up")
    # 5: on 2 CPUs the simulated server's C=250 pace (about 27 requests/s) is what the machine can carry; at 20 the
    # machine, not the server, set the pace (28 requests/s). Raise it on a bigger machine.
    parser.add_argument("--time-scale", type=float, default=5.0, help="the simulated server runs this many times faster")
    parser.add_argument("--server", choices=["eagle3", "baseline"], default="eagle3")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the figures here too")
    parser.add_argument("--hog", type=int, default=0, metavar="N", help="N processes spinning on a CPU beside (a busy jump host)")
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hog)]
    try:
        with tempfile.TemporaryDirectory(prefix="pivot-soak-") as tmp:
            host, config_path = start_host(Path(tmp), args.time_scale, args.server)
            try:
                figures = asyncio.run(soak(config_path, args, host.pid))
            finally:
                stop_host(host)
    finally:
        for hog in hogs:  # ours, by PID
            hog.kill()
            hog.wait()
    figures["hogs"] = args.hog
    report(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The console as an operator meets it, in tmux, on an OpenSSH host in front of the simulated 8-GPU host: first full
paint, idle CPU, SSH sessions opened while idle, event-loop lateness (idle, under a C=250 sweep started from the
Sweep pane, and right after it ends), and key -> screen idle and under the sweep (Down/Up in the process table, and
`z`, which lays the whole screen out again). Figures, never a verdict.

    python -m bench.console_figures [--tree PATH] [--runs 3] [--idle-s 15]
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, OpenSshHost, SimHost, cpu_seconds, load, median, percentile, tree_env

GPU_ROW = re.compile(r"│\s*\d+ \S+\s+\d+C\s+\d+W.*\d+%")  # a GPU line with its numbers
SWEEP = 'levels = [250]\nmax_tokens = 64\nrequests = "c"\nmin_requests = 16\n'
SETTLED_AFTER_S = 70.0  # from the console's start: past the first minute of the server's processes and uptime
SETTLED_WINDOW_S = 30.0
PAINT_POLL_S = 0.02  # a tmux capture every 5 ms is a process every 5 ms, on the cores the console starts on


def painted_rows(text: str) -> bool:
    """Every GPU's line, with its numbers: the first full paint."""
    return sum(bool(GPU_ROW.search(line)) for line in text.splitlines()) >= 8


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True).stdout


def screen(session: str, colours: bool = True) -> str:
    """The pane's text; with its colours, so that a cursor that moves is a change."""
    return tmux("capture-pane", "-p", *(["-e"] if colours else []), "-t", session)


def wait_screen(session: str, predicate, timeout: float, colours: bool = True, every: float = 0.005) -> float | None:  # type: ignore[no-untyped-def]
    """Seconds until the screen satisfies predicate (polled `every` seconds), None past the timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate(screen(session, colours)):
            return time.monotonic() - t0
        time.sleep(every)
    return None


def key_latencies(session: str, presses: int, keys: tuple[str, ...]) -> list[float]:
    """The time from a key to the screen's change, each press; keys taken in turn (`z` toggles the zoom, which lays
    out the whole screen again; Down and Up move the process table's cursor, as most keys change a line or two)."""
    out = []
    for n in range(presses):
        before = screen(session)
        t0 = time.monotonic()
        tmux("send-keys", "-t", session, keys[n % len(keys)])
        waited = wait_screen(session, lambda s, before=before: s != before, 5.0)
        if waited is not None:
            out.append((time.monotonic() - t0) * 1000)
        time.sleep(0.3)
    return out


def lags(path: Path, t0: float, t1: float) -> list[float]:
    values = []
    for line in path.read_text().splitlines():
        t, lag = line.split()
        if t0 <= float(t) <= t1:
            values.append(float(lag))
    return values


def one_console(tree: Path, host: OpenSshHost, work: Path, n: int, idle_s: float) -> dict[str, Any]:
    campaign = work / f"campaign{n}"
    config = host.config(work / f"pivot{n}.toml", campaign, SWEEP)
    lag_file = work / f"lag{n}.txt"
    session = f"perf-bench-{n}"
    env = tree_env(tree)
    probe = ROOT / "bench" / "tui_probe.py"
    command = shlex.join(["env", f"PYTHONPATH={env['PYTHONPATH']}", sys.executable, str(probe), str(lag_file), "--config", str(config)])
    command = f"exec {command}"
    tmux("kill-session", "-t", session)
    t0 = time.monotonic()
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48", command)
    result: dict[str, Any] = {"load_start": load()}
    try:
        pid = int(tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip())
        painted = wait_screen(session, painted_rows, 60, False, PAINT_POLL_S)
        result["first_paint_s"] = None if painted is None else time.monotonic() - t0
        time.sleep(3.0)  # the server's state, the log, the model name: the console settles
        sessions0, cpu0, w0 = host.sessions(), cpu_seconds(pid), time.time()
        time.sleep(idle_s)
        w1 = time.time()
        result["idle_cpu_pct"] = 100 * (cpu_seconds(pid) - cpu0) / (w1 - w0)
        result["ssh_sessions_per_30s"] = (host.sessions() - sessions0) * 30 / (w1 - w0)
        if n == 0:  # past the first minute, once: what the console costs for as long as it is left open
            time.sleep(max(0.0, t0 + SETTLED_AFTER_S - time.monotonic()))
            cpu1, s0 = cpu_seconds(pid), time.time()
            time.sleep(SETTLED_WINDOW_S)
            result["idle_settled_cpu_pct"] = 100 * (cpu_seconds(pid) - cpu1) / (time.time() - s0)
        idle = lags(lag_file, w0, w1)
        result["lag_idle_p99_ms"], result["lag_idle_max_ms"] = percentile(idle, 99), max(idle, default=None)
        result["zoom_idle_ms"] = key_latencies(session, 6, ("z",))
        result["key_idle_ms"] = key_latencies(session, 6, ("Down", "Up"))
        result["load_idle"] = load()
        # a C=250 sweep from the Sweep pane: 4, n (the form, filled from [sweep]), Enter
        tmux("send-keys", "-t", session, "4")
        time.sleep(0.5)
        tmux("send-keys", "-t", session, "n")
        time.sleep(1.0)
        tmux("send-keys", "-t", session, "Enter")
        # the demo's own traffic keeps the server busy: the console asks before sweeping it, and the bench says yes
        if wait_screen(session, lambda s: "Sweep a busy server?" in s, 15.0, colours=False) is not None:
            tmux("send-keys", "-t", session, "y")
        runs = campaign / "runs"
        deadline = time.monotonic() + 60
        events: Path | None = None
        while time.monotonic() < deadline and events is None:
            found = sorted(runs.glob("*/events.jsonl")) if runs.exists() else []
            if found and "level_started" in found[-1].read_text():
                events = found[-1]
            time.sleep(0.2)
        if events is None:
            result["sweep"] = "did not start"
            return result
        s0 = time.time()
        time.sleep(2.0)
        result["zoom_sweep_ms"] = key_latencies(session, 6, ("z",))
        tmux("send-keys", "-t", session, "1")  # back to the process table
        time.sleep(0.3)
        result["key_sweep_ms"] = key_latencies(session, 6, ("Down", "Up"))
        deadline = time.monotonic() + 180
        done_t = None
        while time.monotonic() < deadline and done_t is None:
            for line in events.read_text().splitlines():
                if '"sweep_done"' in line:
                    done_t = json.loads(line)["t"]
            time.sleep(0.2)
        result["load_sweep"] = load()
        if done_t is None:
            result["sweep"] = "did not end"
            return result
        meta = events.parent / "run.toml"
        while time.monotonic() < deadline and "state =" not in meta.read_text():
            time.sleep(0.2)
        time.sleep(4.0)  # the pane draws the finished run and its comparison
        under = lags(lag_file, s0, done_t)
        result["lag_sweep_p99_ms"], result["lag_sweep_max_ms"] = percentile(under, 99), max(under, default=None)
        result["stall_after_sweep_ms"] = max(lags(lag_file, done_t - 0.5, time.time()), default=None)
        level = next((json.loads(line) for line in events.read_text().splitlines() if '"level_done"' in line), {})
        result["sweep_tok_s"], result["sweep_client_cpu"] = level.get("total_tok_s"), level.get("client_cpu")
        return result
    finally:
        tmux("send-keys", "-t", session, "q")
        time.sleep(1.0)
        tmux("kill-session", "-t", session)


def one_paint(tree: Path, config: Path, session: str) -> float | None:
    """Seconds from a new console's start to its first full paint; the console quit, and its end waited for."""
    env = shlex.join(["env", "-u", "PYTHONDONTWRITEBYTECODE", f"PYTHONPATH={tree_env(tree)['PYTHONPATH']}"])
    command = f"exec {env} {sys.executable} -m console --config {shlex.quote(str(config))}"
    t0 = time.monotonic()
    # started in the tree: `-m` puts the working directory first on the path, ahead of PYTHONPATH
    tmux("new-session", "-d", "-s", session, "-c", str(tree), "-x", "160", "-y", "48", command)
    painted = wait_screen(session, painted_rows, 60, False, PAINT_POLL_S)
    paint = None if painted is None else round(time.monotonic() - t0, 3)
    tmux("send-keys", "-t", session, "q")
    deadline = time.monotonic() + 15  # the next console starts on cores this one no longer uses
    while time.monotonic() < deadline and subprocess.run(["tmux", "has-session", "-t", session], capture_output=True).returncode == 0:
        time.sleep(0.1)
    tmux("kill-session", "-t", session)
    return paint


def first_paints(tree: Path, runs: int) -> dict[str, Any]:
    """The first full paint alone, `runs` times (each a new console, as an operator starts one), after the first
    contact with the host, measured apart (that console uploads the telemetry agent); and what the console imports
    before it: `python -X importtime` of its app module, the cumulative milliseconds of the largest."""
    tree = tree.resolve()
    with tempfile.TemporaryDirectory(prefix="perf-bench-paint-") as tmp:
        work = Path(tmp)
        sim = SimHost(work / "sim")
        host = OpenSshHost(work / "sshd", sim)
        try:
            consoles = [host.config(work / f"pivot{n}.toml", work / f"campaign{n}", SWEEP) for n in range(runs + 1)]
            first_contact = one_paint(tree, consoles[0], "perf-bench-paint-0")
            paints = [one_paint(tree, config, f"perf-bench-paint-{n}") for n, config in enumerate(consoles[1:], 1)]
        finally:
            host.close()
            sim.close()
    timed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import console.ui.app"], capture_output=True, text=True, env=tree_env(tree), cwd=tree
    ).stderr
    cumulative = {}
    for line in timed.splitlines():
        if line.startswith("import time:") and "|" in line and not line.endswith("package"):
            _, us, name = line.split("|")
            if name.count("  ") <= 2:  # the app's own imports and theirs, not deeper
                cumulative[name.strip()] = round(int(us) / 1000, 1)
    return {
        "paints": paints,
        "first_paint_s": median(paints),
        "first_contact_paint_s": first_contact,
        "app_import_ms": cumulative.get("console.ui.app"),
        "largest_imports_ms": dict(sorted(cumulative.items(), key=lambda kv: -kv[1])[:12]),
        "load": load(),
    }


def measure(tree: Path, runs: int, idle_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="perf-bench-console-") as tmp:
        work = Path(tmp)
        sim = SimHost(work / "sim")
        host = OpenSshHost(work / "sshd", sim)
        try:
            results = [one_console(tree, host, work, n, idle_s) for n in range(runs)]
        finally:
            host.close()
            sim.close()
    keys = lambda name: [v for r in results for v in r.get(name, [])]
    return {
        "runs": results,
        "first_paint_s": median(r.get("first_paint_s") for r in results),
        "idle_cpu_pct": median(r.get("idle_cpu_pct") for r in results),
        "idle_settled_cpu_pct": results[0].get("idle_settled_cpu_pct"),
        "ssh_sessions_per_30s": median(r.get("ssh_sessions_per_30s") for r in results),
        "lag_idle_p99_ms": median(r.get("lag_idle_p99_ms") for r in results),
        "lag_sweep_p99_ms": median(r.get("lag_sweep_p99_ms") for r in results),
        "lag_sweep_max_ms": median(r.get("lag_sweep_max_ms") for r in results),
        "stall_after_sweep_ms": median(r.get("stall_after_sweep_ms") for r in results),
        "key_idle_p50_ms": median(keys("key_idle_ms")),
        "key_sweep_p50_ms": median(keys("key_sweep_ms")),
        "zoom_idle_p50_ms": median(keys("zoom_idle_ms")),
        "zoom_sweep_p50_ms": median(keys("zoom_sweep_ms")),
        "load": median([r.get("load_idle") for r in results] + [r.get("load_sweep") for r in results]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose console is measured")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle-s", type=float, default=15.0)
    parser.add_argument("--paint-only", action="store_true", help="the first paint and the app's imports alone")
    args = parser.parse_args()
    found = first_paints(args.tree, args.runs) if args.paint_only else measure(args.tree, args.runs, args.idle_s)
    print(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()

"""`make bench`: every figure of issue 15 in one command, printed as a table (medians, and the load average while
each was measured), written to bench/results/latest.json and into bench/README.md. With --before PATH, an older
checkout is measured the same way and shown beside. Numbers only: nothing here passes or fails.

    python -m bench.run_all [--before PATH] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from bench import cli_figures, console_figures, loadgen_ceiling, loadgen_figures, loadgen_memory, loadgen_workers
from bench.common import ROOT

README = ROOT / "bench" / "README.md"
MARK_BEGIN, MARK_END = "<!-- latest table: written by make bench -->", "<!-- end of the latest table -->"

# (key in the results, what it is, goal, unit, part)
FIGURES = [
    (
        "idle_cpu_pct",
        "idle console CPU, 8 GPUs at 1 s, in its first minute (every AGE and the uptime tick)",
        "< 3 %",
        "% of a core",
        "console",
    ),
    ("idle_settled_cpu_pct", "idle console CPU, 8 GPUs at 1 s, past its first minute (issue 25)", "< 1 %", "% of a core", "console"),
    ("ssh_sessions_per_30s", "SSH sessions opened on an OpenSSH host while idle", "0", "per 30 s", "console"),
    ("lag_idle_p99_ms", "event-loop lateness idle, p99", "< 50 ms", "ms", "console"),
    ("lag_sweep_p99_ms", "event-loop lateness under a C=250 sweep, p99", "< 50 ms", "ms", "console"),
    ("lag_sweep_max_ms", "event-loop lateness under a C=250 sweep, max", "", "ms", "console"),
    ("stall_after_sweep_ms", "longest stall as the sweep ends (tables, redraw)", "off the loop", "ms", "console"),
    ("finish_s", "Run.finish() on 16,000 requests", "< 2 s", "s", "cli"),
    ("finish_peak_mib", "Run.finish() peak memory of its process", "< 150 MB", "MiB", "cli"),
    ("runs_s", "pivot runs, 2 x 16,000 requests without tables", "< 1 s", "s", "cli"),
    ("runs_show_s", "pivot runs show", "< 1 s", "s", "cli"),
    ("compare_s", "pivot compare", "< 1 s", "s", "cli"),
    ("help_s", "pivot --help", "< 0.3 s", "s", "cli"),
    ("first_paint_s", "TUI first full paint (8 GPU rows with numbers)", "< 1.5 s", "s", "console"),
    ("key_idle_p50_ms", "key -> screen in tmux (Down/Up), idle, p50", "< 100 ms", "ms", "console"),
    ("key_sweep_p50_ms", "key -> screen in tmux (Down/Up), under the sweep, p50", "< 100 ms", "ms", "console"),
    ("zoom_idle_p50_ms", "key -> screen in tmux (z: the whole screen laid out), idle, p50", "< 100 ms", "ms", "console"),
    ("zoom_sweep_p50_ms", "key -> screen in tmux (z), under the sweep, p50", "< 100 ms", "ms", "console"),
    ("direct_tok_per_cpu_s", "load generator, direct: tokens per second of its CPU (its one-core ceiling)", "2x", "tok/s", "loadgen"),
    ("direct_tok_s", "load generator, direct: tok/s reached (C=250/1000, 64 tokens)", "", "tok/s", "loadgen"),
    *(
        row
        for rate in loadgen_figures.RATES
        for row in (
            (
                f"rate_{rate:g}_sent_per_s",
                f"load generator, direct, {rate:g} req/s Poisson: requests sent a second",
                f"{rate:g}",
                "req/s",
                "loadgen",
            ),
            (f"rate_{rate:g}_late_p90_ms", f"load generator, {rate:g} req/s: sent late against its schedule, p90", "", "ms", "loadgen"),
            (f"rate_{rate:g}_tok_per_cpu_s", f"load generator, {rate:g} req/s: tokens per second of its CPU", "", "tok/s", "loadgen"),
            (
                f"rate_{rate:g}_not_offered",
                f"load generator, {rate:g} req/s: levels not offered (of the runs)",
                "0",
                "levels",
                "loadgen",
            ),
        )
    ),
    ("ssh_tok_per_cpu_s", "load generator, SSH forward: tokens per second of its CPU", "2x", "tok/s", "loadgen"),
    ("ssh_tok_s", "load generator, SSH forward: tok/s reached", "", "tok/s", "loadgen"),
    ("ssh_console_machine_cpu", "load generator, SSH forward: CPU on the console's machine", "", "cores", "loadgen"),
    ("host_tok_per_cpu_s", "load generator on the host (the default): tokens per second of its CPU", "", "tok/s", "loadgen"),
    ("host_tok_s", "load generator on the host: tok/s reached", "", "tok/s", "loadgen"),
    ("host_console_machine_cpu", "load generator on the host: CPU on the console's machine (the relay)", "", "cores", "loadgen"),
    ("requests_per_s", "load generator memory: one 120 s level at C=64, requests per second", "", "req/s", "memory"),
    ("growth_kib_per_request", "load generator memory: RSS growth per request while the level runs", "", "KiB", "memory"),
    ("growth_mib_per_hour", "load generator memory: RSS growth over an hour at that rate", "< 50 MiB", "MiB", "memory"),
    ("one_tok_s", "load generator, one process, C=250: tok/s reached (the simulated server shares the cores)", "", "tok/s", "workers"),
    ("two_over_one", "load generator, two worker processes, the same level: tok/s against one", ">= 1.8x", "x", "workers"),
    ("one_tok_per_cpu_s", "load generator, one process: tokens per second of its CPU", "", "tok/s", "workers"),
    ("a_worker_tok_per_cpu_s", "load generator, two workers: tokens per second of a worker's CPU", "", "tok/s", "workers"),
    ("two_levels_led", "two workers against one at C=16 and 48: levels where either leads (margin 2 %)", "0", "levels", "workers"),
    # issue 40: against a server that is never the limit (bench/fast_server.py), the floor in the same run
    ("floor_tok_per_cpu_s", "bare reader (the floor), C=64, 64-token answers: tokens per CPU-second at the margin", "", "tok/s", "ceiling"),
    ("pivot_tok_per_cpu_s", "pivot sweep --url, the same level: tokens per CPU-second at the margin", "", "tok/s", "ceiling"),
    ("ratio", "pivot sweep --url against the floor, at the margin", ">= 0.8x", "x", "ceiling"),
    ("fixed_cpu_s", "pivot sweep --url: the command's fixed CPU (start-up, checks, tables)", "< 1 s", "CPU-s", "ceiling"),
    ("one_worker_tok_s", "C=256, 4,000 requests, one generator process: tok/s (the server shares the cores)", "", "tok/s", "ceiling"),
    ("workers_2_over_one", "the same level by two worker processes: tok/s against one", ">= 1.8x", "x", "ceiling"),
    ("workers_4_over_one", "the same level by four worker processes (4 cores or more): tok/s against one", ">= 3.5x", "x", "ceiling"),
    ("wide_client_bound", "C=256 by one process: pivot's client-bound note", "", "", "ceiling"),
    ("floor_wide_client_bound", "C=256: the floor itself at 90 % of a core or more", "", "", "ceiling"),
    ("first_paint_s", "TUI first full paint, alone (5 new consoles, 160x48, on sshd)", "< 1 s", "s", "paint"),
    ("first_contact_paint_s", "the same, a host's first contact (the console uploads the agent)", "", "s", "paint"),
    ("app_import_ms", "what the console imports before its screen (console.ui.app, python -X importtime)", "", "ms", "paint"),
    ("two_ratio_range", "two workers against one: B/A throughput", "alike", "", "workers"),
    ("again_ratio_range", "one process against itself: B/A throughput", "", "", "workers"),
]


def measure(tree: Path, runs: int) -> dict[str, Any]:
    started = time.monotonic()
    results = {
        "console": console_figures.measure(tree, runs, 15.0),
        "loadgen": loadgen_figures.measure(tree, runs),
        "cli": cli_figures.measure(tree, max(runs, 5)),
        "memory": loadgen_memory.measure(tree, 120.0),
        "workers": loadgen_workers.measure(tree, 2) if (tree / "console/sweep/loadgen/workers.py").exists() else {},
        "ceiling": loadgen_ceiling.measure(tree, runs),
        "paint": console_figures.first_paints(tree, 5),
    }
    results["seconds"] = round(time.monotonic() - started)
    return results


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def _load(results: dict[str, Any], part: str) -> str:
    found = results[part]
    value = found.get("load", found.get("load_start"))
    return _fmt(value)


def table(after: dict[str, Any], before: dict[str, Any] | None) -> str:
    head = "| figure | goal | " + ("before (load) | " if before else "") + "now (load) | unit |"
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for key, what, goal, unit, part in FIGURES:
        now = f"{_fmt(after[part].get(key))} ({_load(after, part)})"
        was = f"{_fmt(before[part].get(key))} ({_load(before, part)}) | " if before else ""
        rows.append(f"| {what} | {goal} | {was}{now} | {unit} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="an older checkout to measure the same way")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    before = measure(args.before, args.runs) if args.before else None
    after = measure(ROOT, args.runs)
    text = table(after, before)
    stamp = time.strftime("%Y-%m-%d %H:%M")
    print(text)
    print(
        f"\n{os.cpu_count()} CPUs; load average given with each figure (1-minute, while it was measured); "
        f"{after['seconds']} s for this tree"
    )
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "latest.json").write_text(json.dumps({"at": stamp, "cpus": os.cpu_count(), "after": after, "before": before}, indent=1))
    if README.exists():
        readme = README.read_text()
        if MARK_BEGIN in readme and MARK_END in readme:
            head, rest = readme.split(MARK_BEGIN, 1)
            README.write_text(f"{head}{MARK_BEGIN}\n\n{stamp}, {os.cpu_count()} CPUs:\n\n{text}\n\n{MARK_END}{rest.split(MARK_END, 1)[1]}")


if __name__ == "__main__":
    main()

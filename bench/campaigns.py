"""Campaigns against `pivot demo --serve`, as a new user runs them: switch to the baseline, sweep, switch to
EAGLE-3, sweep, compare; repeated, optionally beside a CPU hog. For each: the recommendation, whether it
contradicts its own table, and whether every leader it names is the calibrated truth (the simulator's model in
simulated time, where a difference under 2 % counts as either way). Numbers for the closing note; no verdict on time.

    python -m bench.campaigns [--runs 10] [--hog] [--time-scale 1] [--pivot "COMMAND"]

`--pivot "python -m console"` run from another checkout measures that release the same way (before/after).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from console.sim.calibration import DEFAULT
from console.sim.engine import BatchScheduler, StaticDrafting, simulate_level

LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)
INDIFFERENT = 0.02


def truth(max_tokens: int = 64) -> dict[int, dict[str, str | None]]:
    """Who leads each level in the model itself (None: within 2 %), total and per request, baseline 'a', EAGLE-3 'b'."""
    out: dict[int, dict[str, str | None]] = {}
    for c in LEVELS:
        base = simulate_level(BatchScheduler(DEFAULT, seed=1), c, max(c, 64), max_tokens=max_tokens)
        spec = simulate_level(BatchScheduler(DEFAULT, spec=StaticDrafting(3), seed=1), c, max(c, 64), max_tokens=max_tokens)
        total = spec / base
        speed = DEFAULT.mean_accept_length() * DEFAULT.baseline_steps.step_time(c) / DEFAULT.eagle3_steps.step_time(c)
        out[c] = {
            "total": None if abs(total - 1) < INDIFFERENT else "b" if total > 1 else "a",
            "per_request": None if abs(speed - 1) < INDIFFERENT else "b" if speed > 1 else "a",
        }
    return out


def where(text: str, levels: list[int]) -> set[int]:
    if text == "every level":
        return set(levels)
    if m := re.fullmatch(r"C ≤ (\d+)", text):
        return {c for c in levels if c <= int(m[1])}
    if m := re.fullmatch(r"C ≥ (\d+)", text):
        return {c for c in levels if c >= int(m[1])}
    if m := re.fullmatch(r"C = ([\d, ]+)", text):
        return {int(x) for x in m[1].split(",")}
    raise ValueError(text)


def check(report: dict, facts: dict[int, dict[str, str | None]]) -> tuple[list[str], list[str]]:
    """(contradictions between the recommendation and its table, leaders named against the calibrated truth)."""
    rows = {row["c"]: row for row in report["levels"]}
    levels = sorted(rows)
    contradictions, wrong = [], []
    if "leader_total" not in next(iter(rows.values())):  # a release before intervals: ratios only, 3 % even band
        for c, row in rows.items():
            for metric, ratio in (("total", row.get("ratio_total")), ("per_request", row.get("ratio_per_request"))):
                said = None if ratio is None or abs(ratio - 1) <= 0.03 else "b" if ratio > 1 else "a"
                if said and facts[c][metric] and said != facts[c][metric]:
                    wrong.append(f"C={c} {metric}: {'EAGLE-3' if said == 'b' else 'baseline'} named")
        rec = report["recommendation"]
        if "helps nowhere" in rec and report.get("crossover_per_request") is not None:
            contradictions.append("recommendation says it helps nowhere; the per-request crossover says it leads below")
        return contradictions, wrong
    rec = report["recommendation"]
    claims = {
        "loses total throughput at ": ("total", "a"),
        "helps per-request speed at ": ("per_request", "b"),
        "total throughput at ": ("total", "b"),
    }
    for phrase, (metric, leader) in claims.items():
        for m in re.finditer(re.escape(phrase) + r"(every level|C [≤≥=] [\d, ]+?)(?=[,;:)]| and|$)", rec):
            before = rec[max(0, m.start() - 12) : m.start()]
            if phrase == "total throughput at " and before.endswith(("loses ", "cannot tell ")):
                continue
            claimed = where(m[1].strip(), levels)
            table = {c for c in levels if rows[c][f"leader_{metric}"] == leader}
            if claimed != table:
                contradictions.append(f"'{phrase}{m[1]}' but the table has {sorted(table)}")
    for c, row in rows.items():
        for metric in ("total", "per_request"):
            said = row[f"leader_{metric}"]
            if said and facts[c][metric] and said != facts[c][metric]:
                wrong.append(f"C={c} {metric}: {'EAGLE-3' if said == 'b' else 'baseline'} named")
    return contradictions, wrong


def campaign(pivot: list[str], config: str, cwd: str | None) -> dict:
    run = lambda *a: subprocess.run([*pivot, "--config", config, *a], capture_output=True, text=True, timeout=1800, cwd=cwd)
    for step in (("server", "switch", "demo-baseline"), ("sweep",), ("server", "switch", "demo-eagle3"), ("sweep",)):
        done = run(*step)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(step)}: {done.stdout[-400:]} {done.stderr[-400:]}")
    runs = [line.split()[0] for line in run("runs").stdout.splitlines()[1:]]
    return json.loads(run("compare", runs[-2], runs[-1], "--json").stdout)


def own_ports(directory: Path, shipped: Path) -> None:
    """Demo profiles on free ports beside the demo's config, where a release that does not write them itself
    would collide with another demo on this machine (the simulated host shares its loopback)."""
    directory.mkdir(exist_ok=True)
    for name in ("demo-baseline", "demo-eagle3"):
        if not (directory / f"{name}.toml").exists():
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            head, table, rest = (shipped / f"{name}.toml").read_text().partition("\n[")
            (directory / f"{name}.toml").write_text(f"{head}\nport = {port}\n{table}{rest}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--hog", action="store_true", help="a busy loop on one core beside the campaign")
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--pivot", default=str(Path(sys.executable).parent / "pivot"), help="the command that is pivot")
    parser.add_argument("--cwd", help="run pivot from this directory (another checkout, with --pivot 'python -m console')")
    args = parser.parse_args()
    facts = truth()
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.hog else None
    root = Path(tempfile.mkdtemp(prefix="pivot-campaigns-"))
    pivot = shlex.split(args.pivot)
    host = subprocess.Popen(
        [*pivot, "demo", "--serve", "--dir", str(root / "demo"), "--no-traffic", "--time-scale", str(args.time_scale)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=args.cwd,
    )
    try:
        assert host.stdout
        config = next(line for line in iter(host.stdout.readline, "") if line.startswith("config: "))[8:].strip()
        own_ports(Path(config).parent / "profiles", Path(args.cwd or Path(__file__).parent.parent) / "profiles")
        for i in range(args.runs):
            started = time.monotonic()
            report = campaign(pivot, config, args.cwd)
            contradictions, wrong = check(report, facts)
            print(
                json.dumps(
                    {
                        "campaign": i + 1,
                        "seconds": round(time.monotonic() - started),
                        "load": os.getloadavg()[0],
                        "recommendation": report["recommendation"],
                        "contradictions": contradictions,
                        "against_truth": wrong,
                    },
                    ensure_ascii=False,
                ),
                flush=True,
            )
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(timeout=60)
        if hog:
            hog.kill()


if __name__ == "__main__":
    main()

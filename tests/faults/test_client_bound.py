"""A load generator starved of CPU measures itself, not the server: its levels say so, and no verdict uses them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.settings import SweepSettings
from console.sweep.loadgen.generator import client_bound, lagging
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run
from tests.test_sim_server import sim_env, start_server  # noqa: F401  (fixtures)


def test_the_thresholds() -> None:
    assert client_bound(0.95) and not client_bound(0.5)
    assert lagging(0.012, 0.021) and not lagging(0.001, 0.021)  # late by more than a quarter of a gap
    assert not lagging(0.001, 0.0104)  # a drafting server's bursts: its own doing, measured per token


def test_a_burst_of_one_token_chunks_is_one_arrival() -> None:
    """llama-server sends a drafting step's accepted tokens as one-token chunks in one burst: ITL is per token over
    arrivals (4 tokens 40 ms after the last arrival: four gaps of 10 ms), not the microseconds between the chunks."""
    from console.sweep.metrics import RequestRecord

    chunks = ((0.1, 1), (0.14, 1), (0.14002, 1), (0.14004, 1), (0.14006, 1), (0.18, 1))
    record = RequestRecord(c=1, index=0, start=0, status=200, error=None, ttft=0.1, e2e=0.18, tokens=6, chunks=chunks)
    assert record.arrivals() == [(0.1, 1), (0.14, 4), (0.18, 1)]
    assert [round(g, 4) for g in record.itl()] == [0.01, 0.01, 0.01, 0.01, 0.04]


@pytest.mark.skipif(not shutil.which("taskset") or len(os.sched_getaffinity(0)) < 1, reason="needs taskset")
def test_a_starved_load_generator_flags_its_levels(start_server, sim_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    server = start_server()
    cpu = min(os.sched_getaffinity(0))
    hogs = [subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        settings = SweepSettings(levels=(8,), requests=24, max_tokens=64, input_tokens=16)
        run = create_run(tmp_path / "campaign", RunMeta(profile="p", settings=settings.to_dict()))
        done = subprocess.run(
            ["taskset", "-c", str(cpu), sys.executable, "-m", "console.sweep.loadgen", "--url", server.url, "--run-dir", str(run.dir)],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert done.returncode == 0, done.stderr
    level = next(json.loads(line) for line in done.stdout.splitlines() if '"level_done"' in line)
    assert level["lagging"] or level["client_bound"], level  # the level says its numbers are the client's

"""A level sent by several load generator processes (`[sweep] workers`), on the GPU host (the zipapp starts them) and
here: every request of the level sent once with C in flight, the records kept as they finish, a worker that dies
fails its level (measured once more), and an abort leaves no worker behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.settings import SweepSettings
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run, open_run
from tests.conftest import HostProcess, host_process, wait_until
from tests.test_loadgen_on_host import events, loadgen, server_port, wait_for_line

pytestmark = pytest.mark.slow  # sweeps on a demo host

WORKER_CODE = b"console.sweep.loadgen.workers import serve"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[HostProcess]:
    yield from host_process(tmp_path, 30, server="baseline")


def workers_of(parent: int) -> list[int]:
    """The load generator's worker processes whose parent is `parent`."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if WORKER_CODE in cmdline and ppid == parent:
                found.append(int(proc.name))
    return found


def workers_on(host: HostProcess) -> set[int]:
    """The workers started by the load generator on this simulated host (their python imports its zipapp), not those
    of any other test's."""
    return {
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and WORKER_CODE in (cmdline := _cmdline(p)) and str(host.root).encode() in cmdline
    }


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def new_run(campaign: Path, client: str, **settings: Any) -> Path:
    return create_run(campaign, RunMeta(profile="t-baseline", settings={"client": client, **settings})).dir


def direct(host: HostProcess, run_dir: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "console.sweep.loadgen", "--url", f"http://127.0.0.1:{server_port(host)}", "--run-dir", str(run_dir)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_workers_auto_is_one_per_128_in_flight_and_leaves_a_cpu() -> None:
    auto = SweepSettings()
    assert [auto.workers_for(c, 16) for c in (1, 128, 129, 1000, 5000)] == [1, 1, 2, 8, 15]
    assert auto.workers_for(1000, 2) == 1 and auto.workers_for(1000, None) == 1
    assert SweepSettings(workers=4).workers_for(3, 2) == 3  # never more processes than requests in flight
    with pytest.raises(ValueError, match=r"^workers: expected 'auto' or an integer from 1 to 64, got "):
        SweepSettings.from_dict({"workers": 0})
    with pytest.raises(ValueError, match=r"^workers: expected 'auto' or an integer from 1 to 64, got "):
        SweepSettings.from_dict({"workers": "many"})


def test_on_the_host_two_workers_send_every_request_once_with_c_in_flight(host: HostProcess, tmp_path: Path) -> None:
    run_dir = new_run(tmp_path / "campaign", "host", levels=[3, 8], requests=24, max_tokens=128, workers=2, drift_check=False)
    proc = loadgen(host, host.config_path, run_dir)
    ended: list[tuple[str, str]] = []
    reader = threading.Thread(target=lambda: ended.append(proc.communicate(timeout=180)))
    reader.start()
    most = 0
    while reader.is_alive():  # how many workers ran at once, on this host, while the sweep ran
        most = max(most, len(workers_on(host)))
        time.sleep(0.02)
    out, err = ended[0]
    assert proc.returncode == 0, err
    assert most == 2
    seen = events(out)
    assert next(e for e in seen if e["type"] == "sweep_started")["client"]["path"] == "on-host"
    done = [e for e in seen if e["type"] == "level_done"]
    assert [(e["c"], e["workers"], e["peak_in_flight"], e["requests"], e["errors"]) for e in done] == [(3, 2, 3, 24, 0), (8, 2, 8, 24, 0)]
    kept = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    for c in (3, 8):
        requests = [e for e in kept if e["type"] == "request" and e["c"] == c]
        assert sorted(e["i"] for e in requests) == list(range(24))  # each index once, from either worker
        assert all(e["tokens"] == 128 and len(e["chunks"]) >= 1 for e in requests)
    run = open_run(tmp_path / "campaign", run_dir.name)
    assert run.state == "complete" and [level.workers for level in run.levels()] == [2, 2]
    assert workers_on(host) == set()  # the host's workers ended with the sweep


def test_a_worker_that_dies_fails_its_level_which_is_measured_again(host: HostProcess, tmp_path: Path) -> None:
    run_dir = new_run(tmp_path / "campaign", "console", levels=[4], requests=40, max_tokens=2048, workers=2, drift_check=False)
    proc = direct(host, run_dir)
    wait_for_line(proc, "level_started")

    def both() -> list[int] | None:  # started before the level's clock, kept to the sweep's end
        workers = workers_of(proc.pid)
        return workers if len(workers) >= 2 else None

    workers = wait_until(both, timeout=60, interval=0.02, what="two workers")
    victim = workers[0]
    os.kill(victim, signal.SIGKILL)  # a process this test's load generator started, by its pid
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    seen = events(out)
    retry = next(e for e in seen if e["type"] == "level_retry")
    assert retry["reason"].startswith(f"a load generator worker (pid {victim}) ended")
    done = [e for e in seen if e["type"] == "level_done"]
    assert done[0]["failed"] == retry["reason"] and done[-1]["failed"] is None and done[-1]["requests"] == 40
    assert open_run(tmp_path / "campaign", run_dir.name).state == "complete"


def test_an_abort_ends_the_workers_and_keeps_their_finished_requests(host: HostProcess, tmp_path: Path) -> None:
    run_dir = new_run(tmp_path / "campaign", "console", levels=[4], requests=400, max_tokens=512, workers=2)
    proc = direct(host, run_dir)
    seen = wait_for_line(proc, "requests_done")
    workers = workers_of(proc.pid)
    assert len(workers) == 2
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    kept = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert kept[-1]["type"] == "sweep_done" and kept[-1]["aborted"] is True
    assert sum(e["type"] == "request" for e in kept) >= sum(e["n"] for e in seen if e["type"] == "requests_done") >= 1
    wait_until(
        lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers),
        timeout=30,
        interval=0.1,
        what="the workers to end with the load generator that started them",
    )


def test_a_timed_level_on_two_workers_ends_at_its_deadline(host: HostProcess, tmp_path: Path) -> None:
    run_dir = new_run(tmp_path / "campaign", "console", levels=[4], duration_s=3.0, max_tokens=16, workers=2, drift_check=False)
    proc = direct(host, run_dir)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    done = next(e for e in events(out) if e["type"] == "level_done")
    assert done["workers"] == 2 and done["errors"] == 0 and done["requests"] > 4
    assert done["wall_s"] >= 3.0  # no request began after the deadline; those in flight finished

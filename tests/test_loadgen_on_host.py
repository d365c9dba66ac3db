"""The load generator on the GPU host itself (console/sweep/loadgen/on_host.py, uploaded as a zipapp), against the simulated
host over SSH: where it ran is recorded, what it sends is kept here, a host whose python cannot run it is said so,
and stop and abort reach it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run, open_run
from tests.conftest import HostProcess, host_process, wait_until

pytestmark = pytest.mark.slow  # sweeps on a demo host


@pytest.fixture
def host(tmp_path: Path) -> Iterator[HostProcess]:
    yield from host_process(tmp_path, 30, server="baseline")


def server_port(host: HostProcess) -> int:
    state = host.root / "home" / ".pivot" / "server.json"
    wait_until(state.exists, timeout=60, interval=0.1, what="the simulated server to start")
    return int(json.loads(state.read_text())["port"])


def loadgen(host: HostProcess, config: Path, run_dir: Path, **kw: Any) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "console.sweep.loadgen",
        "--config",
        str(config),
        "--host",
        "demo",
        "--port",
        str(server_port(host)),
        "--run-dir",
        str(run_dir),
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def new_run(campaign: Path, client: str, levels: list[int], max_tokens: int = 32) -> Path:
    settings = {"levels": levels, "requests": "c", "min_requests": 8, "max_tokens": max_tokens, "client": client}
    return create_run(campaign, RunMeta(profile="t-baseline", settings=settings)).dir


def events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def without_site_packages(host: HostProcess, tmp_path: Path) -> Path:
    """The same host whose python has none of the load generator's packages (its standard library only)."""
    python = tmp_path / "bare-python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    config = tmp_path / "bare.toml"
    config.write_text(host.config_path.read_text().replace(f'python = "{sys.executable}"', f'python = "{python}"'))
    return config


def test_auto_runs_the_load_generator_on_the_host_and_keeps_its_events_here(host: HostProcess, tmp_path: Path) -> None:
    run_dir = new_run(tmp_path / "campaign", "auto", [2, 8])
    proc = loadgen(host, host.config_path, run_dir)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    started = next(e for e in events(out) if e["type"] == "sweep_started")
    assert started["client"]["path"] == "on-host" and started["pid"] == proc.pid
    assert [e["c"] for e in events(out) if e["type"] == "level_done"] == [2, 8, 2]  # C = 2 again: the sweep's drift
    run = open_run(tmp_path / "campaign", run_dir.name)
    assert run.state == "complete" and [level.requests for level in run.levels()] == [8, 8]
    assert run.client_placement is not None and run.client_placement.endswith("on the GPU host, next to the server")
    uploaded = list((host.root / "home" / ".pivot" / "agent").glob("pivot_loadgen_*.pyz"))
    assert len(uploaded) == 1  # uploaded once, beside the agent
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(f'campaign_dir = "{tmp_path / "campaign"}"\n')
    shown = subprocess.run(
        [sys.executable, "-m", "console", "--config", str(campaign), "runs", "show", run_dir.name], capture_output=True, text=True
    )
    assert any(line.endswith("on the GPU host, next to the server") for line in shown.stdout.splitlines()), shown.stdout


def test_a_host_whose_python_cannot_run_it_gets_the_load_from_here_with_the_reason(host: HostProcess, tmp_path: Path) -> None:
    bare = without_site_packages(host, tmp_path)
    run_dir = new_run(tmp_path / "campaign", "auto", [2])
    proc = loadgen(host, bare, run_dir)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    started = next(e for e in events(out) if e["type"] == "sweep_started")
    assert started["client"]["path"] == "ssh-forward" and started["client"]["host"] == "demo"
    assert any("not on demo: the host's python lacks aiohttp, orjson, pydantic, prometheus_client" in w for w in started["warnings"])
    # asked for the host, and the host cannot: one line, no sweep
    run_dir = new_run(tmp_path / "campaign", "host", [2])
    proc = loadgen(host, bare, run_dir)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and not events(out)
    assert err.strip().splitlines() == [
        "pivot-loadgen: demo: cannot run the load generator there: the host's python lacks aiohttp, orjson, pydantic, prometheus_client"
    ]


def host_generators() -> list[int]:
    """The load generators running on the simulated host (its processes are this machine's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if b"pivot_loadgen_" in cmdline:
                found.append(int(proc.name))
    return found


def wait_for_line(proc: subprocess.Popen[str], wanted: str) -> list[dict[str, Any]]:
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(json.loads(line))
        if seen[-1]["type"] == wanted:
            return seen
    raise AssertionError(f"no {wanted} event: {seen}")


def test_stop_after_the_level_and_abort_reach_the_generator_on_the_host(host: HostProcess, tmp_path: Path) -> None:
    before = set(host_generators())
    run_dir = new_run(tmp_path / "campaign", "host", [2, 4, 8], max_tokens=256)
    proc = loadgen(host, host.config_path, run_dir)
    wait_for_line(proc, "level_started")
    os.kill(proc.pid, signal.SIGUSR1)  # stop after this level
    out, _ = proc.communicate(timeout=120)
    done = events(out)
    assert [e["c"] for e in done if e["type"] == "level_done"] == [2]
    assert done[-1]["type"] == "sweep_done" and done[-1]["stopped"] is True

    run_dir = new_run(tmp_path / "campaign", "host", [4, 8], max_tokens=4096)
    proc = loadgen(host, host.config_path, run_dir)
    seen = wait_for_line(proc, "requests_done")
    proc.send_signal(signal.SIGTERM)  # abort now: the finished requests are kept, the host's generator ends
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    kept = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert kept[-1]["type"] == "sweep_done" and kept[-1]["aborted"] is True
    assert sum(e["type"] == "sweep_done" for e in kept) == 1  # the host's end, not a second one of this process's
    assert sum(e["type"] == "request" for e in kept) >= sum(e["n"] for e in seen if e["type"] == "requests_done") >= 1
    wait_until(lambda: not set(host_generators()) - before, timeout=30, interval=0.1, what="the load generator on the host to end")


def test_what_is_kept_from_the_host_is_what_the_generator_emits() -> None:
    """The events the generator writes (a dict's "type", or a model of console/sweep/model.py) are the union's members:
    each one the decoder reads, and nothing else."""
    import re
    import typing

    from pydantic import BaseModel

    from console.sweep import model
    from console.sweep.loadgen import generator, server_view

    emitted = set()
    for module in (generator, server_view):
        assert module.__file__ is not None
        text = Path(module.__file__).read_text()
        emitted |= set(re.findall(r'"type": "([a-z_]+)"', text))
        emitted |= {
            m.model_fields["type"].default
            for name in re.findall(r"\b([A-Z][A-Za-z]+)\(", text)
            if isinstance(m := getattr(model, name, None), type)
            and issubclass(m, BaseModel)
            and "type" in m.model_fields
            and isinstance(m.model_fields["type"].default, str)  # (Said is shown, never kept: its type has no default)
        }
        emitted |= {
            m.model_fields["type"].default
            for name in re.findall(r"\b([A-Z][A-Za-z]+)\.model_(?:validate|construct)", text)
            if isinstance(m := getattr(model, name, None), type) and issubclass(m, BaseModel) and "type" in m.model_fields
        }
    members = typing.get_args(typing.get_args(model.Event)[0])
    tags = {typing.get_args(m.model_fields["type"].annotation)[0] for m in members}
    assert emitted == tags == model.EVENT_TYPES

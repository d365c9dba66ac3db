"""The server lifecycle end to end over SSH against the simulated host."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from console.server.lifecycle import ServerLifecycle
from console.server.profiles import ProfileSet, load_profiles
from console.server.state import LifecycleError, PreflightFailed, ServerState
from tests.conftest import HostProcess, free_port, wait_for

SHIPPED = Path(__file__).parent.parent / "profiles"


@pytest.fixture
def profiles(tmp_path: Path) -> ProfileSet:
    """The demo profiles on ports of their own, so that tests never meet another server."""
    local = tmp_path / "profiles"
    local.mkdir()
    for name in ("demo-baseline", "demo-eagle3"):  # beside them, as a simulated host writes them (console/sim/host.py)
        shutil.copy(SHIPPED / "demo" / f"{name}.toml", local)
        (local / f"t-{name.removeprefix('demo-')}.toml").write_text(f'extends = "{name}"\nport = {free_port()}\n')
    (local / "t-broken-flag.toml").write_text(f'extends = "demo-baseline"\nport = {free_port()}\n[flags]\nspeculative-num-stepz = 3\n')
    return load_profiles(SHIPPED, local)


def make(conn: Connection, host: HostProcess) -> ServerLifecycle:
    spec = host.config.host("demo")
    return ServerLifecycle(conn, spec, RemoteTelemetry(conn, spec), idle_threshold_mib=1024, grace_s=3)


@pytest.fixture
async def conn(sim_host_process: HostProcess) -> AsyncIterator[Connection]:
    c = Connection(sim_host_process.config.host("demo"))
    yield c
    await c.close()


async def until(lifecycle: ServerLifecycle, state: ServerState, timeout: float = 30):  # type: ignore[no-untyped-def]
    async def reached() -> bool:
        return (await lifecycle.poll()).state == state

    await wait_for(reached, timeout=timeout, interval=0.2)
    return lifecycle.status


async def test_start_ready_stop_with_gpus_idle(conn: Connection, sim_host_process: HostProcess, profiles: ProfileSet) -> None:
    lifecycle = make(conn, sim_host_process)
    seen: list[ServerState] = []
    lifecycle.add_listener(lambda s: seen.append(s.state))
    assert (await lifecycle.poll()).state == ServerState.STOPPED
    checks = await lifecycle.start(profiles.get("t-baseline"))
    assert [c.name for c in checks] == ["launcher", "model path", "GPUs idle", "port free", "flags known"]
    assert all(c.ok for c in checks)
    ready = await until(lifecycle, ServerState.READY)
    assert ready.profile == "t-baseline" and ready.model and ready.model.endswith("kimi-k2.5-int4")
    assert ServerState.STARTING in seen and seen.index(ServerState.STARTING) < seen.index(ServerState.READY)
    log = await lifecycle.log_tail(5)
    assert any("ready to roll" in line for line in log)
    with pytest.raises(LifecycleError, match="already ready"):
        await lifecycle.start(profiles.get("t-eagle3"))
    report = await lifecycle.stop()
    assert report.leftovers == () and "no process of its group holds GPU memory" in report.describe()
    assert lifecycle.status.state == ServerState.STOPPED
    sample = await lifecycle.agent.sample_once()
    assert sample.idle(1024) and sample.procs == ()  # type: ignore[union-attr]


async def test_a_crash_is_reported_with_the_log_tail(conn: Connection, sim_host_process: HostProcess, profiles: ProfileSet) -> None:
    lifecycle = make(conn, sim_host_process)
    await lifecycle.start(profiles.get("t-baseline"))
    ready = await until(lifecycle, ServerState.READY)
    await conn.run(["kill", "-KILL", "--", f"-{ready.pid}"])  # behind the console's back, the whole group
    crashed = await until(lifecycle, ServerState.CRASHED)
    assert crashed.detail == "the process ended without a stop"
    assert any("ready to roll" in line for line in crashed.log_tail) and len(crashed.log_tail) <= 50


async def test_a_server_that_stops_answering_is_unhealthy_until_it_answers_again(
    conn: Connection, sim_host_process: HostProcess, profiles: ProfileSet
) -> None:
    lifecycle = make(conn, sim_host_process)
    await lifecycle.start(profiles.get("t-baseline"))
    ready = await until(lifecycle, ServerState.READY)
    await conn.run(["kill", "-STOP", str(ready.pid)])  # alive, holding its port, answering nothing
    try:
        unhealthy = await until(lifecycle, ServerState.UNHEALTHY, timeout=60)
        assert unhealthy.pid == ready.pid and unhealthy.detail.startswith("health check failed")
    finally:
        await conn.run(["kill", "-CONT", str(ready.pid)])
    again = await until(lifecycle, ServerState.READY)
    assert again.ready_at == ready.ready_at  # the same server, up since it first became ready
    await lifecycle.stop()


async def test_a_later_console_adopts_the_running_server(conn: Connection, sim_host_process: HostProcess, profiles: ProfileSet) -> None:
    first = make(conn, sim_host_process)
    await first.start(profiles.get("t-eagle3"))
    started = await until(first, ServerState.READY)
    other = Connection(sim_host_process.config.host("demo"))
    try:
        adopted = await make(other, sim_host_process).poll()
        assert (adopted.state, adopted.profile, adopted.pid) == (ServerState.READY, "t-eagle3", started.pid)
    finally:
        await other.close()
    await first.stop()


async def test_preflight_refuses_busy_gpus_a_taken_port_and_unknown_flags(
    conn: Connection, sim_host_process: HostProcess, profiles: ProfileSet
) -> None:
    lifecycle = make(conn, sim_host_process)
    with pytest.raises(PreflightFailed) as refused:
        await lifecycle.start(profiles.get("t-broken-flag"))
    assert "flags known: unknown to this launcher: --speculative-num-stepz" in str(refused.value)
    assert (await lifecycle.poll()).state == ServerState.STOPPED

    profile = profiles.get("t-eagle3")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", profile.port))
        taken.listen()
        with pytest.raises(PreflightFailed) as refused:
            await lifecycle.start(profile)
    assert "port free: 127.0.0.1:" in str(refused.value) and "is in use" in str(refused.value)

    # a server started outside pivot (no record) holds the GPUs
    other_port = free_port()
    outsider = int(
        (
            await conn.run(
                [
                    "sh",
                    "-c",
                    f"setsid python3 -m console.sim.launch_server --model-path "
                    f"~/models/kimi-k2.5-int4 --tp 2 --port {other_port} </dev/null >/dev/null 2>&1 & echo $!",
                ]
            )
        ).stdout
    )
    await wait_for(lambda: _busy(lifecycle), timeout=30)
    with pytest.raises(PreflightFailed) as refused:
        await lifecycle.start(profile)
    assert "GPUs idle: 2 of 8 GPUs hold" in str(refused.value) or "GPUs idle: GPU 0 holds" in str(refused.value)
    checks = await lifecycle.start(profile, force=True)  # an explicit force overrides
    assert [c.name for c in checks if not c.ok] == ["GPUs idle"]
    await until(lifecycle, ServerState.READY)
    await lifecycle.stop()
    await conn.run(["kill", "-TERM", "--", f"-{outsider}"])


async def _busy(lifecycle: ServerLifecycle) -> bool:
    sample = await lifecycle.agent.sample_once()
    return not sample.idle(1024)  # type: ignore[union-attr]


async def test_switch_from_baseline_to_eagle3_is_one_action(conn: Connection, sim_host_process: HostProcess, profiles: ProfileSet) -> None:
    lifecycle = make(conn, sim_host_process)
    await lifecycle.start(profiles.get("t-baseline"))
    baseline = await until(lifecycle, ServerState.READY)
    await lifecycle.switch(profiles.get("t-eagle3"))
    eagle = await until(lifecycle, ServerState.READY)
    assert eagle.profile == "t-eagle3" and eagle.pid != baseline.pid
    info = (await conn.run(["cat", ".pivot/server.json"], cwd="~")).stdout
    assert '"EAGLE3"' in info
    await lifecycle.stop()


def test_headless_server_commands(sim_host_process: HostProcess, profiles: ProfileSet, tmp_path: Path) -> None:
    config = tmp_path / "pivot.toml"
    local_profiles = profiles.get("t-baseline").path.parent
    config.write_text(
        sim_host_process.config_path.read_text().replace("[hosts.demo]", f'profiles_dir = "{local_profiles}"\n\n[hosts.demo]')
    )

    def pivot(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "console", "--config", str(config), *args], capture_output=True, text=True, timeout=120
        )

    listed = pivot("profiles")
    assert listed.returncode == 0 and "t-baseline" in listed.stdout and "demo-eagle3" in listed.stdout
    shown = pivot("profiles", "show", "t-eagle3")
    assert "--speculative-algorithm EAGLE3" in shown.stdout
    assert "--speculative-num-steps" in pivot("profiles", "diff", "t-baseline", "t-eagle3").stdout
    started = pivot("server", "start", "t-baseline")
    assert started.returncode == 0, started.stdout + started.stderr
    assert "ok   flags known" in started.stdout and "ready t-baseline" in started.stdout
    status = pivot("server", "status")
    assert status.stdout.startswith("ready t-baseline") and status.returncode == 0
    assert "ready to roll" in pivot("server", "logs").stdout
    stopped = pivot("server", "stop")
    assert stopped.returncode == 0 and "no process of its group holds GPU memory" in stopped.stdout
    assert pivot("server", "status").stdout.startswith("stopped t-baseline")
    bad = pivot("server", "start", "nope")
    assert bad.returncode == 2 and "no profile named 'nope'" in bad.stderr

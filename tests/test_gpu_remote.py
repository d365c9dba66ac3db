"""Telemetry and the kill flow end to end over SSH against the simulated host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from console.gpu.kill import KillOutcome, ReleaseWatch, plan_kill
from console.gpu.samples import Hello, Sample
from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from tests.conftest import RECORD_BESIDE, HostProcess, free_port, wait_for

LAUNCH = "python3 -m console.sim.launch_server --model-path ~/models/kimi-k2.5-int4 --tp 8 --port {port}"


@pytest.fixture
async def telemetry(sim_host_process: HostProcess) -> AsyncIterator[RemoteTelemetry]:
    spec = sim_host_process.config.host("demo")
    conn = Connection(spec)
    yield RemoteTelemetry(conn, spec, interval=0.25)
    await conn.close()


async def start_server(conn: Connection) -> int:
    """Started the way the lifecycle will: detached, with the pid file the agent reads."""
    script = (
        f"setsid {LAUNCH.format(port=free_port())} </dev/null >server.log 2>&1 & p=$!; "
        f"echo $p > server.pid; {RECORD_BESIDE}; cat server.pid"
    )
    return int((await conn.run(["sh", "-c", script], cwd=conn.spec.workdir)).stdout)  # pivot makes the workdir


async def next_sample(events, predicate=lambda s: True) -> Sample:  # type: ignore[no-untyped-def]
    async for event in events:
        if isinstance(event, Sample) and predicate(event):
            return event
    raise AssertionError("telemetry ended")


async def test_the_agent_streams_nvidia_smi_samples_over_one_channel(telemetry: RemoteTelemetry, sim_host_process: HostProcess) -> None:
    events = telemetry.events()
    hello = await anext(events)
    assert isinstance(hello, Hello) and hello.source == "nvidia-smi" and hello.interval == 0.25
    first = await next_sample(events)
    assert len(first.gpus) == 8 and first.procs == () and first.source == "nvidia-smi"
    main_pid = await start_server(telemetry.conn)
    busy = await wait_for(lambda: next_sample(events, lambda s: len(s.procs) == 9), timeout=30)
    assert busy.server is not None and busy.server.pid == main_pid and busy.server.alive
    assert not busy.stray and all(p.pgid == main_pid for p in busy.procs)
    assert {p.cmd for p in busy.procs} >= {f"sglang::scheduler_TP{i}" for i in range(8)}
    # one long-lived agent process for the whole stream, and it ends with the stream
    host_pid = sim_host_process.proc.pid
    assert await agents(telemetry.conn, host_pid) == [hello.pid]
    await events.aclose()
    await wait_for(lambda: _no_agents(telemetry.conn, host_pid))


async def agents(conn: Connection, host_pid: int) -> list[int]:
    """Agent processes of this simulated host (sessions are children of its process)."""
    out = (await conn.run(["sh", "-c", f"pgrep -P {host_pid} -f '[p]ivot_agent_.* sample' || true"])).stdout
    return [int(pid) for pid in out.split()]


async def _no_agents(conn: Connection, host_pid: int) -> bool:
    return not await agents(conn, host_pid)


async def test_the_agent_is_uploaded_only_where_the_host_lacks_it(telemetry: RemoteTelemetry, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as it is, uploaded when the host's python cannot open it: no check first (a round trip on every call)."""
    uploads: list[str] = []
    upload = telemetry.conn.upload

    async def counted(source: bytes | str | os.PathLike[str], remote_path: str, *, mode: int = 0o644) -> None:
        uploads.append(remote_path)
        await upload(source, remote_path, mode=mode)

    monkeypatch.setattr(telemetry.conn, "upload", counted)
    assert isinstance(await telemetry.sample_once(), Sample) and len(uploads) == 1  # a host new to this version
    assert isinstance(await telemetry.sample_once(), Sample) and len(uploads) == 1
    name = uploads[0].rsplit("/", 1)[1]
    await telemetry.conn.run(["rm", f"agent/{name}"], cwd=telemetry.spec.workdir)  # gone behind pivot's back
    events = telemetry.events()
    assert isinstance(await anext(events), Hello) and len(uploads) == 2
    assert isinstance(await next_sample(events), Sample)
    await events.aclose()


async def test_killing_the_zombies_a_server_left_frees_the_memory(telemetry: RemoteTelemetry) -> None:
    events = telemetry.events()
    main_pid = await start_server(telemetry.conn)
    await wait_for(lambda: next_sample(events, lambda s: len(s.procs) == 9), timeout=30)
    await telemetry.conn.run(["kill", "-TERM", str(main_pid)])
    left = await next_sample(events, lambda s: len(s.procs) == 3 and any(p.zombie for p in s.procs))
    assert all(p.stray for p in left.procs)
    zombie = next(p for p in left.procs if p.zombie)
    orphans = [p for p in left.procs if not p.zombie]
    assert all(p.orphan for p in orphans) and zombie.orphan

    # the zombie alone cannot be killed: the agent says so and names the parent
    only_zombie = plan_kill(left, [zombie.pid], agent_pid=telemetry.hello.pid if telemetry.hello else None)
    [outcome] = [KillOutcome.from_agent(d) for d in await telemetry.kill(only_zombie.agent_targets(), 1.0)]
    assert outcome.outcome == "zombie" and outcome.ppid == zombie.ppid

    plan = plan_kill(left, [p.pid for p in left.stray], agent_pid=telemetry.hello.pid if telemetry.hello else None)
    watch = ReleaseWatch(plan)
    outcomes = [KillOutcome.from_agent(d) for d in await telemetry.kill(plan.agent_targets(), 2.0)]
    assert all(o.outcome in ("exited", "no-such-process") for o in outcomes if o.pid != zombie.pid)
    messages: list[str] = []
    while not watch.done:
        messages += watch.update(await next_sample(events))
    assert sorted(m.split(":")[0] for m in messages) == ["GPU 3", "GPU 7"]  # (killed at once: in either order)
    assert "GiB released in" in messages[0]
    idle = await next_sample(events)
    assert idle.idle(1024) and idle.procs == ()
    await events.aclose()


async def test_a_reused_pid_is_never_signalled(telemetry: RemoteTelemetry) -> None:
    sleeper = int((await telemetry.conn.run(["sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!"])).stdout)
    [outcome] = await telemetry.kill([f"{sleeper}:1:single"], 1.0)  # pinned to a start time it does not have
    assert outcome["outcome"] == "reused"
    assert (await telemetry.conn.run(["kill", "-0", str(sleeper)])).ok
    await telemetry.conn.run(["kill", str(sleeper)])


def pivot(host: HostProcess, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", "--config", str(host.config_path), *args],
        capture_output=True,
        text=True,
        input=input,
        timeout=120,
    )


async def test_headless_gpus_and_kill_stray(sim_host_process: HostProcess, telemetry: RemoteTelemetry) -> None:
    idle = pivot(sim_host_process, "gpus")
    assert idle.returncode == 0 and "all GPUs idle" in idle.stdout and "NVIDIA H200" in idle.stdout
    nothing = pivot(sim_host_process, "kill", "--stray", "--yes")
    assert nothing.returncode == 0 and "no stray processes" in nothing.stdout

    main_pid = await start_server(telemetry.conn)
    events = telemetry.events()
    await wait_for(lambda: next_sample(events, lambda s: len(s.procs) == 9), timeout=30)
    await telemetry.conn.run(["kill", "-TERM", str(main_pid)])
    await next_sample(events, lambda s: len(s.procs) == 3 and any(p.zombie for p in s.procs))
    await events.aclose()

    listed = json.loads(pivot(sim_host_process, "gpus", "--json").stdout)
    assert len(listed["procs"]) == 3 and listed["server"] == {"pid": main_pid, "alive": False}

    refused = pivot(sim_host_process, "kill", "1", "--yes")
    assert refused.returncode == 1 and "refused pid 1: PID 1 is never killed" in refused.stdout

    declined = pivot(sim_host_process, "kill", "--stray", input="n\n")
    assert declined.returncode == 1 and "nothing was killed" in declined.stdout

    killed = pivot(sim_host_process, "kill", "--stray", "--yes", "--grace", "2")
    assert killed.returncode == 0, killed.stdout + killed.stderr
    assert "GPU 3:" in killed.stdout and "GPU 7:" in killed.stdout and "released in" in killed.stdout
    log = [json.loads(line) for line in (sim_host_process.root / "campaign" / "events.jsonl").read_text().splitlines()]
    assert log[-1]["kind"] == "kill" and log[-1]["host"] == "demo" and len(log[-1]["pids"]) == 3
    assert "all GPUs idle" in pivot(sim_host_process, "gpus").stdout

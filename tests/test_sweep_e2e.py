"""The load generator against the simulated server over SSH: concurrency, calibration, abort, resume, failures."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from console.server.lifecycle import ServerLifecycle
from console.server.profiles import load_profiles
from console.server.state import ServerState
from console.settings import SweepSettings
from console.sweep.analysis.compare import compare
from console.sweep.analysis.sides import SIDES
from console.sweep.loadgen.runner import SweepProcess, describe_server
from console.sweep.runs.store import completed_levels, create_run
from tests.conftest import HostProcess, free_port, wait_for

pytestmark = pytest.mark.slow  # whole sweeps on a demo host

SHIPPED = Path(__file__).parent.parent / "profiles"


@pytest.fixture
async def lifecycle(sim_host_measured: HostProcess, tmp_path: Path) -> AsyncIterator[ServerLifecycle]:
    spec = sim_host_measured.config.host("demo")
    conn = Connection(spec)
    yield ServerLifecycle(conn, spec, RemoteTelemetry(conn, spec), idle_threshold_mib=1024, grace_s=3)
    await conn.close()


async def serve(lifecycle: ServerLifecycle, tmp_path: Path, name: str) -> int:
    local = tmp_path / "profiles"
    local.mkdir(exist_ok=True)
    port = free_port()
    (local / f"t-{name}.toml").write_text(f'extends = "demo-{name}"\nport = {port}\n')
    await lifecycle.switch(load_profiles(SHIPPED, SHIPPED / "demo", local).get(f"t-{name}"))

    async def ready() -> bool:
        return (await lifecycle.poll()).state == ServerState.READY

    await wait_for(ready, timeout=30, interval=0.2)
    return port


async def sweep(host: HostProcess, campaign: Path, port: int, settings: SweepSettings, name: str, on_event=None) -> list[dict]:  # type: ignore[no-untyped-def]
    # what the pane and `pivot sweep` record: the server's profile and command line, the host, its GPUs
    conn = Connection(host.config.host("demo"))
    try:
        meta, _, _ = await describe_server(conn, host.config, "demo")
    finally:
        await conn.close()
    run = create_run(campaign, meta.model_copy(update={"settings": settings.to_dict()}), name=name)
    process = SweepProcess(run, ["--config", str(host.config_path), "--host", "demo", "--port", str(port)])
    events = []
    async for typed in process.events():
        event = typed.model_dump()  # the event as the load generator wrote it, with every field it has
        events.append(event)
        if on_event:
            on_event(process, event)
    return events


async def test_exactly_c_in_flight_and_the_campaigns_shape(
    sim_host_measured: HostProcess, lifecycle: ServerLifecycle, tmp_path: Path
) -> None:
    campaign = tmp_path / "campaign"
    settings = SweepSettings(levels=(1, 2, 8), requests="c", min_requests=16, max_tokens=48, input_tokens=32)
    port = await serve(lifecycle, tmp_path, "baseline")
    base = await sweep(sim_host_measured, campaign, port, settings, "base")
    done = [e for e in base if e["type"] == "level_done" and not e["reference"]]
    assert [e["c"] for e in done] == [1, 2, 8]
    again = [e for e in base if e["type"] == "level_done" and e["reference"]]  # C = 1 measured again at the end
    assert [e["c"] for e in again] == [1] and base.index(again[0]) == len(base) - 2  # just before sweep_done
    assert all(e["peak_in_flight"] <= e["c"] for e in done) and [e["peak_in_flight"] for e in done] == [1, 2, 8]
    running = [e["running"] for e in base if e["type"] == "metrics"]
    assert running and max(running) <= 8  # the server's own count never exceeds C
    assert all(e["errors"] == 0 and e["usage_missing"] == 0 for e in done)
    port = await serve(lifecycle, tmp_path, "eagle3")
    await sweep(sim_host_measured, campaign, port, settings, "spec")
    from console.sweep.runs.store import open_run

    cmp = compare(open_run(campaign, "base"), open_run(campaign, "spec"))
    # real time: the campaign's numbers and its verdict
    ratios = cmp.table["ratio_total"].to_list()
    assert ratios[1] < 1 and ratios[2] < 0.75  # the baseline leads total throughput from C=2
    per_request = cmp.table["ratio_per_request"].to_list()
    assert per_request[0] > 1 > per_request[1]  # speculation is faster per request only at C=1
    assert cmp.advice.losses == cmp.advice.levels[1:] and cmp.advice.levels[1] == 2  # loses from C=2; C=1: too few tokens to tell
    assert cmp.energy is not None and not cmp.energy.dark and cmp.energy.levels  # both read the GPUs' power
    from console.sim.calibration import DEFAULT

    c1 = cmp.levels[0].a  # read while C=1 ran: above the host's idle power (its server is busy), over its throughput
    assert c1.gpu_watts is not None and c1.gpu_watts > DEFAULT.idle_power_w * (cmp.a.meta.gpu_count or 0) > 0
    assert c1.joules_per_token == pytest.approx(c1.gpu_watts / c1.total_tok_s)
    assert cmp.table["a_per_request"][0] == pytest.approx(92.6, rel=0.08)
    # under an SLO: each level's goodput counted request by request, and how many users each run serves
    from console.sweep.analysis.slo import Slo, served

    slo = Slo.parse("itl_p90_ms<=10000,ttft_p90_ms<=60000")  # met by every request of a sweep that did not fail, loaded or not
    under = compare(open_run(campaign, "base"), open_run(campaign, "spec"), slo=slo)
    for side, run in zip(SIDES, (under.a, under.b), strict=True):
        for level in run.measured():
            assert under.goodput[side][level.c] == pytest.approx(level.requests_per_s)
    served_a = served(under.a.measured(), slo)
    assert served_a is not None and served_a.c == 8
    assert under.slo is not None and under.slo.served["a"] is not None and under.slo.served["a"].c == 8
    assert under.table["a_goodput"].to_list()[0] > 0


async def test_abort_keeps_finished_requests_and_resume_reruns_only_the_interrupted_level(
    sim_host_measured: HostProcess, lifecycle: ServerLifecycle, tmp_path: Path
) -> None:
    campaign = tmp_path / "campaign"
    port = await serve(lifecycle, tmp_path, "baseline")
    settings = SweepSettings(levels=(1, 4, 2), requests=8, max_tokens=32, input_tokens=16)
    seen = {"requests_at_4": 0}

    def abort_in_level_4(process: SweepProcess, event: dict) -> None:
        if event["type"] == "requests_done" and event["c"] == 4 and seen["requests_at_4"] < 2:
            seen["requests_at_4"] += event["n"]
            if seen["requests_at_4"] >= 2:
                process.abort()

    events = await sweep(sim_host_measured, campaign, port, settings, "cut", abort_in_level_4)
    run_dir = campaign / "runs" / "cut"
    assert events[-1]["type"] == "sweep_done" and events[-1]["aborted"]
    assert completed_levels(run_dir) == {1}
    on_disk = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert sum(1 for e in on_disk if e["type"] == "request" and e["c"] == 4) >= 2  # finished requests were kept

    from console.sweep.runs.store import open_run

    run = open_run(campaign, "cut")
    assert run.state == "partial"
    from_events = [level.model_dump(exclude={"t"}) for level in run.levels(tables=False)]  # what a sweep command prints
    assert from_events == [level.model_dump() for level in run.levels()]  # the tables' levels (which keep no time)
    process = SweepProcess(run, ["--config", str(sim_host_measured.config_path), "--host", "demo", "--port", str(port)], resume=True)
    resumed = [e.model_dump() async for e in process.events()]
    # no drift check: its first level (C = 1) was measured by the sweep before, maybe of another server
    assert [e["c"] for e in resumed if e["type"] == "level_started"] == [4, 2]
    whole = open_run(campaign, "cut")
    assert whole.state == "complete" and [level.c for level in whole.levels()] == [1, 2, 4]
    assert whole.levels(tables=False) == whole.levels()  # a level that pools attempts: from the tables either way


async def test_a_server_killed_mid_level_gives_errors_and_a_clean_stop(
    sim_host_measured: HostProcess, lifecycle: ServerLifecycle, tmp_path: Path
) -> None:
    campaign = tmp_path / "campaign"
    port = await serve(lifecycle, tmp_path, "baseline")
    pid = lifecycle.status.pid
    # an hour to answer again: the level can only end before the test's bound because the console said it is gone
    settings = SweepSettings(levels=(4, 8), requests=16, max_tokens=256, input_tokens=16, timeout_s=30, server_wait_s=3600)
    killed = {"done": False}

    async def kill_and_say(process: SweepProcess) -> None:
        await lifecycle.conn.run(["kill", "-KILL", "--", f"-{pid}"])
        process.server_gone()  # what the console's Sweeps do when the lifecycle sees the process end

    def kill_server(process: SweepProcess, event: dict) -> None:
        if event["type"] == "level_started" and event["c"] == 4 and not killed["done"]:
            killed["done"] = True
            asyncio.get_running_loop().create_task(kill_and_say(process))

    events = await asyncio.wait_for(sweep(sim_host_measured, campaign, port, settings, "dead", kill_server), 600)
    done = [e for e in events if e["type"] == "level_done"]
    assert done and done[0]["c"] == 4 and done[0]["errors"] > 0
    on_disk = [json.loads(line) for line in (campaign / "runs" / "dead" / "events.jsonl").read_text().splitlines()]
    errors = [e["error"] for e in on_disk if e["type"] == "request" and e["error"]]
    assert errors and all(isinstance(e, str) and e for e in errors)
    assert events[-1]["type"] == "sweep_done" and not events[-1]["aborted"]
    assert "the server's process ended (the console saw it gone)" in events[-1]["failed"]


def test_the_console_tells_a_running_sweep_when_its_server_is_gone() -> None:
    """The session's Sweeps listen to the lifecycle: a crash or a stop seen while a sweep of that server runs reaches
    its load generator; a lost link (unknown) or a sweep of a URL does not."""
    from types import SimpleNamespace

    from console.server.state import ServerStatus
    from console.sweep.sweeps import SweepHandle, Sweeps

    heard: list = []
    lifecycle = SimpleNamespace(add_listener=heard.append)
    sweeps = Sweeps(SimpleNamespace(lifecycle=lifecycle))
    told: list[str] = []
    process = SimpleNamespace(server_gone=lambda: told.append("gone"))
    run = SimpleNamespace(meta=SimpleNamespace(url=None))
    sweeps.current = SweepHandle(run, SweepSettings(), process, "new")  # type: ignore[arg-type]
    (listener,) = heard
    listener(ServerStatus(ServerState.UNKNOWN))
    assert told == []
    listener(ServerStatus(ServerState.CRASHED))
    assert told == ["gone"]
    sweeps.current.run = SimpleNamespace(meta=SimpleNamespace(url="http://127.0.0.1:1"))  # type: ignore[assignment]
    listener(ServerStatus(ServerState.STOPPED))
    assert told == ["gone"]


async def test_a_headless_sweep_fails_its_level_at_once_when_its_server_dies(
    sim_host_measured: HostProcess, lifecycle: ServerLifecycle, tmp_path: Path
) -> None:
    """`pivot sweep` has no Server pane polling its server: the sweep looks at it itself, and a crash seen there fails
    the level now. With an hour to answer again, the command can only end before the test's bound that way."""
    import sys

    port = await serve(lifecycle, tmp_path, "baseline")
    pid = lifecycle.status.pid
    text = sim_host_measured.config_path.read_text()
    assert "\n[sweep]\n" in text
    sim_host_measured.config_path.write_text(text.replace("\n[sweep]\n", "\n[sweep]\nserver_wait_s = 3600\n"))
    campaign = sim_host_measured.config.campaign_dir
    swept = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "console", "--config", str(sim_host_measured.config_path), "sweep"),
        *("--levels", "4,8", "--requests", "400", "--max-tokens", "256"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )

    def measuring() -> bool:
        return any('"level_started"' in p.read_text() for p in campaign.glob("runs/*/events.jsonl"))

    await wait_for(measuring, timeout=120, interval=0.2)
    await lifecycle.conn.run(["kill", "-KILL", "--", f"-{pid}"])  # the server's process group, by the PID it recorded
    out, _ = await asyncio.wait_for(swept.communicate(), 600)
    said = " ".join(out.decode(errors="replace").split())  # (the terminal's width wraps it)
    assert swept.returncode == 3, said
    assert "the server's process ended (the console saw it gone); the run is partial" in said
    assert port  # (the server it swept)

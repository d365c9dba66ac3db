"""Item 16: a zombie whose parent is PID 1 is never answered with `pivot kill 1` (which pivot refuses): only the
container's init reaping it, or the hypervisor's cleanup, frees it. In the CLI and in the GPU pane."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest

from console import config
from console.gpu.samples import Sample, parse_line
from console.gpu.telemetry import TelemetryEvent
from console.session import Session
from console.ui.app import PivotApp
from tests.conftest import wait_for
from tests.fake_telemetry import FakeTelemetry, canned_sample_line

ZOMBIE = 2009


class InitZombieTelemetry(FakeTelemetry):
    """The canned host, but the zombie's parent died and it was handed to PID 1, which does not reap it."""

    async def events(self) -> AsyncGenerator[TelemetryEvent, None]:
        data = json.loads(canned_sample_line())
        for proc in data["procs"]:
            if proc["pid"] == ZOMBIE:
                proc.update(ppid=1, parent_gone=True)
                del proc["parent_start_ticks"]
        assert self.hello is not None  # FakeTelemetry's
        yield self.hello
        sample = parse_line(json.dumps(data), "nvidia-smi")
        assert isinstance(sample, Sample)
        yield dataclasses.replace(sample, received=time.time() + 3600)
        await asyncio.Event().wait()

    async def kill(self, targets: list[str], grace_s: float) -> list[dict]:
        self.killed.append(targets)
        # what the agent answers for a zombie: it is not signalled, and its parent is named
        return [
            {
                "type": "kill",
                "pid": ZOMBIE,
                "signals": [],
                "ppid": 1,
                "outcome": "zombie",
                "detail": "a zombie cannot be signalled; its parent 1 must reap it",
            }
        ]


async def test_pivot_kill_never_advises_killing_pid_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from console.cli import gpus

    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    session = Session(cfg, local=True, telemetry=InitZombieTelemetry())
    # the memory stays held: do not wait 30 s to be told
    status = await gpus.kill_processes(session, [ZOMBIE], stray=False, yes=True, grace_s=1, single=False, release_timeout_s=0.5)
    out = capsys.readouterr().out
    assert status == 1 and "pivot kill 1" not in out
    assert "parent is PID 1" in out and "container's init" in out and "hypervisor's cleanup" in out


async def test_the_gpu_pane_offers_the_hypervisor_not_pid_1(tmp_path: Path) -> None:
    from console.ui.widgets.gpu.pane import GpuPane
    from console.ui.widgets.gpu.processes import ProcessTable

    hypervisor = config.HostSpec(name="hv", hostname="hv.example", role="hypervisor", cleanup=("true",))
    cfg = config.Config(path=None, hosts={"hv": hypervisor}, campaign_dir=tmp_path / "campaign")
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=InitZombieTelemetry()))
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(GpuPane)
        await wait_for(lambda: pane.sample is not None)
        table = app.query_one(ProcessTable)
        table.move_cursor(row=[p.pid for p in table.procs.values()].index(ZOMBIE))
        await pilot.press("k", "y")
        status = lambda: str(app.query_one("#gpu-status").render())
        await wait_for(lambda: "parent is PID 1" in status())
        assert "press p" not in status() and not pane.check_action("kill_parent", ())
        assert "press c to run the cleanup command on hv" in status() and pane.check_action("cleanup", ())

"""Item 1: terminal escapes from remote data never reach the terminal raw. The server log, GPU process names (any user
of a shared host controls their own argv) and task texts are shown with control characters written out, in the
CLI and in the TUI."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console import config
from console.session import Session
from console.sim import state
from console.sim.host import SimHost
from console.tasks.tasklist import TaskList
from console.ui.app import PivotApp
from tests.conftest import wait_for
from tests.fake_telemetry import FakeTelemetry
from tests.faults.conftest import HOSTILE, HOSTILE_SHOWN, FakeServer, Host, pivot, rendered, run_pivot


def safe(text: str) -> bool:
    """Nothing a terminal would act on: no ESC, BEL, CSI or carriage return, and the hostile text written out."""
    return not any(c in text for c in "\x1b\x07\x9b\r") and HOSTILE_SHOWN in text


# -- the server log -----------------------------------------------------------------------------------------------
async def test_server_logs_and_the_crash_tail_write_escapes_out(host: Host, managed_server: FakeServer) -> None:
    with open(managed_server.log, "a") as f:
        f.write(f"loading {HOSTILE}\n")
    status, out, err = await pivot(host.config_path, "server", "logs")
    assert status == 0 and safe(out), out + err
    managed_server.process.kill()  # it ends without a stop: status shows the log's last lines
    managed_server.process.wait()
    status, out, err = await pivot(host.config_path, "server", "status")
    assert status == 1 and out.startswith("crashed baseline") and safe(out), out + err


@pytest.mark.parametrize("host", ["sim"], indirect=True)
async def test_the_log_pane_and_the_server_state_write_escapes_out(host: Host, managed_server: FakeServer) -> None:
    from console.server.state import ServerState
    from console.ui.widgets.server.log_view import LogView
    from console.ui.widgets.server.pane import ServerPane

    with open(managed_server.log, "a") as f:
        f.write(f"loading {HOSTILE}\n")
    app = PivotApp(Session(host.config, host.spec.name, via="console"))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("2", "z")
        log = app.query_one(LogView)
        await wait_for(lambda: any(HOSTILE_SHOWN in line for line in log.lines_kept), timeout=20)
        await pilot.pause()
        assert safe(rendered(log))
        managed_server.process.kill()
        managed_server.process.wait()
        await wait_for(lambda: app.query_one(ServerPane).status.state == ServerState.CRASHED, timeout=20)
        await pilot.pause()
        assert safe(rendered(app.query_one("#server-state")))


# -- GPU process names ----------------------------------------------------------------------------------------------
@pytest.fixture
def hostile_gpu_process(sim: SimHost) -> Iterator[int]:
    """Another user's process on the shared host, holding GPU memory, whose argv[0] is an escape sequence."""
    proc = subprocess.Popen([f"{HOSTILE}worker", "-c", "import time; time.sleep(600)"], executable=sys.executable)
    state.claim(sim.sim, 1, 20_000, proc.pid)
    yield proc.pid
    proc.kill()
    proc.wait()


async def test_gpus_and_the_kill_table_write_process_names_out(sim: SimHost, hostile_gpu_process: int) -> None:
    status, out, err = await pivot(sim.config_path, "gpus")
    assert status == 0 and str(hostile_gpu_process) in out and safe(out), out + err
    status, out, err = await pivot(sim.config_path, "kill", str(hostile_gpu_process), stdin=b"n\n")
    assert status == 1 and "nothing was killed" in out and safe(out), out + err


async def test_the_gpu_pane_and_the_kill_dialog_write_process_names_out(sim: SimHost, hostile_gpu_process: int) -> None:
    from console.ui.screens.confirm_kill import ConfirmKill
    from console.ui.widgets.gpu.pane import GpuPane
    from console.ui.widgets.gpu.processes import ProcessTable

    app = PivotApp(Session(config.load(sim.config_path), "demo", via="console"))
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.query_one(GpuPane)
        await wait_for(lambda: pane.sample is not None and any(p.pid == hostile_gpu_process for p in pane.sample.procs), timeout=20)
        await pilot.press("z")
        await pilot.pause()
        assert safe(rendered(app.query_one(ProcessTable)))
        await pilot.press("k")
        assert isinstance(app.screen, ConfirmKill)
        await pilot.pause()
        assert all(safe(rendered(body)) for body in app.screen.query(".body")[:1])
        await pilot.press("n")


# -- task texts ----------------------------------------------------------------------------------------------------
def test_tasks_list_and_events_write_task_texts_out(campaign_config: Path) -> None:
    added = run_pivot(campaign_config, "tasks", "add", f"sweep {HOSTILE}")
    assert added.returncode == 0 and safe(added.stdout), added.stdout + added.stderr
    listed = run_pivot(campaign_config, "tasks", "list")
    assert listed.returncode == 0 and safe(listed.stdout)
    events = run_pivot(campaign_config, "events")
    assert events.returncode == 0 and safe(events.stdout)
    # what is stored is what was typed: only the screen shows it written out
    assert TaskList(campaign_config.parent / "campaign").load().tasks[0].content == f"sweep {HOSTILE}"


async def test_the_tasks_pane_and_the_event_log_write_task_texts_out(tmp_path: Path) -> None:
    from console.events import EventLog, TaskChange
    from console.ui.screens.event_log import EventLogScreen

    campaign = tmp_path / "campaign"
    task = TaskList(campaign).load().add(f"sweep {HOSTILE}", action=f"sweep {HOSTILE}")  # a runbook file's action
    EventLog(campaign).append(TaskChange(via="cli", change="add", content=task.content))
    cfg = config.Config(path=None, hosts={}, campaign_dir=campaign)
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=FakeTelemetry()))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.press("3", "z")
        await pilot.pause()
        assert safe(rendered(app.query_one("#tasks-table"))) and safe(rendered(app.query_one("#tasks-detail")))
        await pilot.press("E")
        assert isinstance(app.screen, EventLogScreen)
        await pilot.pause()
        assert safe(rendered(app.screen.query_one("DataTable")))


def test_profile_file_names_are_written_out(tmp_path: Path) -> None:
    """A profile whose file name holds ESC or U+202E (issue 34, M5): `pivot profiles` and `profiles show` write the
    name out, as every text from disk is."""
    import subprocess
    import sys

    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "evil\x1b]0;pwned\x07.toml").write_text('extends = "baseline"\n')
    (profiles / "gpt\u202eexe.toml").write_text('extends = "baseline"\n')
    (profiles / "broken\x1b[2J.toml").write_text("launcher = [\n")
    config = tmp_path / "pivot.toml"
    config.write_text(f'profiles_dir = "{profiles}"\n')

    def pivot(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "console", "--config", str(config), *args], capture_output=True, text=True, timeout=60)

    listed = pivot("profiles")
    assert "evil\\x1b]0;pwned\\x07" in listed.stdout and "gpt\\u202eexe" in listed.stdout and "broken\\x1b[2J" in listed.stdout
    shown = pivot("profiles", "show", "evil\x1b]0;pwned\x07")
    assert shown.returncode == 0, shown.stderr
    for out in (listed, shown):
        assert "\x1b" not in out.stdout + out.stderr and "\u202e" not in out.stdout + out.stderr and "\x07" not in out.stdout

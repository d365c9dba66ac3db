"""The console driven with Textual's pilot: over real SSH to the simulated host, or on canned telemetry."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import OptionList

from console import config
from console.gpu.samples import AgentError, Sample
from console.gpu.telemetry import TelemetryEvent
from console.remote import ConnState
from console.session import Session
from console.sim.host import SimHost
from console.sweep.runs.store import open_run
from console.tasks.tasklist import TaskList
from console.ui.app import PivotApp
from console.ui.screens.confirm import Confirm
from console.ui.screens.confirm_kill import ConfirmKill
from console.ui.screens.help import HelpScreen
from console.ui.widgets.gpu.pane import GpuPane
from console.ui.widgets.gpu.processes import ProcessTable
from console.ui.widgets.host_status import HostStatus
from console.ui.widgets.link_banner import LinkBanner
from console.ui.widgets.server.pane import ServerPane
from console.ui.widgets.sweep.chart import SweepChart
from console.ui.widgets.sweep.levels import LevelTable
from console.ui.widgets.sweep.pane import SweepPane
from console.ui.widgets.tasks.pane import TasksPane, TextPrompt
from tests.conftest import RECORD_BESIDE, HostProcess, compared, free_port, settled, toasts, wait_for
from tests.fake_telemetry import FakeTelemetry


def loaded(pane: TasksPane) -> TaskList:
    """The Tasks pane's list, read when the pane was mounted."""
    assert pane.tasks is not None
    return pane.tasks


def canned_app(tmp_path: Path, **kw: object) -> PivotApp:
    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    return PivotApp(Session(cfg, None, local=True, via="console", telemetry=FakeTelemetry()), **kw)  # type: ignore[arg-type]  # **kw: the app's own options


async def test_the_header_shows_the_connection_and_its_round_trip(sim_config: config.Config, sim_host: SimHost) -> None:
    app = PivotApp(Session(sim_config, "demo", via="console"))
    async with app.run_test(size=(120, 30)) as pilot:
        status = app.query_one(HostStatus)
        await wait_for(lambda: status.event is not None and status.event.state == ConnState.UP and status.event.rtt_s is not None)
        await wait_for(lambda: status.last_sample is not None)
        await pilot.pause()
        text = str(status.render())
        assert "demo ● up" in text and " ms" in text and "nvidia-smi" in text and "no managed server" in text
        seen: list[ConnState] = []
        app.session.pool.get("demo").add_listener(lambda e: seen.append(e.state))
        sim_host.drop_clients()
        await wait_for(lambda: ConnState.DOWN in seen and seen[-1] == ConnState.UP, timeout=15)
        await pilot.pause()
        assert "demo ● up" in str(status.render()) and not app.query_one(LinkBanner).has_class("-shown")


async def test_a_lost_link_is_said_over_the_panes_until_it_is_back(tmp_path: Path) -> None:
    from console.remote import ConnectionEvent
    from console.ui.messages import ConnectionChanged

    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=FakeTelemetry()))
    async with app.run_test(size=(80, 24)) as pilot:
        banner, panes = app.query_one(LinkBanner), app.query_one("#panes")
        for event in (ConnectionEvent("gpu1", ConnState.CONNECTING), ConnectionEvent("gpu1", ConnState.UP, rtt_s=0.01)):
            app.post_message(ConnectionChanged(event))
            await pilot.pause()
            assert not banner.has_class("-shown")  # connecting for the first time is not a lost link
        app.post_message(ConnectionChanged(ConnectionEvent("gpu1", ConnState.DOWN, reason="connection lost")))
        await pilot.pause()
        app.post_message(ConnectionChanged(ConnectionEvent("gpu1", ConnState.CONNECTING)))
        await pilot.pause()
        text = str(banner.render())
        assert banner.has_class("-shown") and panes.has_class("-link-lost")
        assert text.startswith("✕ link to local lost at ") and "(connection lost): panes show the last data seen" in text
        app.post_message(ConnectionChanged(ConnectionEvent("gpu1", ConnState.UP, rtt_s=0.01)))
        await pilot.pause()
        assert not banner.has_class("-shown") and not panes.has_class("-link-lost")  # up again: the banner goes


async def test_focus_moves_between_panes(tmp_path: Path) -> None:
    app = canned_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:

        def pane() -> str | None:
            focused = app._pane_of(app.focused)
            return focused.id if focused else None

        assert isinstance(app.focused, ProcessTable)
        await pilot.press("tab")
        assert pane() == "server"
        await pilot.press("4")
        assert pane() == "sweep"
        await pilot.press("shift+tab")
        assert pane() == "tasks"
        await pilot.press("1")
        assert isinstance(app.focused, ProcessTable)
        app.action_focus_pane("sweep")  # keys typed together arrive before the next idle
        app.action_toggle_zoom()
        assert app.zoomed is app.query_one("#sweep")


async def test_zoom_shows_one_pane_and_back(tmp_path: Path) -> None:
    async with canned_app(tmp_path).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("z")
        assert pilot.app.query_one("#gpus").display and not pilot.app.query_one("#server").display
        assert pilot.app.query_one(GpuPane).size.height >= 20  # eight GPUs and the table fit
        await pilot.press("2")  # focusing another pane while zoomed zooms that one
        assert pilot.app.query_one("#server").display and not pilot.app.query_one("#gpus").display
        await pilot.press("z")
        assert all(pilot.app.query_one(f"#{p}").display for p in ("gpus", "server", "tasks", "sweep"))


async def test_help_lists_every_key(tmp_path: Path) -> None:
    async with canned_app(tmp_path).run_test(size=(100, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(pilot.app.screen, HelpScreen)
        rows = pilot.app.screen.rows
        text = " ".join(f"{keys} {what}" for _, keys, what in rows)
        for words in ("K Kill every stray process", "space Tag or untag", "z Show the focused pane", "q Quit", "y Confirm"):
            assert words in text, words
        await pilot.press("escape")
        assert not isinstance(pilot.app.screen, HelpScreen)


async def test_themes_from_files_flag_and_palette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user_themes = tmp_path / "xdg" / "pivot" / "themes"
    user_themes.mkdir(parents=True)
    (user_themes / "mine.toml").write_text('name = "mine"\nprimary = "#ff00ff"\n')
    (user_themes / "broken.toml").write_text('name = "broken"\nprimary = "not a colour"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    app = canned_app(tmp_path, theme="pivot-16")
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        assert app.theme == "pivot-16"
        assert {"pivot-dark", "pivot-light", "pivot-16", "mine"} <= set(app.available_themes)
        assert any("broken.toml" in m for m in toasts(app))
        await pilot.press("ctrl+p")
        await pilot.press(*"theme: pivot-light")

        def offered() -> bool:  # the palette searches as it is typed into, in its own time
            if not isinstance(app.screen, CommandPalette):
                return False
            options = app.screen.query_one(OptionList)
            return options.highlighted is not None and "pivot-light" in str(options.get_option_at_index(options.highlighted).prompt)

        await wait_for(offered)
        await pilot.press("enter")
        await pilot.pause()
        assert app.theme == "pivot-light"


async def test_kill_dialog_cancel_then_confirm_on_canned_telemetry(tmp_path: Path) -> None:
    app = canned_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.query_one(GpuPane)
        assert pane.border_subtitle == "3 stray: K kills them"
        await pilot.press("K")
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill)
        assert [p.pid for p in dialog.plan.targets] == [2004, 2009, 2008]
        assert app.focused is not None and app.focused.id == "cancel"
        await pilot.press("enter")  # Enter on the fresh dialog cancels
        assert not isinstance(app.screen, ConfirmKill) and app.session.telemetry.killed == []  # type: ignore[attr-defined]
        await pilot.press("K", "y")
        await wait_for(lambda: app.session.telemetry.killed)  # type: ignore[attr-defined]
        assert app.session.telemetry.killed == [["2004:104:group", "2009:109:group", "2008:108:group"]]  # type: ignore[attr-defined]
    log = (tmp_path / "campaign" / "events.jsonl").read_text()
    assert '"kind": "kill"' in log and '"pids": [2004, 2009, 2008]' in log


async def test_k_on_a_sample_without_strays_looks_again_at_the_next(tmp_path: Path) -> None:
    """The sample on screen can predate a crash whose workers still hold memory: K waits for the next one."""
    import dataclasses

    app = canned_app(tmp_path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.pause()
        pane = app.query_one(GpuPane)
        crashed = pane.sample
        assert crashed is not None and crashed.stray
        pane.show(dataclasses.replace(crashed, procs=tuple(p for p in crashed.procs if not p.stray)))
        await pilot.press("K")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmKill)  # not yet: it looks at the next sample
        pane.show(crashed)
        await wait_for(lambda: isinstance(app.screen, ConfirmKill))
        assert [p.pid for p in app.screen.plan.targets] == [2004, 2009, 2008]  # type: ignore[attr-defined]
        await pilot.press("escape")
        pane.show(dataclasses.replace(crashed, procs=()))
        await pilot.press("K")
        pane.show(dataclasses.replace(crashed, procs=()))
        await wait_for(lambda: any(m.startswith("no stray processes (sampled at ") for m in toasts(app)))
        assert not isinstance(app.screen, ConfirmKill)


async def test_readonly_console_cannot_kill(tmp_path: Path) -> None:
    app = canned_app(tmp_path, readonly=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("K", "k")
        assert not isinstance(app.screen, ConfirmKill)
        assert app.query_one(GpuPane).border_subtitle == ""


async def test_local_mode_without_a_driver_says_so_once(tmp_path: Path) -> None:
    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path)
    app = PivotApp(Session(cfg, None, local=True, via="console"))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: "No NVIDIA driver" in str(app.query_one("#gpu-bars").render()), timeout=10)
        await pilot.pause()
        assert "no NVIDIA driver here" in str(app.query_one(HostStatus).render())
        assert "waiting for the first sample" not in str(app.query_one("#gpu-bars").render())


async def test_operator_kills_the_zombies_a_killed_server_left(sim_host_process: HostProcess) -> None:
    """The story: the server's main process dies, its workers and a zombie keep the memory,
    the operator kills them from the pane after confirming, and the GPUs come back."""
    cfg = sim_host_process.config
    app = PivotApp(Session(cfg, "demo", via="console"))
    async with app.run_test(size=(80, 24)) as pilot:
        conn = app.session.pool.get("demo")
        script = (
            f"setsid python3 -m console.sim.launch_server --model-path ~/models/kimi-k2.5-int4 --tp 8 "
            f"--port {free_port()} </dev/null >server.log 2>&1 & p=$!; echo $p > server.pid; {RECORD_BESIDE}; "
            "cat server.pid"
        )
        main_pid = int((await conn.run(["sh", "-c", script], cwd="~/.pivot")).stdout)
        pane = app.query_one(GpuPane)
        await wait_for(lambda: pane.sample is not None and len(pane.sample.procs) == 9, timeout=30)
        assert not pane.sample.stray  # type: ignore[union-attr]
        await conn.run(["kill", "-TERM", str(main_pid)])
        await wait_for(
            lambda: pane.sample is not None and len(pane.sample.procs) == 3 and any(p.zombie for p in pane.sample.procs), timeout=15
        )
        table = app.query_one(ProcessTable)
        await pilot.pause()
        rendered = " ".join(str(table.get_row_at(i)) for i in range(table.row_count))
        assert "zombie" in rendered and "orphan" in rendered and "stray" in rendered
        await pilot.press("z", "K")
        assert isinstance(app.screen, ConfirmKill)
        await pilot.press("y")
        await wait_for(lambda: "all GPUs idle" in str(app.query_one("#gpu-idle").render()), timeout=20)
        status = str(app.query_one("#gpu-status").render())
        assert "GPU 3:" in status and "GPU 7:" in status and "released in" in status, status


class StubbornTelemetry(FakeTelemetry):
    """The host refuses: one target is a zombie, the other may not be signalled by this user."""

    async def kill(self, targets: list[str], grace_s: float) -> list[dict]:
        self.killed.append(targets)
        out = []
        for t in targets:
            pid = int(t.split(":")[0])
            if pid == 2009:
                out.append({"pid": pid, "outcome": "zombie", "detail": "its parent 2004 must reap it", "ppid": 2004, "signals": []})
            else:
                out.append({"pid": pid, "outcome": "permission-denied", "detail": "SIGTERM: permission denied", "signals": ["TERM"]})
        return out


async def test_a_zombie_offers_its_parent_and_a_failed_kill_offers_the_hypervisor_cleanup(
    sim_config: config.Config, tmp_path: Path
) -> None:
    demo = sim_config.host("demo")
    marker = tmp_path / "cleaned"
    hypervisor = config.HostSpec(
        **{**demo.__dict__, "name": "hv", "role": "hypervisor", "cleanup": ("sh", "-c", f"echo cleaned > {marker}")}
    )
    cfg = config.Config(path=None, hosts={"hv": hypervisor}, campaign_dir=tmp_path / "campaign")
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=StubbornTelemetry()))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        pane = app.query_one(GpuPane)
        assert not app.query_one(GpuPane).check_action("kill_parent", ())
        await pilot.press("K", "y")
        await wait_for(lambda: pane.offered_parents == [2004])
        status = str(app.query_one("#gpu-status").render())
        assert "press p to kill its parent 2004" in status and "permission denied" in status
        assert "press c to run the cleanup command on hv" in status
        await pilot.press("p")
        assert isinstance(app.screen, ConfirmKill)
        assert [(p.pid, p.start_ticks) for p in app.screen.plan.targets] == [(2004, 104)]
        await pilot.press("n", "c")
        await pilot.pause()
        await pilot.press("y")
        await wait_for(marker.exists, timeout=15)
        await wait_for(lambda: "cleanup on hv: exit 0" in str(app.query_one("#gpu-status").render()))


@pytest.mark.slow  # ten seconds and more on 2 cores
async def test_server_pane_start_switch_and_crash_over_ssh(sim_host_process: HostProcess, tmp_path: Path) -> None:
    """Start the demo baseline, watch its log until ready, switch to EAGLE-3, see a crash with its last lines."""
    from textual.widgets import OptionList

    from console.server.state import ServerState
    from console.ui.widgets.server.log_view import LogView
    from console.ui.widgets.server.pane import ServerPane

    local = tmp_path / "profiles"
    local.mkdir()
    for name in ("baseline", "eagle3"):
        (local / f"t-{name}.toml").write_text(f'extends = "demo-{name}"\nport = {free_port()}\n')
    cfg = sim_host_process.config
    cfg = config.Config(**{**cfg.__dict__, "profiles_dir": local})
    app = PivotApp(Session(cfg, "demo", via="console"))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(ServerPane)
        options = app.query_one("#profiles", OptionList)

        def highlight(name: str) -> None:
            options.highlighted = [o.id for o in options.options].index(name)

        await pilot.press("2")
        await wait_for(lambda: pane.status.state != ServerState.UNKNOWN)  # its first poll: after the GPUs' first sample
        stopped = pane.status
        assert stopped.state == ServerState.STOPPED
        highlight("t-baseline")
        await pilot.press("S")
        await wait_for(lambda: pane.status.state == ServerState.READY, timeout=30)
        log = app.query_one(LogView)
        await wait_for(lambda: any("ready to roll" in line for line in log.lines_kept), timeout=10)
        assert [c.name for c in pane.checks if c.ok] == ["launcher", "model path", "GPUs idle", "port free", "flags known"]
        await wait_for(lambda: "t-baseline ready" in str(app.query_one(HostStatus).render()), timeout=10)  # its own message
        state = lambda: str(app.query_one("#server-state").render())
        first = state()
        await wait_for(lambda: state() != first and ", up " in state(), timeout=5)  # the uptime ticks

        highlight("t-eagle3")
        await pilot.press("W")
        assert "Switch from t-baseline to t-eagle3?" in app.screen.title_text  # type: ignore[attr-defined]
        await pilot.press("y")
        await wait_for(lambda: pane.status.state == ServerState.READY and pane.status.profile == "t-eagle3", timeout=40)

        await pilot.press("slash", *"TP3")
        await pilot.pause()
        assert log.shown and all("TP3" in line for line in log.shown)
        await pilot.press("escape")

        await app.session.pool.get("demo").run(["kill", "-KILL", "--", f"-{pane.status.pid}"])
        await wait_for(lambda: pane.status.state == ServerState.CRASHED, timeout=15)
        assert pane.status.log_tail and "last of" in str(app.query_one("#server-state").render())


async def test_the_log_follows_until_the_operator_scrolls_up(tmp_path: Path) -> None:
    from console.ui.widgets.server.log_view import LogView

    async with canned_app(tmp_path).run_test(size=(80, 24)) as pilot:
        log = pilot.app.query_one(LogView)
        for i in range(100):
            log.add(f"line {i}")
        await pilot.pause()
        assert log.following and log.scroll_offset.y == log.max_scroll_y
        for _ in range(2):  # zoomed and back: a resize keeps it at the bottom, with no new line to scroll it there
            await pilot.press("2", "z")
            await pilot.pause()
            assert log.following and log.scroll_offset.y == log.max_scroll_y
        log.add("after zoom")
        await pilot.pause()
        assert log.following and log.scroll_offset.y == log.max_scroll_y
        log.focus()
        await pilot.press("up")  # the operator scrolls up
        await pilot.pause()
        assert not log.following
        at = log.scroll_offset.y
        log.add("while reading")
        await pilot.pause()
        assert log.scroll_offset.y == at  # the operator's place is kept
        await pilot.press("end")
        await wait_for(lambda: log.following)
        # a layout change that moves the view (the preflight lines above it cleared) does not stop the following
        preflight = pilot.app.query_one("#preflight")
        preflight.update("\n".join(f"check {i}" for i in range(6)))
        await pilot.pause()
        log.add("while the checks show")
        preflight.update("")
        log.add("ready")
        await pilot.pause()
        assert log.following and log.scroll_offset.y == log.max_scroll_y


@pytest.mark.slow  # ten seconds and more on 2 cores
async def test_a_sweep_from_the_pane_over_ssh(sim_host_measured: HostProcess, tmp_path: Path) -> None:
    """Start a server, sweep it from the pane: the table fills level by level, the run is saved, the
    comparison with an earlier run of another profile appears by itself."""
    from textual.widgets import DataTable, Input

    from console.server.profiles import load_profiles
    from console.server.state import ServerState
    from console.sweep.runs.store import list_runs
    from console.ui.widgets.sweep.form import SweepForm
    from console.ui.widgets.sweep.pane import SweepPane
    from tests.fixtures_runs import EAGLE3, write_run

    local = tmp_path / "profiles"
    local.mkdir()
    (local / "t-baseline.toml").write_text(f'extends = "demo-baseline"\nport = {free_port()}\n')
    cfg = sim_host_measured.config
    cfg = config.Config(**{**cfg.__dict__, "profiles_dir": local})
    write_run(
        cfg.campaign_dir, "0-earlier-eagle3", "eagle3", {c: EAGLE3[c] for c in (1, 2)}, speculative=True, settings={"max_tokens": 24}
    )  # measured the same way: its comparison partner
    app = PivotApp(Session(cfg, "demo", via="console"))
    rang: list[int] = []
    app.bell = lambda: rang.append(1)  # type: ignore[method-assign]  # the terminal's bell, for the operator elsewhere
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.session.lifecycle is not None
        await app.session.lifecycle.start(load_profiles(*cfg.profile_dirs).get("t-baseline"))
        await wait_for(lambda: app.query_one("#server", ServerPane).status.state == ServerState.READY, timeout=30)
        await wait_for(lambda: len(rang) == 1, timeout=10)  # the server became ready
        await pilot.press("4", "n")
        assert isinstance(app.screen, SweepForm)
        app.screen.query_one("#levels", Input).value = "1,2"
        app.screen.query_one("#max_tokens", Input).value = "24"
        await pilot.click("#start")
        pane = app.query_one(SweepPane)
        await wait_for(lambda: pane.handle is not None, timeout=10)
        await wait_for(lambda: pane.handle is None, timeout=60)
        await wait_for(lambda: len(rang) == 2, timeout=10)  # the sweep finished
        assert [e.c for e in pane.levels] == [1, 2]
        assert app.query_one("#sweep-levels", DataTable).row_count == 2
        runs = [r for r in list_runs(cfg.campaign_dir) if r.profile == "t-baseline"]
        assert len(runs) == 1 and runs[0].state == "complete"
        assert (runs[0].dir / "levels.parquet").exists() and (runs[0].dir / "requests.parquet").exists()
        await wait_for(lambda: pane.comparison_text is not None, timeout=30)  # read and computed in a thread
        assert pane.comparison_text is not None and "recommendation:" in pane.comparison_text.plain


async def test_profiles_written_meanwhile_appear_when_the_server_pane_is_entered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import OptionList

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    async with canned_app(tmp_path).run_test(size=(100, 30)) as pilot:
        options = pilot.app.query_one("#profiles", OptionList)
        assert "mine" not in [o.id for o in options.options]
        (tmp_path / "xdg" / "pivot" / "profiles").mkdir(parents=True)
        (tmp_path / "xdg" / "pivot" / "profiles" / "mine.toml").write_text('extends = "baseline"\nport = 31111\n')
        await pilot.press("2")
        await pilot.pause()
        assert "mine" in [o.id for o in options.options]


async def test_tasks_pane_edits_live_and_saves_every_change(tmp_path: Path) -> None:
    from textual.widgets import DataTable

    from console.tasks.tasklist import TaskList
    from console.ui.widgets.tasks.pane import TasksPane

    app = canned_app(tmp_path)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        pane = app.query_one(TasksPane)
        await pilot.press("3", "a", *"Kill the old server", "enter")
        await pilot.press("a", *"Sweep the baseline", "enter")
        await pilot.pause()
        on_disk = TaskList(tmp_path / "campaign").load()
        assert [t.content for t in on_disk.tasks] == ["Kill the old server", "Sweep the baseline"]
        table = app.query_one("#tasks-table", DataTable)
        table.move_cursor(row=0)
        await pilot.press("s")
        table.move_cursor(row=1)
        await pilot.press("s")  # a second task in progress is refused…
        await pilot.pause()
        assert [t.status for t in loaded(pane).tasks] == ["in_progress", "pending"]
        assert any("already in progress" in m for m in toasts(app))
        table.move_cursor(row=0)
        await pilot.press("d", "p")
        await pilot.pause()
        assert pane.border_title == "Tasks — 1 of 2 done"
        assert [(t.status, t.priority) for t in TaskList(tmp_path / "campaign").load().tasks] == [
            ("completed", "low"),
            ("pending", "medium"),
        ]
        await pilot.press("f")
        assert table.row_count == 1
        other = TaskList(tmp_path / "campaign").load()  # a second console adds a task
        other.add("Added elsewhere")
        await wait_for(lambda: any(t.content == "Added elsewhere" for t in loaded(pane).tasks), timeout=5)


async def test_a_runbook_run_from_the_tasks_pane_drives_the_other_panes(sim_host_process: HostProcess, tmp_path: Path) -> None:
    from textual.widgets import Input

    from console.server.state import ServerState
    from console.ui.widgets.server.pane import ServerPane
    from console.ui.widgets.sweep.pane import SweepPane
    from console.ui.widgets.tasks.pane import TasksPane
    from tests.fixtures_runs import EAGLE3, write_run

    local = tmp_path / "profiles"
    (local / "runbooks").mkdir(parents=True)
    (local / "t-baseline.toml").write_text(f'extends = "demo-baseline"\nport = {free_port()}\n')
    (local / "runbooks" / "mini.toml").write_text(
        '[[tasks]]\ncontent = "Verify the GPUs are idle"\naction = "verify-idle"\n'
        '[[tasks]]\ncontent = "Start the baseline"\naction = "switch t-baseline"\n'
        '[[tasks]]\ncontent = "Sweep it"\naction = "sweep levels=1,2 max_tokens=16"\n'
        '[[tasks]]\ncontent = "Compare"\naction = "compare previous last"\n'
    )
    cfg = sim_host_process.config
    cfg = config.Config(**{**cfg.__dict__, "profiles_dir": local})
    write_run(cfg.campaign_dir, "0-eagle3", "eagle3", {c: EAGLE3[c] for c in (1, 2)}, speculative=True, settings={"max_tokens": 16})
    app = PivotApp(Session(cfg, "demo", via="console"))
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(TasksPane)
        await pilot.press("3", "L")
        app.screen.query_one(Input).value = "mini"
        await pilot.press("enter")
        await pilot.pause()
        assert [t.action for t in loaded(pane).tasks] == [
            "verify-idle",
            "switch t-baseline",
            "sweep levels=1,2 max_tokens=16",
            "compare previous last",
        ]
        await pilot.press("R")
        detail = lambda: str(app.query_one("#tasks-detail").render())
        # the cursor follows the step being run, and its live line is shown under it
        await wait_for(lambda: pane.current_number == 2 and "2. Start the baseline  [switch t-baseline]" in detail(), timeout=60)
        await wait_for(lambda: [t.status for t in loaded(pane).tasks] == ["completed"] * 4, timeout=120)
        await wait_for(lambda: app.query_one(ServerPane).status.state == ServerState.READY, timeout=15)
        sweep = app.query_one(SweepPane)
        assert [e.c for e in sweep.levels] == [1, 2]
        await wait_for(lambda: sweep.comparison_text is not None, timeout=30)
        assert "recommendation:" in sweep.comparison_text.plain  # type: ignore[union-attr]
        assert pane.border_title == "Tasks — 4 of 4 done"


async def test_the_event_log_view_lists_what_the_console_did(tmp_path: Path) -> None:
    from textual.widgets import DataTable

    from console.ui.screens.event_log import EventLogScreen

    app = canned_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await pilot.press("K", "y")
        await wait_for(lambda: app.session.telemetry.killed)  # type: ignore[attr-defined]
        await pilot.press("3", "a", *"Check [the] log", "enter")
        await pilot.press("E")  # read from the log's end in a thread: the screen comes when it is read
        await wait_for(lambda: isinstance(app.screen, EventLogScreen))
        assert isinstance(app.screen, EventLogScreen)
        table = app.screen.query_one(DataTable)
        kinds = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert kinds == ["kill", "task"]
        assert "content=Check [the] log" in str(table.get_row_at(1)[2])  # brackets shown as they are


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_chart_has_its_legend_under_it_and_the_comparison_scrolls(tmp_path: Path, size: tuple[int, int]) -> None:
    from tests.fixtures_runs import BASELINE, EAGLE3, write_run

    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path / "campaign", "spec", "eagle3", EAGLE3, speculative=True)
    async with canned_app(tmp_path).run_test(size=size) as pilot:
        app = pilot.app
        await pilot.press("4", "z")
        pane, chart = app.query_one(SweepPane), app.query_one(SweepChart)
        legend = "• base (baseline)  ⣿ spec (eagle3)  x per-request tok/s (right axis)"
        # drawn with the earlier run read (in its thread), laid out at its zoomed height, nothing left to redraw
        await wait_for(
            lambda: chart.size.height and not pane.redraw_due and legend in str(app.query_one("#sweep-progress").render()), timeout=30
        )
        drawn = "".join(strip.text for strip in chart.render_lines(chart.region.reset_offset))
        assert "base (baseline)" not in drawn and "⅃" not in drawn  # plotext's own legend, which marks axes with L and ⅃
        await pilot.press("c")
        await compared(pilot)
        box = app.query_one("#sweep-compare")
        assert app.focused is box  # the arrows reach every level of a comparison taller than the pane
        await pilot.press("end")
        await wait_for(lambda: box.scroll_y == box.max_scroll_y)
        assert box.region.bottom <= app.query_one("#sweep").content_region.bottom
        await pilot.press("c")
        assert app.focused is app.query_one("#sweep-levels")
        # narrower than the legend: each entry whole on a line, never its marker on one and its name on the next
        assert chart.legend_text(30).plain.split("\n") == ["• base (baseline)", "⣿ spec (eagle3)", "x per-request tok/s (right axis)"]


async def test_the_comparison_offers_the_adaptive_profile_it_recommends(tmp_path: Path) -> None:
    from tests.fixtures_runs import BASELINE, EAGLE3, write_run

    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path / "campaign", "spec", "eagle3", EAGLE3, speculative=True)
    cfg = config.Config(path=tmp_path / "pivot.toml", hosts={}, campaign_dir=tmp_path / "campaign")
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=FakeTelemetry()))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4", "w")
        assert not isinstance(app.screen, Confirm)  # nothing compared yet: nothing to write
        await pilot.press("c")
        await compared(pilot)
        await pilot.press("w")
        assert isinstance(app.screen, Confirm)
        body = " ".join(str(s.render()) for s in app.screen.query(".body"))
        assert "drafting for running batches up to 1 (measured C ≤ 1), off from 2" in body and "no host configured" in body
        assert not (tmp_path / "profiles" / "eagle3-adaptive.toml").exists()  # nothing written before it is confirmed
        await pilot.press("y")
        profile = tmp_path / "profiles" / "eagle3-adaptive.toml"
        await wait_for(profile.exists)
        text = profile.read_text()
        assert 'extends = "eagle3"' in text and "speculative-adaptive = true" in text
        config_file = tmp_path / "profiles" / "eagle3-adaptive.json"
        assert json.loads(config_file.read_text()) == {"1": {"candidate_steps": [3]}, "2": {"candidate_steps": [0]}}
        assert any(e["kind"] == "profile" and e["name"] == "eagle3-adaptive" for e in app.session.events.read())


async def test_c_shows_again_the_comparison_last_shown_until_a_newer_run_measures(tmp_path: Path) -> None:
    from tests.fixtures_runs import BASELINE, EAGLE3, write_run

    campaign = tmp_path / "campaign"
    for name, profile, numbers, spec in (
        ("r1-base", "baseline", BASELINE, False),
        ("r2-spec", "eagle3", EAGLE3, True),
        ("r3-adapt", "eagle3-adaptive", EAGLE3, True),
    ):
        write_run(campaign, name, profile, numbers, speculative=spec)
    async with canned_app(tmp_path).run_test(size=(120, 40)) as pilot:
        pane = pilot.app.query_one(SweepPane)
        await pilot.press("4")
        pane.show_comparison(*(open_run(campaign, n) for n in ("r1-base", "r3-adapt")))  # as an adaptive profile's check does
        await compared(pilot)
        await pilot.press("c")
        assert not pane.comparing
        await pilot.press("c")
        await compared(pilot)
        assert pane.comparison and (pane.comparison.a.name, pane.comparison.b.name) == ("r1-base", "r3-adapt")  # not the two newest
        await pilot.press("c")
        write_run(campaign, "r4-spec2", "eagle3", EAGLE3, speculative=True)
        await pilot.press("c")
        await wait_for(lambda: pane.comparing and pane.comparison is not None and pane.comparison.b.name == "r4-spec2", timeout=30)
        assert pane.comparison.a.name == "r3-adapt"  # a newer run: the two newest again


async def test_without_a_managed_server_the_comparison_offers_only_w_and_u_says_why_it_measures_nothing(tmp_path: Path) -> None:
    from tests.fixtures_runs import BASELINE, EAGLE3, write_run

    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False, spread=0.05)
    write_run(tmp_path / "campaign", "spec", "eagle3", EAGLE3, speculative=True, spread=0.05)
    async with canned_app(tmp_path).run_test(size=(120, 40), notifications=True) as pilot:  # local mode: no server lifecycle
        app = pilot.app
        await pilot.press("4", "c")
        await compared(pilot)
        said = app.query_one(SweepPane).comparison_text
        assert said is not None and "w writes the adaptive profile\n" in said.plain and "u measures" not in said.plain
        for key in ("u", "f"):
            await pilot.press(key)
        await wait_for(lambda: sum("this console manages no server" in m for m in toasts(app)) == 2)
        assert not any(w.group == "refine" for w in app.query_one(SweepPane).workers) and not isinstance(app.screen, Confirm)


async def test_the_campaign_s_last_run_waits_for_the_gpus_first_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPUs first: the Sweep pane reads the campaign's last run (polars, in a thread that still holds the GIL the
    first screen's drawing needs) once the first sample is drawn, not at its mount."""
    from console.ui import app as app_module
    from tests.fixtures_runs import BASELINE, write_run

    class Held(FakeTelemetry):
        def __init__(self) -> None:
            super().__init__()
            self.release = asyncio.Event()

        async def sample_once(self) -> Sample | AgentError:
            await self.release.wait()
            return await super().sample_once()

    monkeypatch.setattr(app_module, "FIRST_SAMPLE_WAIT_S", 3600.0)  # no sample at all: the rest comes after this
    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False)
    telemetry = Held()
    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=telemetry))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(SweepPane)
        await wait_for(lambda: "waiting for the first sample" in str(app.query_one("#gpu-bars").render()))
        await pilot.pause()
        assert pane.run is None and not any(w.group == "sweep-load" for w in pane.workers)
        telemetry.release.set()
        await wait_for(lambda: pane.run is not None and pane.run.name == "base")
        assert "waiting for the first sample" not in str(app.query_one("#gpu-bars").render())


async def test_zoomed_from_a_short_pane_the_arrows_reach_every_level(tmp_path: Path) -> None:
    """At 80x24 the four-pane Sweep pane is too short for its level table and holds the focus itself; zoomed, the
    table is shown and takes the focus, so that the arrows scroll to C=250."""
    from tests.fixtures_runs import BASELINE, write_run

    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False)
    async with canned_app(tmp_path).run_test(size=(80, 24)) as pilot:
        app = pilot.app
        await pilot.press("4")
        await settled(pilot)
        focused = app.focused
        assert focused is app.query_one(SweepPane)
        await pilot.press("z")
        table = app.query_one("#sweep-levels", LevelTable)
        await wait_for(lambda: app.focused is table)
        await pilot.press(*["down"] * 7)
        await wait_for(lambda: table.cursor_row == 7 and table.scroll_y == table.max_scroll_y > 0)


async def test_w_says_why_no_adaptive_profile_is_written(tmp_path: Path) -> None:
    from tests.fixtures_runs import BASELINE, write_run

    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path / "campaign", "base2", "baseline", BASELINE, speculative=False)
    cfg = config.Config(path=tmp_path / "pivot.toml", hosts={}, campaign_dir=tmp_path / "campaign")
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=FakeTelemetry()))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("4", "c")
        await compared(pilot)
        await pilot.press("w")
        assert not isinstance(app.screen, Confirm)
        said = toasts(app)
        assert any(m.startswith("no adaptive profile: base (baseline) and base2 (baseline) neither drafts") for m in said)
        assert not (tmp_path / "profiles").exists()


async def test_readonly_is_said_in_the_header_and_when_a_removed_key_is_tried(tmp_path: Path) -> None:
    from console.ui.widgets.host_status import HostStatus

    app = canned_app(tmp_path, readonly=True)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await wait_for(lambda: "read-only" in str(app.query_one(HostStatus).render()))
        await pilot.press("K")  # kill stray, removed
        await pilot.pause()
        assert app.session.telemetry.killed == []  # type: ignore[attr-defined]
        said = toasts(app)
        assert any(m.startswith("read-only: kill stray is off") for m in said), said
        await pilot.press("3", "a")  # a task: removed too, and the empty list does not advertise it
        await pilot.pause()
        assert not isinstance(app.screen, TextPrompt)
        assert "a adds one" not in str(app.query_one("#tasks-detail").render())
        assert "K kills them" not in (app.query_one("#gpus").border_subtitle or "")


async def test_every_panes_footer_fits_80_columns_quit_included(tmp_path: Path) -> None:
    from textual.widgets._footer import FooterKey

    from tests.fake_telemetry import FakeLifecycle

    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=FakeTelemetry(), lifecycle=FakeLifecycle()))
    async with app.run_test(size=(80, 24)) as pilot:
        for pane in "1234":
            await pilot.press(pane)
            await pilot.pause()
            keys = [k for k in app.query(FooterKey) if k.display]
            assert keys[-1].description == "Quit", pane
            assert all(k.region.right <= 80 and k.region.width >= len(k.key_display) + len(k.description) for k in keys), [
                (k.description, k.region) for k in keys
            ]


async def test_no_driver_is_said_once_in_place_of_the_bars_and_wraps_at_the_panes_width(tmp_path: Path) -> None:
    from console.gpu.samples import AgentError
    from console.ui.widgets.gpu.bars import GpuBars

    class NoDriver(FakeTelemetry):
        async def sample_once(self) -> AgentError:
            return AgentError("no-driver", "nvidia-smi not found on PATH: no NVIDIA driver on this host (a CPU box?)")

    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=NoDriver()))
    async with app.run_test(size=(120, 36)) as pilot:
        bars = app.query_one(GpuBars)
        await wait_for(lambda: bars.absent is not None)
        await pilot.pause()
        shown = bars.render()
        assert "waiting for the first sample" not in str(shown) and "(a CPU box?)" in str(shown)
        assert bars.size.height >= 2  # wrapped to the pane's width (some 58 columns), not cut at its edge


async def test_each_ticking_age_and_changed_cell_is_drawn_in_the_process_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server's first minute: every AGE ticks each second, and the table draws those cells again without the
    rest of the table; what is drawn must be the new value, never a stale render."""
    import asyncio
    import types

    from console.gpu.samples import Sample, parse_line
    from console.ui.widgets.gpu import processes
    from tests.fake_telemetry import canned_sample_line

    clock = [time.time()]
    monkeypatch.setattr(processes, "time", types.SimpleNamespace(time=lambda: clock[0]))
    samples: asyncio.Queue[str] = asyncio.Queue()

    class Ticking(FakeTelemetry):
        async def events(self) -> AsyncGenerator[TelemetryEvent, None]:
            while True:
                sample = parse_line(await samples.get(), "nvidia-smi")
                assert isinstance(sample, Sample)
                yield sample

    def line(started: float, state: str = "S") -> str:
        row = canned_sample_line(started + 3600).replace(
            '"state": "S", "cmd": "sglang::scheduler_TP7"', f'"state": "{state}", "cmd": "sglang::scheduler_TP7"'
        )
        return row

    def drawn(table: ProcessTable) -> list[str]:
        return [table.render_line(y).text for y in range(1, table.row_count + 1)]

    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=Ticking()))
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(ProcessTable)
        started = clock[0] - 5
        samples.put_nowait(line(started))
        await wait_for(lambda: table.row_count == 3 and all(" 5s " in row for row in drawn(table)))
        for seconds in (6, 7, 42):
            clock[0] = started + seconds
            samples.put_nowait(line(started))
            await wait_for(lambda: all(f" {seconds}s " in row for row in drawn(table)))  # noqa: B023 - awaited here
            await pilot.pause()
        clock[0] = started + 43
        samples.put_nowait(line(started, state="D"))
        await wait_for(lambda: sum(" 43s " in row and " D " in row for row in drawn(table)) == 1)
        assert sum(" S " in row for row in drawn(table)) == 1  # the zombie's Z and the other scheduler's S unchanged


async def test_a_long_command_keeps_its_name_and_the_table_never_scrolls_sideways(tmp_path: Path) -> None:
    from console.gpu.samples import Sample, parse_line
    from console.ui.text import elide
    from tests.fake_telemetry import canned_sample_line

    assert elide("sglang::scheduler_TP3_ipc_helper", 20) == "sglang::s…ipc_helper"
    assert elide("short", 20) == "short" and elide("x" * 40, None) == "x" * 40
    long = "/home/ml/venvs/sglang-0.5.23/bin/python3 -m sglang.launch_server --model-path /shared/kimi --tp 8 rank7"

    class LongCommand(FakeTelemetry):
        async def sample_once(self) -> Sample:
            sample = parse_line(canned_sample_line().replace("sglang::scheduler_TP7", long), "nvidia-smi")
            assert isinstance(sample, Sample)
            return sample

    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=LongCommand()))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("z")
        table = app.query_one(ProcessTable)
        await wait_for(lambda: table.row_count == 3 and table.size.width)
        await pilot.pause()
        shown = next(str(table.get_row_at(i)[-1]) for i in range(3) if str(table.get_row_at(i)[-1]).endswith("rank7"))
        # the executable's name and the module it runs, then the end (issue 36: `…er 4.0` named nothing)
        assert shown.startswith("sglang.") and shown.endswith("rank7") and len(shown) < 40
        assert table.max_scroll_x == 0  # nothing to scroll to: no sideways scrollbar


async def test_v_flips_the_chart_to_the_frontier_and_back(tmp_path: Path) -> None:
    """Total tok/s per GPU against a user's tok/s, each run a curve: the second view of the Sweep pane's chart."""
    from tests.fixtures_runs import BASELINE, EAGLE3, write_run

    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False, gpu_count=8)
    write_run(tmp_path / "campaign", "spec", "eagle3", EAGLE3, speculative=True, gpu_count=8)
    async with canned_app(tmp_path).run_test(size=(120, 40)) as pilot:
        app = pilot.app
        await pilot.press("4", "z")
        pane, chart = app.query_one(SweepPane), app.query_one(SweepChart)
        await wait_for(lambda: chart.legend and not pane.redraw_due)
        drawn = lambda: "".join(strip.text for strip in chart.render_lines(chart.region.reset_offset))
        await wait_for(lambda: "concurrency C (log scale)" in drawn())  # laid out once shown (a class, then a refresh)
        await pilot.press("v")
        await wait_for(lambda: not pane.redraw_due and "a user's tok/s" in drawn())
        assert "total tok/s per GPU" in drawn() and "96.6" in drawn()  # 773 tok/s over 8 GPUs at C = 250
        await pilot.press("v")
        await wait_for(lambda: not pane.redraw_due and "concurrency C (log scale)" in drawn())


async def test_v_and_y_say_what_they_changed_when_the_pane_is_too_short_to_draw_the_chart(tmp_path: Path) -> None:
    """At 80x24 the unzoomed Sweep pane shows a line of numbers, not the chart: v and y say what the chart now shows
    (and that z shows it) instead of seeming to do nothing."""
    from tests.fixtures_runs import BASELINE, write_run

    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False, gpu_count=8)
    async with canned_app(tmp_path).run_test(size=(80, 24), notifications=True) as pilot:
        app = pilot.app
        chart = app.query_one(SweepChart)
        await pilot.press("4")
        await wait_for(lambda: chart.display and chart.size.height > 0)
        assert chart.is_compact
        await pilot.press("v")
        await wait_for(lambda: any("a user's tok/s (z shows it)" in m for m in toasts(app)))
        await pilot.press("y")
        await wait_for(lambda: any("second series: TTFT p50 ms (z shows it)" in m for m in toasts(app)))


@pytest.mark.parametrize("answer", ["a", "l"])
async def test_q_during_a_sweep_asks_and_loses_no_finished_request(sim_host_process: HostProcess, tmp_path: Path, answer: str) -> None:
    """`q` during a sweep quit at once and ended the load generator on the host: the level in flight was lost (issue
    36). It asks now: abort keeping what finished (`a`), or leave the level to the host (`l`), whose spool a resume
    fetches; either way `pivot sweep --resume` completes the run."""
    import asyncio
    import subprocess
    import sys

    from textual.widgets import Input

    from console.server.profiles import load_profiles
    from console.server.state import ServerState
    from console.sweep.runs.store import list_runs
    from console.ui.screens.choose import Choose
    from console.ui.widgets.sweep.pane import SweepPane

    local = tmp_path / "profiles"
    local.mkdir()
    (local / "t-baseline.toml").write_text(f'extends = "demo-baseline"\nport = {free_port()}\n')
    config_path = tmp_path / "pivot.toml"
    config_path.write_text(sim_host_process.config_path.read_text().replace("[hosts.demo]", f'profiles_dir = "{local}"\n\n[hosts.demo]'))
    cfg = config.load(config_path)
    app = PivotApp(Session(cfg, "demo", via="console"))
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.session.lifecycle is not None
        await app.session.lifecycle.start(load_profiles(*cfg.profile_dirs).get("t-baseline"))
        await wait_for(lambda: app.query_one("#server", ServerPane).status.state == ServerState.READY, timeout=60)
        await pilot.press("4", "n")
        app.screen.query_one("#levels", Input).value = "2,4"
        app.screen.query_one("#requests", Input).value = "150"
        app.screen.query_one("#max_tokens", Input).value = "256"
        await pilot.click("#start")
        pane = app.query_one(SweepPane)
        await wait_for(lambda: pane.handle is not None and pane.handle.on_host is not None, timeout=30)
        handle = pane.handle
        assert handle is not None
        await wait_for(lambda: sum(1 for line in (handle.run.dir / "events.jsonl").read_text().splitlines() if '"request"' in line) >= 3)
        await pilot.press("q")
        await wait_for(lambda: isinstance(app.screen, Choose))
        await pilot.press("n")  # Cancel: the sweep goes on
        await pilot.pause()
        assert not isinstance(app.screen, Choose) and handle.end is None
        await pilot.press("q")
        await wait_for(lambda: isinstance(app.screen, Choose))
        await pilot.press(answer)
        await wait_for(lambda: not app.is_running, timeout=60)
    run = next(r for r in list_runs(cfg.campaign_dir) if r.name == handle.run.name)
    if answer == "a":
        [level] = run.levels()
        assert level.c == 2 and level.measured and level.lacking > 0  # what finished is kept
    else:
        assert (run.dir / "host-spool.json").exists()  # the host measures the level to its end; the resume fetches it
    resumed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "console", "--config", str(config_path), "sweep", "--resume", run.name],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    run = next(r for r in list_runs(cfg.campaign_dir) if r.name == handle.run.name)
    assert run.state == "complete" and [(lv.c, lv.requests, lv.lacking) for lv in run.levels()] == [(2, 150, 0), (4, 150, 0)]
    stop = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "console", "--config", str(config_path), "server", "stop"], capture_output=True, timeout=120
    )
    assert stop.returncode == 0


async def test_w_u_and_f_say_why_when_no_comparison_is_shown(tmp_path: Path) -> None:
    """With no comparison on screen, `w`, `u` and `f` did nothing and said nothing (issue 36); `c` said why."""
    async with canned_app(tmp_path).run_test(size=(80, 24), notifications=True) as pilot:
        app = pilot.app
        await pilot.press("4", "w", "u", "f")
        await wait_for(lambda: sum("acts on the comparison on screen: c shows one first" in m for m in toasts(app)) == 3)
        said = toasts(app)
        assert any(m.startswith("w (an adaptive profile)") for m in said) and any(m.startswith("f (refine") for m in said)


async def test_the_sweep_form_tidies_levels_and_names_what_it_refuses(tmp_path: Path) -> None:
    """Levels `5,1,1,100000` started a sweep with a duplicate, out of order, at C=100000; `0,-3,abc,1e9` read "levels,
    max_tokens and the prompt length are whole numbers" (which?) (issue 36)."""
    from textual.widgets import Button, Input, Label

    from console.settings import SweepSettings
    from console.ui.widgets.sweep.form import SweepForm

    chosen: list[SweepSettings | None] = []
    async with canned_app(tmp_path).run_test(size=(100, 30), notifications=True) as pilot:
        app = pilot.app
        app.push_screen(SweepForm(SweepSettings()), chosen.append)
        await pilot.pause()
        form = app.screen
        assert isinstance(form, SweepForm)
        error = lambda: str(form.query_one("#error", Label).render())
        form.query_one("#levels", Input).value = "0,-3,abc"
        form.on_button_pressed(Button.Pressed(form.query_one("#start", Button)))
        assert error() == "Levels: '0' is not a positive whole number"
        form.query_one("#levels", Input).value = "5,1,1"
        form.query_one("#max_tokens", Input).value = "1e9"
        form.on_button_pressed(Button.Pressed(form.query_one("#start", Button)))
        assert error() == "max_tokens: '1e9' is not a whole number"
        form.query_one("#max_tokens", Input).value = "64"
        form.query_one("#levels", Input).value = "5,1,1,100000"
        form.on_button_pressed(Button.Pressed(form.query_one("#start", Button)))
        assert "C=100000 is more than 4096 requests in flight" in error() and chosen == []
        form.on_button_pressed(Button.Pressed(form.query_one("#start", Button)))  # asked once: Start again goes ahead
        await pilot.pause()
        assert chosen and chosen[0] is not None and chosen[0].levels == (1, 5, 100000)
        assert any("1 given more than once: measured once; levels are measured in rising order" in m for m in toasts(app))


def test_a_command_keeps_the_script_it_runs() -> None:
    """A CUDA worker `python3 …/workload.py worker 4.0` read as the interpreter's path head and `…er 4.0` (issue 36)."""
    from console.ui.text import fit_command

    worker = "/home/u/ml-env/bin/python3 /home/u/bench/workload.py worker 4.0"
    assert fit_command(worker, 40) == "…/python3 …/workload.py worker 4.0"
    assert fit_command(worker, 18).startswith("workload.py") and fit_command(worker, 18).endswith("4.0")
    assert fit_command("sglang::scheduler_TP3_ipc_helper", 20) == "sglang::s…ipc_helper"
    assert fit_command(worker, None) == worker


async def test_t_asks_with_the_plan_before_it_tunes_the_running_drafting_profile(sim_host_process: HostProcess, tmp_path: Path) -> None:
    """`t` is pivot tune of the profile the server runs: the plan (servers, levels, requests) is asked about first;
    declined, no profile is written and nothing is measured. Without a managed server it says so."""

    from console.server.profiles import load_profiles
    from console.server.state import ServerState
    from console.ui.widgets.sweep.pane import SweepPane

    local = tmp_path / "profiles"
    local.mkdir()
    (local / "t-eagle3.toml").write_text(f'extends = "demo-eagle3"\nport = {free_port()}\n')
    config_path = tmp_path / "pivot.toml"
    config_path.write_text(sim_host_process.config_path.read_text().replace("[hosts.demo]", f'profiles_dir = "{local}"\n\n[hosts.demo]'))
    cfg = config.load(config_path)
    app = PivotApp(Session(cfg, "demo", via="console"))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        assert app.session.lifecycle is not None
        await app.session.lifecycle.start(load_profiles(*cfg.profile_dirs).get("t-eagle3"))
        await wait_for(lambda: app.query_one("#server", ServerPane).status.state == ServerState.READY, timeout=60)
        await pilot.press("4", "t")
        await wait_for(lambda: isinstance(app.screen, Confirm), timeout=30)
        shown = " ".join(str(w.render()) for w in app.screen.query("Static"))
        assert "Tune t-eagle3?" in shown and "servers to measure" in shown and "t-eagle3-nodraft" in shown
        await pilot.press("escape")
        await wait_for(lambda: any("tune stopped: not confirmed: nothing was measured" in m for m in toasts(app)))
        assert sorted(p.name for p in local.iterdir()) == ["t-eagle3.toml"]
        assert not any(w.is_running for w in app.query_one(SweepPane).workers if w.group == "refine")
    async with canned_app(tmp_path / "local").run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("4", "t")
        await wait_for(lambda: any("this console manages no server" in m for m in toasts(pilot.app)))

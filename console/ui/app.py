"""The pivot console: one screen, four panes, driven by the core over one SSH connection."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TypeVar

from rich.console import RenderableType
from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult, ScreenStackError, SystemCommand
from textual.binding import Binding
from textual.containers import Container
from textual.filter import LineFilter
from textual.notifications import Notification, SeverityLevel
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, TextArea
from textual.worker import Worker, WorkerState

from console.config import pivot_command
from console.gpu.samples import AgentError, Sample
from console.gpu.telemetry import EarlyStream
from console.remote.connection import ConnectionEvent
from console.remote.errors import RemoteError
from console.server.slurm import node_line
from console.session import Session
from console.sweep.model import LevelDone
from console.sweep.runs.store import open_run_dir
from console.sweep.sweeps import SweepHandle
from console.sweep.words.levels import kept_text
from console.ui.colours import Recolour
from console.ui.log_bridge import ScreenLog
from console.ui.messages import ConnectionChanged, ShowComparison, StatusChanged, TelemetryUpdate
from console.ui.screens.help import HelpScreen
from console.ui.themes import DEFAULT_THEME, load_themes, variable_defaults
from console.ui.widgets.gpu.bars import GpuBars
from console.ui.widgets.gpu.pane import GpuPane
from console.ui.widgets.gpu.processes import ProcessTable
from console.ui.widgets.host_status import HostStatus
from console.ui.widgets.link_banner import LinkBanner
from console.ui.widgets.pane import Pane
from console.ui.widgets.problem import backoff, failure, pane_problem
from console.ui.widgets.server.pane import ServerPane
from console.ui.widgets.sweep.pane import SweepPane
from console.ui.widgets.tasks.pane import TasksPane
from console.untrusted import visible

IMPORT_LATER = ("polars", "aiohttp", "console.sweep.loadgen.server_view")  # not before the first screen; not on the loop either
FIRST_SAMPLE_WAIT_S = 2.0  # the rest of the screen waits this long at most for the GPUs' first sample (_rest_of_screen)


def _import_later() -> None:
    for name in IMPORT_LATER:
        importlib.import_module(name)


PANES = ("gpus", "server", "tasks", "sweep")
JOB_GPUS_S = 5.0  # a Slurm login node: how often its job's nodes are sampled (each time a short srun step)
W = TypeVar("W", bound=Widget)
WIDE_COLUMNS = 160  # from this many columns the right-hand panes (the Server log, the Sweep chart) get the wider share
TALL_ROWS = 40  # from this many rows the lower panes (Tasks, Sweep) get as many rows as the upper ones


class PivotApp(App[None]):
    TITLE = "pivot"
    CSS_PATH = ["styles/app.tcss"]
    _recolour: Recolour | None = None  # the line filter for the theme variables in use (get_line_filters)
    BINDINGS = [
        Binding("tab", "focus_next_pane", "Next pane", show=False, id="app.next", tooltip="Move the focus to the next pane"),
        Binding(
            "shift+tab",
            "focus_previous_pane",
            "Previous pane",
            show=False,
            id="app.previous",
            tooltip="Move the focus to the previous pane",
        ),
        # priority: taken in the order typed, before the keys behind them are routed (`4n` then the form's levels);
        # off while a field or a dialog has the keys (check_action)
        Binding("1", "focus_pane('gpus')", "GPUs", show=False, priority=True, id="app.gpus", tooltip="Focus the GPU pane"),
        Binding("2", "focus_pane('server')", "Server", show=False, priority=True, id="app.server", tooltip="Focus the Server pane"),
        Binding("3", "focus_pane('tasks')", "Tasks", show=False, priority=True, id="app.tasks", tooltip="Focus the Tasks pane"),
        Binding("4", "focus_pane('sweep')", "Sweep", show=False, priority=True, id="app.sweep", tooltip="Focus the Sweep pane"),
        Binding("z", "toggle_zoom", "Zoom", id="app.zoom", tooltip="Show the focused pane on the whole screen, or all panes again"),
        Binding("r", "reconnect", "Reconnect", show=False, id="app.reconnect", tooltip="Drop and re-establish the SSH connection"),
        Binding("question_mark,f1", "help", "Help", id="app.help", tooltip="Every key, pane by pane"),
        Binding(
            "E", "event_log", "Events", show=False, id="app.events", tooltip="The campaign's event log: kills, starts, sweeps, task changes"
        ),
        Binding("ctrl+p", "command_palette", "Palette", show=False, id="app.palette", tooltip="Commands for the current state"),
        Binding(
            "q",
            "quit_asking",
            "Quit",
            id="app.quit",
            tooltip="Quit (the server and processes on the host are left as they are; a sweep in progress asks first)",
        ),
    ]

    def __init__(
        self,
        session: Session,
        *,
        theme: str | None = None,
        readonly: bool = False,
        notes: list[str] | None = None,
        telemetry: EarlyStream | None = None,
        host_outlives: bool = True,
        in_fleet: bool = False,
    ):
        """The session holds what every pane works with: config, connection, telemetry, lifecycle, sweeps, events.
        notes: lines the help screen shows first. telemetry: the session's telemetry stream, already started (else the
        app starts reading it when mounted). host_outlives: whether the host goes on after this console (not the
        demo's, which ends with it: a sweep cannot be left to it). in_fleet: opened from the fleet, where q goes back."""
        super().__init__()
        self.session, self.notes = session, notes or []
        self.host_outlives, self.in_fleet = host_outlives, in_fleet
        self.telemetry_stream = telemetry
        self.config = session.config
        self.readonly = readonly
        self.zoomed: Widget | None = None  # the pane shown on the whole screen
        self._found: dict[type[Widget], Widget | None] = {}
        themes, self.theme_errors = load_themes()
        for t in themes:
            self.register_theme(t)
        wanted = theme or self.config.theme or DEFAULT_THEME
        self._theme_problem = None if wanted in self.available_themes else f"unknown theme {wanted!r}; using {DEFAULT_THEME}"
        self.theme = wanted if wanted in self.available_themes else DEFAULT_THEME

    @property
    def host_name(self) -> str | None:
        return self.session.host_name

    @property
    def gpu_pane(self) -> GpuPane | None:
        return self._one(GpuPane)

    def _one(self, kind: type[W]) -> W | None:
        """The screen's one widget of a kind, found once: a query walks the whole DOM, and the telemetry's handler
        asks each second. None while the app is shutting down: late events from the host must not fail the exit."""
        found = self._found.get(kind)
        if found is None or not found.is_attached:
            matches = self.query(kind)
            found = self._found[kind] = matches.first() if matches else None
        return found  # type: ignore[return-value]

    def notify(
        self, message: str, *, title: str = "", severity: SeverityLevel = "information", timeout: float | None = None, markup: bool = True
    ) -> None:
        """Notifications carry data (paths, commands, errors quoting the host): never markup, never a raw escape."""
        super().notify(
            visible(message, newlines=True),
            title=visible(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def _unnotify(self, notification: Notification, refresh: bool = True) -> None:
        """A toast that expired is painted over: where nothing under it changes (a zoomed comparison), Textual 8
        left it on the terminal until something else was drawn there."""
        super()._unnotify(notification, refresh)
        self.call_after_refresh(self._repaint)

    def _repaint(self) -> None:
        with contextlib.suppress(ScreenStackError):  # (no screen left: the app is ending)
            self.screen.refresh()

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return variable_defaults(self.current_theme)

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Theme colours in text built under another theme drawn in this one's (console.ui.colours)."""
        recolour = self._recolour
        if recolour is None or recolour.variables is not self.theme_variables:
            self._recolour = recolour = Recolour(self.theme_variables)
        return [recolour, *super().get_line_filters()]

    def compose(self) -> ComposeResult:
        session, readonly = self.session, self.readonly
        spec = session.spec
        unsampled = (
            None if spec is None or (spec.gpus and spec.role != "slurm") else "Slurm login node" if spec.role == "slurm" else "no GPUs"
        )
        yield HostStatus(session.host_label, local=spec is None, readonly=readonly, unsampled=unsampled, id="host-status")
        yield LinkBanner(session.host_label, id="link-banner")
        with Container(id="panes"):
            yield GpuPane(session, readonly=readonly, id="gpus")
            yield ServerPane(session, readonly=readonly, id="server")
            yield TasksPane(session, readonly=readonly, id="tasks")
            yield SweepPane(session, readonly=readonly, id="sweep")
        yield Footer()

    def _connection_changed(self, event: ConnectionEvent) -> None:  # called in the loop by the connection
        self.post_message(ConnectionChanged(event))

    def on_resize(self, event: events.Resize) -> None:
        # under 100 columns the footer drops the padding between keys and the palette's key (ctrl+p still opens it,
        # and help lists it), so that each pane's keys and Quit fit at 80
        footer = self.query_one(Footer)
        footer.compact = event.size.width < 100
        footer.show_command_palette = event.size.width >= 100
        if self.zoomed is None:
            self._share_room(event.size.width, event.size.height)

    def _share_room(self, width: int, height: int) -> None:
        """The four panes' shares: at 80x24 the GPUs and the tasks take most (3:2); on a wide screen the Server log
        and the Sweep chart get the columns the GPU bars do not need, on a tall one the lower row as many rows as the
        upper. Inline, as a zoom is (see _zoom)."""
        panes = self.query_one("#panes")
        panes.styles.grid_columns = "2fr 3fr" if width >= WIDE_COLUMNS else "3fr 2fr"
        panes.styles.grid_rows = "1fr 1fr" if height >= TALL_ROWS else "3fr 2fr"

    def on_mount(self) -> None:
        self._screen_log = ScreenLog(self)
        self._screen_log.install()
        for problem in [*self.theme_errors, *([self._theme_problem] if self._theme_problem else [])]:
            self.notify(problem, title="Theme", severity="warning", timeout=8)
        if self.session.spec is not None:
            self.session.conn.add_listener(self._connection_changed)
        if self.session.lifecycle is not None and self.session.lifecycle.runs_jobs:
            self.watch_job_gpus()
            self.call_after_refresh(self._rest_of_screen)
        elif self.session.spec is not None and not self.session.spec.gpus:  # said once; nothing to sample
            self.query_one(GpuBars).no_gpus(f"{self.session.spec.name} has no GPUs (gpus = false in pivot.toml)")
            self.call_after_refresh(self._rest_of_screen)
        else:
            self.stream_telemetry()
            self.set_timer(FIRST_SAMPLE_WAIT_S, self._rest_of_screen)
        self.query_one(ProcessTable).focus()

    @work(exclusive=True, group="job-gpus", exit_on_error=False)
    async def watch_job_gpus(self) -> None:
        """A Slurm login node: its job's nodes, each sampled in a step overlapping the job, every JOB_GPUS_S."""
        lifecycle = self.session.lifecycle
        assert lifecycle is not None
        bars = self.query_one(GpuBars)
        while True:
            try:
                nodes = await lifecycle.job_gpus()
            except RemoteError as e:
                nodes, problem = [], str(e)
            else:
                problem = ""
            self._gpus_watched()
            lines = [node_line(name, sample, self.session.config.idle_threshold_mib) for name, sample in nodes]
            bars.no_gpus(
                "\n".join(lines)
                if lines
                else problem
                or f"{self.session.host_label} is a Slurm login node: the GPUs are its jobs' nodes', shown here while "
                "pivot's job runs (read-only: kill from the GPU hosts' own consoles)"
            )
            await asyncio.sleep(JOB_GPUS_S)

    @work(exclusive=True, group="telemetry", exit_on_error=False)
    async def stream_telemetry(self) -> None:
        stream = self.telemetry_stream or self.session.telemetry
        async for event in stream.events():
            self.post_message(TelemetryUpdate(event))

    _rest_started = False

    def _rest_of_screen(self) -> None:
        """What the GPUs' first sample does not wait for, started once it is drawn (or FIRST_SAMPLE_WAIT_S after the
        screen where none comes; after the first frame where nothing is sampled): the server's watch (its sessions: a
        shell, a python, a tail), the campaign's last run (its tables: polars) and what a sweep imports. On a host of
        few cores they slowed the telemetry agent's start, and the first paint with it; in threads, they still hold
        the GIL the screen's drawing needs."""
        if self._rest_started:
            return
        self._rest_started = True
        if (server := self._one(ServerPane)) is not None:
            server.start_watching()
        if (sweep := self._one(SweepPane)) is not None:
            sweep.load_last_run()
        self.run_worker(_import_later, thread=True, group="import-later", exit_on_error=False)

    @property
    def host_status(self) -> HostStatus | None:
        return self._one(HostStatus)

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        if (status := self.host_status) is not None:
            status.event = message.event
            banner = self.query_one(LinkBanner)
            banner.changed(message.event)
            self.query_one("#panes").set_class(banner.has_class("-shown"), "-link-lost")

    def on_status_changed(self, message: StatusChanged) -> None:
        """The Server pane's news of the managed server, on its way up: the header shows it too."""
        if (header := self.host_status) is not None:
            header.server_status = message.status

    def on_show_comparison(self, message: ShowComparison) -> None:
        self.query_one(SweepPane).show_comparison(message.a, message.b)

    def on_telemetry_update(self, message: TelemetryUpdate) -> None:
        status, pane = self.host_status, self.gpu_pane
        if status is None or pane is None:
            return
        if not self._rest_started and isinstance(message.event, Sample | AgentError):
            self.call_after_refresh(self._rest_of_screen)  # once the sample is drawn
        server = self._one(ServerPane)
        if isinstance(message.event, Sample):
            self._gpus_watched()
            status.sampled(message.event)
            if server is not None:
                server.tick()
                if message.event.server is not None and not message.event.server.alive:
                    server.poll_soon()
        elif isinstance(message.event, AgentError):
            status.problem = message.event.message if message.event.kind == "no-driver" else None
        pane.show(message.event)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """One place where a failed worker becomes something the operator sees."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            error, group = event.worker.error, event.worker.group
            if group in ("telemetry", "job-gpus"):  # the GPUs never stay unwatched: said in their pane, tried again
                self._gpu_watch_failures += 1
                delay = backoff(self._gpu_watch_failures)
                if self.gpu_pane is not None:
                    pane_problem(self.gpu_pane, f"{failure('watching the GPUs', error)}; trying again in {delay:g} s")
                self.set_timer(delay, self.stream_telemetry if group == "telemetry" else self.watch_job_gpus)
                return
            self.notify(str(error) or type(error).__name__, title=f"{group} failed", severity="error", timeout=10)

    _gpu_watch_failures = 0

    def _gpus_watched(self) -> None:
        """The GPUs' watch answered: a failure said before is over."""
        if self._gpu_watch_failures and self.gpu_pane is not None:
            self._gpu_watch_failures = 0
            pane_problem(self.gpu_pane, None)

    # -- panes ----------------------------------------------------------------
    def _pane_of(self, widget: Widget | None) -> Widget | None:
        while widget is not None and widget.id not in PANES:
            widget = widget.parent  # type: ignore[assignment]
        return widget

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p): Textual's own, then pivot's for the current state."""
        yield from super().get_system_commands(screen)
        for pane_id, name in (("gpus", "GPUs"), ("server", "Server"), ("tasks", "Tasks"), ("sweep", "Sweep")):
            yield SystemCommand(f"focus {name}", f"move the focus to the {name} pane", partial(self.action_focus_pane, pane_id))
        yield SystemCommand("zoom the focused pane", "show one pane on the whole screen, or all four again", self.action_toggle_zoom)
        yield SystemCommand("reconnect", "drop and re-establish the SSH connection", self.action_reconnect)
        yield SystemCommand("help: keys", "every key of every pane", self.action_help)
        yield SystemCommand("event log", "every kill, start, stop, sweep, adaptive profile and task change", self.action_event_log)
        pane = self.gpu_pane
        if pane is not None and pane.sample is not None and (stray := len({p.pid for p in pane.sample.stray})):
            yield SystemCommand(
                f"kill {stray} stray process{'es' if stray != 1 else ''}",
                "read-only: off" if self.readonly else "SIGTERM, then SIGKILL after the grace period, after a confirmation",
                self._refused("kill") if self.readonly else pane.action_kill_stray,
            )
        if sweep := self.query(SweepPane):
            sweep_pane = sweep.first()
            yield SystemCommand("compare the last two runs", "crossover, saturation and recommendation", sweep_pane.action_compare)
            if self.readonly:
                yield SystemCommand("start a sweep", "read-only: off", self._refused("a sweep"))
            elif sweep_pane.check_action("new_sweep", ()):
                yield SystemCommand(
                    "start a sweep", "choose levels and settings, then sweep the running server", sweep_pane.action_new_sweep
                )
        for theme in sorted(self.available_themes):
            yield SystemCommand(f"theme: {theme}", "switch the colour theme", partial(setattr, self, "theme", theme))

    def _refused(self, what: str) -> Callable[[], None]:
        return lambda: self.notify(f"read-only: {what} is off (pivot was started with --readonly)", severity="warning", timeout=4)

    def action_focus_pane(self, pane: str) -> None:
        target = self.query_one(f"#{pane}")
        if self.zoomed is not None:
            self._zoom(target)
        # a widget of the pane that is shown (a short Sweep pane hides its level table), else the pane itself
        shown = [w for w in target.query("*") if w.focusable and all(n.display for n in w.ancestors_with_self if n is not target)]
        # At once, not at the next idle: a key typed right after ("4 z") must act on the new pane.
        self.screen.set_focus(shown[0] if shown else target)

    def _cycle(self, step: int) -> None:
        current = self._pane_of(self.focused)
        index = PANES.index(current.id) if current is not None and current.id in PANES else -step
        self.action_focus_pane(PANES[(index + step) % len(PANES)])

    def action_focus_next_pane(self) -> None:
        self._cycle(1)

    def action_focus_previous_pane(self) -> None:
        self._cycle(-1)

    # Textual's Screen binds tab and shift+tab to these before the app's bindings are asked: on the main screen they
    # move between panes; in a dialog or a form, between its fields, as Textual does.
    def action_focus_next(self) -> None:
        if self.screen is self.screen_stack[0]:
            self._cycle(1)
        else:
            super().action_focus_next()

    def action_focus_previous(self) -> None:
        if self.screen is self.screen_stack[0]:
            self._cycle(-1)
        else:
            super().action_focus_previous()

    def _zoom(self, pane: Widget | None) -> None:
        """One pane on the whole screen (None: the four). Inline styles, not CSS classes: a class on #panes restyled
        every widget under it (some 350), which made a zoom cost ~100 ms of the event loop."""
        self.zoomed = pane
        panes = self.query_one("#panes")
        for p in panes.children:
            p.display = pane is None or p is pane
        if pane is None:
            for rule in ("grid_size_columns", "grid_size_rows"):
                panes.styles.clear_rule(rule)
            self._share_room(self.size.width, self.size.height)
        else:
            panes.styles.grid_size_columns = panes.styles.grid_size_rows = 1
            panes.styles.grid_columns = panes.styles.grid_rows = "1fr"
        for table in panes.query(DataTable):  # a table's rendered rows keep their old width until its caches clear
            table.notify_style_update()

    def action_toggle_zoom(self) -> None:
        self._zoom(self._pane_of(self.focused) or self.query_one("#gpus") if self.zoomed is None else None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # a digit typed into a field or a dialog is the field's
        return not (action == "focus_pane" and (len(self.screen_stack) > 1 or isinstance(self.focused, Input | TextArea)))

    def on_key(self, event: events.Key) -> None:
        """A key of an action --readonly removed (its binding is off, so the key reaches the app): say why nothing
        happens, rather than nothing."""
        pane = self._pane_of(self.focused)
        if isinstance(pane, Pane) and (binding := pane.readonly_binding(event.key)) is not None:
            self.notify(
                f"read-only: {binding.description.lower()} is off (pivot was started with --readonly)", severity="warning", timeout=4
            )
            event.stop()

    def action_reconnect(self) -> None:
        if self.session.spec is not None:
            self.session.conn.drop()

    def action_help(self) -> None:
        from console.ui.screens.confirm import Confirm

        sections = [
            ("Console", list(self.BINDINGS)),
            ("GPU pane", [*GpuPane.BINDINGS, *ProcessTable.BINDINGS]),
            ("Server pane", list(ServerPane.BINDINGS)),
            ("Sweep pane", list(SweepPane.BINDINGS)),
            ("Tasks pane", list(TasksPane.BINDINGS)),
            ("Confirmations", list(Confirm.BINDINGS)),
        ]
        self.push_screen(HelpScreen(sections, self.notes))  # type: ignore[arg-type]

    def action_help_quit(self) -> None:
        """Ctrl-C: how to quit, in words (Textual's own says it in markup, shown raw here)."""
        quit_now = "ctrl+q quits at once, aborting a sweep: its finished requests are kept"
        self.notify(f"Press q to quit ({quit_now})", title="Do you want to quit?")

    @work(group="quit", exclusive=True, exit_on_error=False)
    async def action_quit_asking(self) -> None:
        """Quit; with a sweep in progress, first ask what becomes of it: nothing measured is lost to a key."""
        from console.ui.screens.choose import Choose

        handle = self.session.sweeps.current
        if handle is None or handle.end is not None:
            self.exit()
            return
        leaving = "go back" if self.in_fleet else "quit"  # from a fleet host: back to the fleet
        answers = [
            ("s", f"Stop after this level, then {leaving}", "stop"),
            ("a", f"Abort now, keeping every finished request, and {leaving}", "abort"),
        ]
        host = self.session.host_name or handle.on_host
        resume = self._resume(handle)
        leave = handle.on_host and self.host_outlives  # the demo's host ends with it: nothing would measure the level
        if leave:
            answers.append(("l", f"{leaving.capitalize()} now: {host} measures the level in progress to its end", "leave"))
        body: list[RenderableType] = [
            Text(f"Run {handle.run.name} is being measured." + (" q goes back to the fleet." if self.in_fleet else ""))
        ]
        if leave:
            body.append(Text(f"Left to the host, the level is fetched by `{resume}`."))
        choice = await self.push_screen_wait(Choose("A sweep is in progress", body, answers))
        if choice is None:
            return
        if choice == "leave":
            handle.process.leave()
            self.exit(message=f"{host} measures the level in progress; `{resume}` fetches it")
            return
        if choice == "stop":
            self.notify(f"the sweep stops after this level; then pivot will {leaving}", timeout=30)
        await self._quit_once_ended(handle, handle.stop if choice == "stop" else handle.abort)

    def _resume(self, handle: SweepHandle) -> str:
        return pivot_command(self.session.config, self.session.host_name, "sweep", "--resume", handle.run.name)

    async def _quit_once_ended(self, handle: SweepHandle, end: Callable[[], object]) -> None:
        """Stop or abort the sweep, wait for its end, and quit saying what it kept."""
        ended = asyncio.Event()
        handle.subscribe(lambda _event: None, ended=lambda _handle: ended.set())
        end()
        if handle.end is None:
            await ended.wait()
        self.exit(message=await self._kept(handle))

    async def _kept(self, handle: SweepHandle) -> str:
        """What a sweep ended by quitting kept, and how to measure the rest."""

        def read() -> tuple[str, list[LevelDone]]:
            run = open_run_dir(handle.run.dir)  # as its files are now
            return run.state, run.levels()

        state, levels = await asyncio.to_thread(read)
        if not self.host_outlives:  # the demo's host (its config with it) ends with this console
            rest = "; the demo's host ended with it, so nothing is left to resume it on"
        else:
            rest = "" if state == "complete" else f"; `{self._resume(handle)}` measures what is missing"
        return f"run {handle.run.name} ({state}): {kept_text(levels)}{rest}"

    async def action_quit(self) -> None:
        """Ctrl-Q quits at once; a sweep in progress is aborted, keeping every finished request, and said so."""
        handle = self.session.sweeps.current
        if handle is None or handle.end is not None:
            self.exit()
            return
        await self._quit_once_ended(handle, handle.abort)

    @work(group="event-log", exclusive=True, exit_on_error=False)
    async def action_event_log(self) -> None:
        from console.ui.screens.event_log import SHOWN, EventLogScreen

        events = await asyncio.to_thread(self.session.events.tail, SHOWN)  # from the end: a long log is not read whole
        self.push_screen(EventLogScreen(events, str(self.session.events.path)))

    async def on_unmount(self) -> None:
        self._screen_log.remove()
        await self.session.close()

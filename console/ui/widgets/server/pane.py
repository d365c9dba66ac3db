"""The Server pane: profiles, the server's state, start / stop / restart / switch, and its live log."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections.abc import Callable

from rich.console import RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.reactive import var
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from console.remote.errors import RemoteError
from console.server.lifecycle import Check
from console.server.profiles import Profile
from console.server.state import LifecycleError, PreflightFailed, ServerState, ServerStatus
from console.session import Session
from console.ui.attention import call_attention
from console.ui.colours import SERVER_LOOK, theme_style
from console.ui.messages import StatusChanged
from console.ui.screens.confirm import confirmed
from console.ui.widgets.pane import Pane
from console.ui.widgets.problem import backoff, failure
from console.ui.widgets.quiet import QuietStatic
from console.ui.widgets.server.log_view import LogView
from console.ui.widgets.server.profile_detail import profile_detail

POLL_S = 1.0  # while the server starts, stops or is not there
READY_POLL_S = 3.0  # while it is ready: a crash is seen sooner by the telemetry agent, each second (poll_soon)


class ServerPane(Pane):
    DEFAULT_CSS = """
    ServerPane { padding: 0 1; }
    ServerPane #server-state { height: auto; max-height: 3; }
    ServerPane #server-top { height: auto; max-height: 8; }
    ServerPane #profiles { width: 24; height: auto; max-height: 8; border: none; padding: 0; }
    ServerPane #profile-detail { width: 1fr; height: auto; max-height: 8; padding-left: 1; color: $text-muted; overflow-y: auto; }
    ServerPane #preflight { height: auto; max-height: 6; }
    ServerPane #log-filter { display: none; height: 1; border: none; padding: 0; }
    ServerPane #log-filter.-shown { display: block; }
    """
    BINDINGS = [
        Binding("S", "start", "Start", id="server.start", tooltip="Start the highlighted profile (preflight checks first)"),
        Binding(
            "X", "stop", "Stop", id="server.stop", tooltip="Stop the server: SIGTERM to its group, SIGKILL after the grace (asks first)"
        ),
        Binding("R", "restart", "Restart", id="server.restart", tooltip="Stop and start the running profile again (asks first)"),
        Binding(
            "W", "switch", "Switch", id="server.switch", tooltip="Stop, check the GPUs are idle, start the highlighted profile (asks first)"
        ),
        Binding(
            "F",
            "force_start",
            "Force",
            show=False,
            id="server.force",
            tooltip="Start the highlighted profile even if a preflight check fails",
        ),
        Binding(
            "m",
            "mark",
            "Diff",
            id="server.mark",
            tooltip="Mark the highlighted profile; the detail then shows its diff with the highlighted one",
        ),
        # priority, and the focus set at once: the text typed right behind / is the filter's (app.py's digits are too)
        Binding("slash", "filter", "Filter", id="server.filter", priority=True, tooltip="Filter the log (Esc clears the filter)"),
        Binding("G", "follow", "Follow", show=False, id="server.follow", tooltip="Jump to the end of the log and follow it again"),
    ]

    READONLY = frozenset({"start", "force_start", "stop", "restart", "switch"})

    status: var[ServerStatus] = var(lambda: ServerStatus(ServerState.UNKNOWN), bindings=True)
    busy: var[str | None] = var(None, bindings=True)  # the action in progress

    def __init__(self, session: Session, *, readonly: bool = False, **kw: object):
        super().__init__(session, readonly=readonly, **kw)
        self.border_title = "Server"
        self.lifecycle = session.lifecycle
        self.profiles = session.profiles()
        self.marked: str | None = None
        self.checks: list[Check] = []
        self._highlight_placed = False
        self._poll_now = asyncio.Event()  # set: poll at once (poll_soon)
        self._watching = False

    def compose(self) -> ComposeResult:
        yield QuietStatic("", id="server-state")
        with Horizontal(id="server-top"):
            yield OptionList(*self._options(), id="profiles")
            yield QuietStatic("", id="profile-detail")
        yield QuietStatic("", id="preflight")
        yield Input(placeholder="filter the log…", id="log-filter")
        yield LogView(id="server-log")

    def _options(self) -> list[Option]:
        options = []
        for name in self.profiles.names:
            if name in self.profiles.broken:
                options.append(Option(Text.assemble(name, (" broken", "bold red")), id=name))
            else:
                options.append(Option(name, id=name))
        return options

    def _status_changed(self, status: ServerStatus) -> None:  # called in the loop by the lifecycle
        self.post_message(StatusChanged(status))

    def on_mount(self) -> None:
        self._show_state()
        if self.lifecycle is None:
            self.query_one("#profile-detail", QuietStatic).update("local mode: the server lifecycle needs a host (pivot --host NAME)")
            return
        current = self.session.spec
        if current is not None:
            self.query_one(LogView).add(f"— log of {current.workdir}/server.log on {current.name} —")
        self.lifecycle.add_listener(self._status_changed)
        self.set_interval(1.0, self._clock)  # the uptime and "starting, N s" tick between changes of state
        self._show_detail()

    def start_watching(self) -> None:
        """The server's poll and its log, from the GPUs' first sample on (or 2 s after the screen where none comes, or
        at once where nothing is sampled): the app says when (PivotApp._rest_of_screen)."""
        if self._watching or self.lifecycle is None:
            return
        self._watching = True
        self.watch_server()
        self.follow_log()

    # -- workers --------------------------------------------------------------
    @work(exclusive=True, group="server-watch", exit_on_error=False)
    async def watch_server(self) -> None:
        assert self.lifecycle is not None
        await asyncio.to_thread(importlib.import_module, "httpx")  # the health checks' client: in a thread, not the loop
        failures = 0
        while True:
            try:
                await self.lifecycle.poll()
                failures = 0
            except RemoteError as e:  # the header shows the connection; the state is unknown until a poll answers
                self.lifecycle.unreachable(str(e))
            except Exception as e:  # noqa: BLE001 - a value nobody foresaw must not end the watch for good
                failures += 1
                delay = backoff(failures)
                self.lifecycle.unreachable(f"{failure('watching the server', e)}; trying again in {delay:g} s")
                await asyncio.sleep(delay)
                continue
            with contextlib.suppress(TimeoutError):  # (not wait_for: in 3.11 it can swallow the cancel of an exclusive worker)
                async with asyncio.timeout(READY_POLL_S if self.status.state == ServerState.READY else POLL_S):
                    await self._poll_now.wait()
            self._poll_now.clear()

    def poll_soon(self) -> None:
        """The telemetry agent saw the server's process gone: look now, not at the next poll."""
        if self.status.state == ServerState.READY:
            self._poll_now.set()

    @work(exclusive=True, group="server-log", exit_on_error=False)
    async def follow_log(self) -> None:
        assert self.lifecycle is not None
        log = self.query_one(LogView)
        failures = 0
        while True:
            delay = 2.0  # the link came back, or tail ended: follow again
            try:
                async with await self.lifecycle.follow_log(200) as stream:
                    async for line in stream:
                        log.add(line)
                failures = 0
            except RemoteError:
                pass
            except Exception as e:  # noqa: BLE001 - a value nobody foresaw must not end the follow for good
                failures += 1
                delay = backoff(failures)
                log.add(f"— {failure('following the log', e)}; trying again in {delay:g} s —")
            await asyncio.sleep(delay)

    # -- state ----------------------------------------------------------------
    def on_status_changed(self, message: StatusChanged) -> None:
        if message.status.nodes != self.status.nodes and (message.status.nodes or self.status.nodes):
            if message.status.nodes and message.status.rank == 0:  # rank 0's host follows every rank's log
                self.query_one(LogView).add(
                    f"— the log of every rank, each line led by its host: "
                    f"{', '.join(f'{h} r{r}' for r, h in enumerate(message.status.nodes))} —"
                )
            elif message.status.nodes:
                first = message.status.nodes[0]
                self.query_one(LogView).add(
                    f"— the log of rank {message.status.rank} on this host; every rank's is on {first}'s Server pane —"
                )
            self.follow_log()  # another set of logs to follow: the worker starts again (it is exclusive)
        if message.status.state == ServerState.CRASHED and self.status.state != ServerState.CRASHED:
            self.query_one(LogView).add(
                f"— {message.status.profile} crashed ({message.status.process}): "
                f"{message.status.detail or 'the process ended without a stop'}; its last lines are above —"
            )
            call_attention(
                self.app,
                self.session.config.notify,
                f"{message.status.profile} crashed",
                message.status.detail or "the process ended without a stop",
            )
        elif message.status.state == ServerState.READY and self.status.state == ServerState.STARTING:
            call_attention(self.app, self.session.config.notify, f"{message.status.profile} is ready", f"on {self.session.host_label}")
        self.status = message.status
        if message.status.state == ServerState.READY and self.checks and all(c.ok and not c.warning for c in self.checks):
            self.query_one("#preflight", QuietStatic).update("")  # all passed and it is up: the room goes back to the log
        if not self._highlight_placed and message.status.profile in self.profiles.names:
            self._highlight_placed = True  # once: start on the running profile, then leave it to the operator
            self.query_one("#profiles", OptionList).highlighted = self.profiles.names.index(message.status.profile)
        self._show_state()  # the message goes on up to the app, whose header shows the server too

    _ticked = 0.0

    def tick(self) -> None:
        """The clock, told by the app as each telemetry sample arrives: drawn in the same frame as the sample's GPUs,
        not in one of its own each second."""
        if self.lifecycle is not None:  # local mode has no server to show
            self._ticked = time.monotonic()
            self._show_state()

    def _clock(self) -> None:
        if time.monotonic() - self._ticked > 0.9:  # no sample this second: the clock's own tick
            self._show_state()

    def _show_state(self) -> None:
        status = self.status
        glyph, colour = SERVER_LOOK[status.state]
        # Three lines at most, each cut rather than wrapped, so that a narrow pane never shows half a line
        head = Text(f"{glyph} {status.headline()}", theme_style(self.app, colour, bold=True))
        if self.busy:
            head.append(f"  [{self.busy}…]", "dim")
        facts = ", ".join(f for f in (status.process, status.elapsed(), status.detail) if f)
        last = ""
        if status.model and status.state == ServerState.READY:
            last = f"model {status.model.rstrip('/').rsplit('/', 1)[-1]}"  # the model's directory names it
        if status.state == ServerState.STARTING and status.last_line:
            last = status.last_line
        if status.state == ServerState.CRASHED and (said := [line for line in status.log_tail if line.strip()]):
            last = f"last of {len(status.log_tail)} log lines kept: {said[-1]}"
        lines = [head, *(Text(f"  {line}", "dim") for line in (facts, last) if line)]
        self.query_one("#server-state", QuietStatic).update(Text("\n", no_wrap=True, overflow="ellipsis").join(lines))
        if self.border_subtitle != str(status.state):
            self.border_subtitle = str(status.state)

    def on_resize(self) -> None:
        # too narrow for a command line beside the list: show it when the pane is zoomed or wide
        self.query_one("#profile-detail", QuietStatic).display = self.size.width >= 60

    def on_descendant_focus(self) -> None:
        """Profiles written meanwhile (pivot compare --write-profile, an editor) appear when the pane is entered."""
        fresh = self.session.profiles()
        if fresh.names != self.profiles.names or any(fresh.profiles.get(n) != self.profiles.profiles.get(n) for n in fresh.names):
            current = self.highlighted
            self.profiles = fresh
            options = self.query_one("#profiles", OptionList)
            options.clear_options()
            options.add_options(self._options())
            if current in fresh.names:
                options.highlighted = fresh.names.index(current)
            self._show_detail()

    @on(OptionList.OptionHighlighted, "#profiles")
    def _highlighted(self) -> None:
        self._show_detail()

    @property
    def highlighted(self) -> str | None:
        options = self.query_one("#profiles", OptionList)
        if options.highlighted is None:
            return None
        return options.get_option_at_index(options.highlighted).id

    def _show_detail(self) -> None:
        if (name := self.highlighted) is not None:
            error = theme_style(self.app, "error")
            self.query_one("#profile-detail", QuietStatic).update(profile_detail(self.profiles, name, self.marked, error))

    def _show_checks(self, checks: list[Check]) -> None:
        self.checks = checks
        text = Text()
        # what failed, then what warns, first: the room is six lines, and a server across nodes has a dozen checks
        for c in sorted(checks, key=lambda c: (c.ok, not c.warning)):
            colour = "success" if c.ok and not c.warning else "warning" if c.ok else "error"
            text.append("✓ " if c.ok else "✕ ", theme_style(self.app, colour, bold=True)).append(f"{c.name}: {c.detail}\n")
        self.query_one("#preflight", QuietStatic).update(text)

    # -- actions --------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        if action in ("start", "stop", "restart", "switch", "force_start"):
            if self.lifecycle is None or self.busy:
                return False
            state = self.status.state
            if action in ("start", "force_start"):
                return not state.running
            return state.running and state != ServerState.STOPPING  # stop, restart, switch
        return True

    def _profile(self) -> Profile | None:
        name = self.highlighted
        if name is None:
            return None
        try:
            return self.profiles.get(name)
        except Exception as e:  # noqa: BLE001 - a broken profile: say why, never half-start it
            self.notify(str(e), title="Broken profile", severity="error")
            return None

    def action_start(self) -> None:
        if (profile := self._profile()) is not None:
            self.lifecycle_action("start", profile, False)

    def action_force_start(self) -> None:
        if (profile := self._profile()) is None:
            return
        self._confirm(
            f"Start {profile.name} without passing preflight?",
            [Text(profile.command_line())],
            lambda: self.lifecycle_action("start", profile, True),
            "Force start",
        )

    def action_stop(self) -> None:
        how = (
            f"scancel {self.status.job}: Slurm signals its steps (SIGTERM, then SIGKILL after its KillWait)."
            if self.status.job is not None
            else f"SIGTERM to its process group, SIGKILL after {self.session.config.kill_grace_s:g} s."
            + (f" Every rank, on {', '.join(self.status.nodes)}." if self.status.nodes else "")
        )
        self._confirm(
            f"Stop {self.status.profile} ({self.status.process})?", [how], lambda: self.lifecycle_action("stop", None, False), "Stop"
        )

    def action_restart(self) -> None:
        name = self.status.profile
        if name is None or name not in self.profiles.profiles:
            self.notify(f"the running profile {name!r} is not among the profiles", severity="error")
            return
        profile = self.profiles.profiles[name]
        self._confirm(
            f"Restart {name}?",
            ["Stop it, check the GPUs are idle, start it again."],
            lambda: self.lifecycle_action("restart", profile, False),
            "Restart",
        )

    def action_switch(self) -> None:
        if (profile := self._profile()) is None:
            return
        self._confirm(
            f"Switch from {self.status.profile} to {profile.name}?",
            ["Stop the running server, check the GPUs are idle, start the other profile."],
            lambda: self.lifecycle_action("switch", profile, False),
            "Switch",
        )

    @work(group="ask", exit_on_error=False)
    async def _confirm(self, title: str, body: list[RenderableType], then: Callable[[], object], label: str) -> None:
        if await confirmed(self.app, title, body, label):
            then()

    def action_mark(self) -> None:
        name = self.highlighted
        self.marked = None if self.marked == name else name
        self.notify(f"marked {name}: highlight another profile to see the diff" if self.marked else "mark cleared", timeout=3)
        self._show_detail()

    async def action_filter(self) -> None:
        if not self.region.intersection(self.query_one(LogView).region).height and getattr(self.app, "zoomed", False) is None:
            await self.app.run_action("toggle_zoom")  # a pane too short to show its log (80x24) shows it on the whole screen
        box = self.query_one("#log-filter", Input)
        box.add_class("-shown")
        self.screen.set_focus(box)

    @on(Input.Changed, "#log-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_one(LogView).set_filter(event.value)

    def key_escape(self) -> None:
        box = self.query_one("#log-filter", Input)
        if box.has_class("-shown"):
            box.value = ""
            box.remove_class("-shown")
            self.query_one(LogView).focus()

    def action_follow(self) -> None:
        log = self.query_one(LogView)
        log.scroll_end(animate=False)
        log.following = True

    @work(exclusive=True, group="server-action", exit_on_error=False)
    async def lifecycle_action(self, action: str, profile: Profile | None, force: bool) -> None:
        """start, stop, switch or restart through the lifecycle, which writes each in the event log."""
        assert self.lifecycle is not None
        self.busy = action if profile is None else f"{action} {profile.name}"
        self._show_state()
        try:
            if action == "stop":
                report = await self.lifecycle.stop()
                self.notify(report.describe(), severity="information" if report.ok else "warning", timeout=8)
            elif action == "restart":
                self._show_checks(await self.lifecycle.restart(self.profiles, force=force))
            else:
                assert profile is not None
                starter = self.lifecycle.start if action == "start" else self.lifecycle.switch
                self._show_checks(await starter(profile, force=force))
        except PreflightFailed as e:
            self._show_checks(e.checks)
            kept = f"; nothing was stopped: {e.still_running} still runs" if e.still_running else ""
            self.notify(
                f"{profile.name if profile else ''} not started: a preflight check failed{kept} (F starts anyway)",
                severity="error",
                timeout=8,
            )
        except LifecycleError as e:
            self.notify(str(e), title=f"{action} refused", severity="error", timeout=10)
        finally:
            self.busy = None
            self._show_state()

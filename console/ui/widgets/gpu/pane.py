"""The GPU pane: live telemetry, the processes holding memory, and the kill flow."""

from __future__ import annotations

import asyncio
import contextlib
import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var

from console.actions import kill
from console.gpu.format import idle_line, kill_strays_question
from console.gpu.kill import KillPlan, ReleaseWatch
from console.gpu.samples import AgentError, Hello, Sample
from console.gpu.telemetry import LinkDown, TelemetryEvent
from console.session import Session
from console.ui.colours import theme_style
from console.ui.screens.confirm_kill import kill_confirmed
from console.ui.widgets.gpu.bars import GpuBars
from console.ui.widgets.gpu.processes import ProcessTable
from console.ui.widgets.pane import Pane
from console.ui.widgets.problem import PaneProblem, survives
from console.ui.widgets.quiet import QuietStatic
from console.untrusted import visible

LOOK_AGAIN_S = 3.0  # K found no stray process: how long it waits for the next sample to look again


class GpuPane(Pane):
    DEFAULT_CSS = """
    GpuPane { padding: 0 1; }
    GpuPane > #gpu-idle { height: 1; margin-top: 1; }
    GpuPane > #gpu-status { height: auto; max-height: 4; color: $text-muted; }
    GpuPane > ProcessTable { height: 1fr; min-height: 3; overflow-x: hidden; }  /* a long command is cut with … */
    """
    BINDINGS = [
        Binding(
            "k", "kill", "Kill", id="gpu.kill", tooltip="Kill the tagged processes (or the one under the cursor), after a confirmation"
        ),
        Binding("K", "kill_stray", "Kill stray", id="gpu.kill_stray", tooltip="Kill every stray process, after a confirmation"),
        Binding(
            "p", "kill_parent", "Kill parent", id="gpu.kill_parent", tooltip="Kill the parent that must reap a zombie, after a confirmation"
        ),
        Binding("c", "cleanup", "Cleanup", id="gpu.cleanup", tooltip="Run the hypervisor's cleanup command, after a confirmation"),
    ]

    READONLY = frozenset({"kill", "kill_stray", "kill_parent", "cleanup"})

    offered_parents: var[list[int]] = var(list, bindings=True)  # a zombie's parents, which p offers to kill
    kill_failed = var(False, bindings=True)  # c offers the hypervisor's cleanup

    def __init__(self, session: Session, *, readonly: bool = False, **kw: object):
        super().__init__(session, readonly=readonly, **kw)
        self.border_title = "GPUs"
        self.sample: Sample | None = None
        self.hello: Hello | None = None
        self.release_watch: ReleaseWatch | None = None
        self.messages: list[Text] = []
        self._sampled = asyncio.Event()  # set by each sample

    def compose(self) -> ComposeResult:
        yield GpuBars(id="gpu-bars")
        yield QuietStatic("", id="gpu-idle")
        yield QuietStatic("", id="gpu-status")
        yield ProcessTable(id="gpu-procs")
        yield PaneProblem()

    # -- telemetry ------------------------------------------------------------
    @survives("showing the sample")
    def show(self, event: TelemetryEvent) -> None:
        if isinstance(event, Hello):
            self.hello = event
            if event.outdated:
                self.say(f"the agent on the host is older (v{event.version}) than this console expects", "warning")
        elif isinstance(event, Sample):
            self._show_sample(event)
        elif isinstance(event, AgentError):
            if event.kind == "no-driver":
                self.query_one(GpuBars).no_gpus(f"No NVIDIA driver on this host: {event.message}")
            else:
                self.say(f"telemetry: {event.message}", "warning")
        elif isinstance(event, LinkDown):
            self.say(f"telemetry interrupted: {event.reason} (restarting)", "warning")

    def _show_sample(self, sample: Sample) -> None:
        self.sample = sample
        self._sampled.set()
        self.query_one(GpuBars).update_sample(sample)
        self.query_one(ProcessTable).update_sample(sample)
        self.query_one("#gpu-idle", QuietStatic).update(self._idle_text(sample))
        if (watch := self.release_watch) is not None:
            for message in watch.update(sample):
                self.say(message, "success")
            if watch.done:
                self.release_watch = None
            elif time.monotonic() - watch.started > kill.RELEASE_TIMEOUT_S:
                holders = ", ".join(f"pid {p.pid} ({p.state})" for p in watch.holders(sample)) or "?"
                self.say(
                    f"memory not released after {kill.RELEASE_TIMEOUT_S:g} s on GPU "
                    f"{', '.join(map(str, watch.pending))}: still held by {holders}",
                    "error",
                )
                self.kill_failed = True
                self.release_watch = None

    def on_resize(self) -> None:
        if self.sample is not None:  # the summary line says as much as the new width holds
            self.query_one("#gpu-idle", QuietStatic).update(self._idle_text(self.sample))

    def _idle_text(self, sample: Sample) -> Text:
        threshold = self.session.config.idle_threshold_mib
        text = idle_line(sample, threshold, self.query_one("#gpu-idle").content_size.width)
        style = "success" if sample.idle(threshold) else "warning"
        stray = len({p.pid for p in sample.stray})
        subtitle = f"{stray} stray: K kills them" if stray and not self.readonly else ""
        if subtitle != self.border_subtitle:
            self.border_subtitle = subtitle
        return Text(text, style=theme_style(self.app, style))

    def say(self, message: str, level: str = "") -> None:
        style = theme_style(self.app, level) if level else ""
        self.messages = [*self.messages[-3:], Text(f"{time.strftime('%H:%M:%S')} {message}", style=style)]
        self.query_one("#gpu-status", QuietStatic).update(Text("\n").join(self.messages))

    # -- kill -----------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        if action == "kill_parent":
            return bool(self.offered_parents)
        if action == "cleanup":
            return self.session.hypervisor is not None and self.kill_failed
        return True

    def action_kill(self) -> None:
        self._confirm([p.pid for p in self.query_one(ProcessTable).selected()])

    def action_kill_stray(self) -> None:
        if self.sample is None:
            return
        if stray := [p.pid for p in self.sample.stray]:
            self._confirm(stray, title=kill_strays_question(len(set(stray))))
        else:
            self._look_again()

    @work(exclusive=True, group="look-again", exit_on_error=False)
    async def _look_again(self) -> None:
        """The sample on screen may be older than what made the operator press K (a server that just crashed, its
        workers still holding memory): the next one decides."""
        self._sampled.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LOOK_AGAIN_S):
                await self._sampled.wait()
        assert self.sample is not None
        if stray := [p.pid for p in self.sample.stray]:
            self._confirm(stray, title=kill_strays_question(len(set(stray))))
        else:
            self.notify(f"no stray processes (sampled at {time.strftime('%H:%M:%S', time.localtime(self.sample.received))})", timeout=4)

    def action_kill_parent(self) -> None:
        if self.offered_parents:
            self._confirm(self.offered_parents, title="Kill the parent that must reap the zombie?")

    @work(group="ask", exit_on_error=False)
    async def _confirm(self, pids: list[int], title: str | None = None) -> None:
        if self.sample is None or not pids:
            self.notify("nothing selected", severity="warning", timeout=3)
            return
        plan = kill.plan(self.session, self.sample, pids)
        answer = await kill_confirmed(self.app, plan, self.session.config.kill_grace_s, title)
        if answer:
            self.run_kill(plan)
        elif answer is False:
            self.say("kill cancelled: nothing was signalled")

    @work(exclusive=True, group="gpu-kill", exit_on_error=False)
    async def run_kill(self, plan: KillPlan) -> None:
        hypervisor = self.session.hypervisor
        self.say(
            f"SIGTERM to {', '.join(str(p.pid) for p in plan.targets)}; SIGKILL after {self.session.config.kill_grace_s:g} s if needed"
        )
        self.offered_parents = []
        self.kill_failed = False
        self.release_watch = ReleaseWatch(plan)
        report = await kill.kill(self.session, plan)
        ended = {o.pid for o in report.outcomes if o.ended}
        for outcome in report.outcomes:
            if not outcome.ended:  # a zombie whose parent this kill ended is not an error: init reaps it
                self.say(report.said(outcome), "warning" if outcome.ppid in ended else "error")
        for line in report.advice:
            self.say(line, "warning")
        self.offered_parents, self.kill_failed = list(report.parents), report.stuck
        if self.offered_parents:
            self.say(f"zombie: press p to kill its parent {', '.join(map(str, self.offered_parents))}, which must reap it", "warning")
        if self.kill_failed and hypervisor is not None:
            self.say(f"press c to run the cleanup command on {hypervisor.name}", "warning")

    @work(group="ask", exit_on_error=False)
    async def action_cleanup(self) -> None:
        hypervisor = self.session.hypervisor
        if hypervisor is None or not hypervisor.cleanup:
            return
        from console.ui.screens.confirm_kill import ConfirmCommand

        if await self.app.push_screen_wait(ConfirmCommand(hypervisor.name, list(hypervisor.cleanup))):
            self.run_cleanup()

    @work(exclusive=True, group="gpu-cleanup", exit_on_error=False)
    async def run_cleanup(self) -> None:
        result = await kill.cleanup(self.session)
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or [""]
        where = self.session.hypervisor.name if self.session.hypervisor else "?"
        self.say(f"cleanup on {where}: exit {result.exit_status} {visible(last[0])}", "success" if result.ok else "error")

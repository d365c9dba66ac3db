"""The Sweep pane: the throughput curve growing while a sweep runs (one it started, or one a runbook started through
the session), earlier runs overlaid, the level table, progress, start / stop / abort, and the comparison with its
verdicts: `w` writes the adaptive profile it recommends, `u` repeats its uncertain levels, `f` refines it."""

from __future__ import annotations

import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import var
from textual.timer import Timer

from console.remote.errors import RemoteError
from console.session import Session
from console.settings import SweepSettings
from console.sweep.model import LevelDone, LevelProgress, LevelRetry, LevelStarted, RequestsDone, Said, Shown, SweepDone, SweepStarted
from console.sweep.runs.store import Run, RunError, list_runs
from console.sweep.sweeps import ServerBusy, SweepHandle
from console.sweep.words.verdicts import at, naming
from console.ui.attention import call_attention
from console.ui.colours import theme_style
from console.ui.screens.confirm import confirmed
from console.ui.text import elide
from console.ui.widgets.problem import PaneProblem, survives
from console.ui.widgets.quiet import QuietStatic
from console.ui.widgets.sweep.chart import CHART_ROWS, SECOND, ChartData, SweepChart, earlier_runs
from console.ui.widgets.sweep.comparison import ComparisonView
from console.ui.widgets.sweep.form import SweepForm
from console.ui.widgets.sweep.levels import LevelTable
from console.ui.widgets.sweep.progress import LiveLevel, progress_line
from console.ui.widgets.sweep.verdicts import ComparisonActions
from console.untrusted import visible

REDRAW_S = 0.5  # the chart redraws at most this often, however fast requests finish, and not at all while nothing changes
SHORT_ROWS = 17  # a pane shorter than this shows the chart and its progress line, not the level table: a taller one
# has room for the progress and legend (3-4 lines), a chart of CHART_ROWS and a few rows of the table
CRAMPED_ROWS = 40  # a comparison in a pane shorter than this takes the chart's room too (`c` again brings it back)


class SweepPane(ComparisonActions):
    DEFAULT_CSS = """
    SweepPane { padding: 0 1; }
    SweepPane SweepChart { height: 2fr; min-height: 10; }  /* CHART_ROWS: drawn, not its line of numbers */
    SweepPane.-short SweepChart { min-height: 4; }
    SweepPane #sweep-progress { height: auto; min-height: 1; max-height: 7; }
    SweepPane #sweep-levels { height: 1fr; max-height: 11; }
    SweepPane.-short #sweep-levels { display: none; }
    SweepPane #sweep-compare { height: 1fr; max-height: 16; display: none; scrollbar-gutter: stable; }
    SweepPane #sweep-compare.-shown { display: block; }
    SweepPane.-comparing #sweep-levels { display: none; }
    SweepPane.-comparing.-cramped SweepChart { display: none; }
    SweepPane.-comparing.-cramped #sweep-compare { max-height: 100%; }
    """
    BINDINGS = [
        # priority: taken as it arrives, so the form is up before the keys typed behind it (the levels) are routed
        Binding(
            "n", "new_sweep", "Sweep", id="sweep.new", priority=True, tooltip="Start a sweep against the running server (a form first)"
        ),
        Binding("s", "stop", "Stop", id="sweep.stop", tooltip="Stop after the current level; finished levels are kept"),
        Binding("A", "abort", "Abort", id="sweep.abort", tooltip="Abort now; every finished request is kept (asks first)"),
        Binding(
            "c",
            "compare",
            "Compare",
            id="sweep.compare",
            tooltip="Compare the last two runs (or show the last comparison again): crossover and recommendation",
        ),
        Binding(
            "y",
            "second_series",
            "2nd series",
            id="sweep.second",
            tooltip="Overlay per-request tok/s, TTFT, the server's own throughput (/metrics), or nothing",
        ),
        Binding("o", "overlays", "Overlays", id="sweep.overlays", tooltip="Show more or fewer earlier runs on the chart"),
        Binding(
            "v",
            "frontier",
            "Frontier",
            id="sweep.frontier",
            show=False,
            tooltip="Flip the chart: total tok/s per GPU against a user's tok/s (the frontier), or by concurrency",
        ),
        Binding(
            "w",
            "write_adaptive",
            "Adaptive profile",
            id="sweep.adaptive",
            show=False,  # said in the comparison they act on: the footer holds the rest at 80 columns
            tooltip="Write a profile that turns drafting off above the crossover, its config uploaded to the host",
        ),
        Binding(
            "u",
            "repeat_uncertain",
            "Repeat uncertain",
            id="sweep.repeat",
            show=False,  # said in the comparison they act on: the footer holds the rest at 80 columns
            tooltip="Measure again the levels the comparison cannot decide, on the running server's run (asks first, and each round)",
        ),
        Binding(
            "f",
            "refine",
            "Refine",
            id="sweep.refine",
            show=False,  # said in the comparison they act on: the footer holds the rest at 80 columns
            tooltip="Locate where drafting stops paying off: measure between levels, switching servers (asks first)",
        ),
        Binding(
            "t",
            "tune",
            "Tune",
            id="sweep.tune",
            show=False,
            tooltip="Measure the running drafting profile at several draft lengths, write the best per load as its engine's "
            "schedule and sweep it (pivot tune; asks first)",
        ),
    ]

    can_focus = True  # a short pane hides its level table: the pane itself then holds the focus and its keys

    READONLY = frozenset({"new_sweep", "abort", "write_adaptive", "repeat_uncertain", "refine", "tune"})

    handle: var[SweepHandle | None] = var(None, bindings=True)  # the sweep in progress, whoever started it

    def __init__(self, session: Session, *, readonly: bool = False, **kw: object):
        super().__init__(session, readonly=readonly, **kw)
        self.border_title = "Sweep"
        self.data = ChartData()
        self.overlay_count = 2
        self._redraw: Timer | None = None  # a redraw due: the changes until it are drawn together
        self.warnings: list[str] = []
        self.started = 0.0

    @property
    def run(self) -> Run | None:
        return self.data.run

    @property
    def levels(self) -> list[LevelDone]:
        return self.data.levels

    def compose(self) -> ComposeResult:
        yield SweepChart(id="sweep-chart")
        yield QuietStatic("", id="sweep-progress")
        yield LevelTable(id="sweep-levels")
        yield ComparisonView(id="sweep-compare")
        yield PaneProblem()

    def on_mount(self) -> None:
        self.session.sweeps.add_listener(self._follow)
        self._show_progress()

    @work(thread=True, group="sweep-load", exit_on_error=False)
    def load_last_run(self) -> None:
        """The campaign's last run, read in a thread once the GPUs are on screen (the app says when): a campaign is
        many files, its tables polars'."""
        runs = [r for r in list_runs(self.session.config.campaign_dir) if r.state != "corrupt"]
        if runs:
            self.app.call_from_thread(self._show_loaded, runs[-1], runs[-1].levels())

    def _show_loaded(self, run: Run, levels: list[LevelDone]) -> None:
        if self.data.run is None:  # unless a sweep (or the operator) put another run on screen meanwhile
            self._put_run(run, levels)

    # -- drawing --------------------------------------------------------------
    @work(thread=True, exclusive=True, group="sweep-overlays", exit_on_error=False)
    def _refresh_overlays(self) -> None:
        """Read the earlier runs once per change of run, not at every redraw of a running sweep; in a thread (every
        run's state, the last ones' tables: tens of milliseconds a run when a sweep ends)."""
        run, count = self.run, self.overlay_count
        overlays = earlier_runs(self.session.config.campaign_dir, run, count)
        self.app.call_from_thread(self._show_overlays, run, count, overlays)

    def _show_overlays(self, run: Run | None, count: int, overlays: list[tuple[Run, list[LevelDone]]]) -> None:
        if self.run is run and self.overlay_count == count:  # still the run on screen, and as many as asked
            self.data.overlays = overlays
            self.changed()

    @property
    def redraw_due(self) -> bool:
        return self._redraw is not None

    def changed(self) -> None:
        """What the chart shows changed: drawn within REDRAW_S, with whatever else changes meanwhile."""
        if self._redraw is None:
            self._redraw = self.set_timer(REDRAW_S, self._draw)

    @survives("drawing the sweep")
    def _draw(self) -> None:
        self._redraw = None
        if not self.display:  # hidden (another pane zoomed): drawn when shown again (its resize), not meanwhile
            return
        self.query_one(SweepChart).draw(self.data)
        self._show_progress()

    def watch_comparing(self) -> None:
        self._show_progress()  # in a cramped pane the chart's legend goes with the chart, and comes back with it

    def on_resize(self) -> None:
        self.changed()  # the legend under the chart wrapped again to the new width
        short = self.size.height < SHORT_ROWS
        table = self.query_one(LevelTable)
        if short and table.has_focus:
            self.focus()  # the table is about to be hidden: its keys stay with the pane, not another one
        elif not short and self.has_focus and not self.comparing:
            self.call_after_refresh(table.focus)  # shown again (zoomed): the arrows scroll its levels
        self.set_class(short, "-short")  # the chart and a progress line first, the table zoomed
        self.set_class(self.size.height < CRAMPED_ROWS, "-cramped")

    def _show_progress(self) -> None:
        """The sweep's progress (or the run on screen) on the first line, at every size; the warnings and the
        chart's legend under it."""
        text, shown = Text(), self.query_one("#sweep-progress", QuietStatic)
        room = shown.content_size.width or None
        live, handle = self.data.live, self.handle
        if handle is not None and live is not None and live.c is not None:
            text.append(progress_line(handle, live, self.levels, time.monotonic() - self.started), "bold")
        elif handle is not None:
            text.append("starting the load generator…", "bold")
        elif self.run is not None:
            name = elide(self.run.name, None if room is None else max(12, room - len("run :")))
            text.append(f"run {name}: {visible(self.run.profile)}, {self.run.state}", "dim")
        else:
            text.append("no sweep yet" if self.readonly else "no sweep yet: n starts one against the running server", "dim")
        for warning in self.warnings:  # before the legend: a short pane cuts what comes last
            text.append(f"\n⚠ {warning}", theme_style(self.app, "warning"))
        chart = self.query_one(SweepChart)
        if chart.legend and room and not (self.comparing and self.has_class("-cramped")):
            legend = chart.legend_text(room)
            lines = len(text.wrap(self.app.console, room)) + len(legend.plain.split("\n"))
            chart_rows = self.size.height - lines
            if self.comparing and self.has_class("-short"):
                chart_rows = chart_rows * 2 // 3  # the comparison takes 1fr beside the chart's 2fr
            if chart_rows >= CHART_ROWS:  # else the chart is its line of numbers, which needs no legend
                text.append("\n").append_text(legend)
        shown.update(text)

    def _show_run(self, run: Run) -> None:
        self._put_run(run, run.levels())

    def _put_run(self, run: Run, levels: list[LevelDone]) -> None:
        self.data.run, self.data.levels = run, levels
        self.query_one(LevelTable).show(levels)
        self._refresh_overlays()

    # -- a sweep in progress, whoever started it ------------------------------------------
    def _follow(self, handle: SweepHandle) -> None:
        """A sweep started through the session (by this pane, a runbook or a refinement): drawn as it runs."""
        self.handle, self.started, self.warnings = handle, time.monotonic(), []
        self._show_run(handle.run)
        self.hide_comparison()
        self.data.live = LiveLevel()
        handle.subscribe(self._on_event, ended=self._ended)

    @survives("showing the sweep's events")  # a drawing's error must not end the sweep that calls this
    def _on_event(self, event: Shown) -> None:
        with naming(self.data.rates):
            self._take(event)

    def _take(self, event: Shown) -> None:
        live = self.data.live
        match event:
            case SweepStarted():
                self.warnings = [visible(w) for w in event.warnings]
            case LevelStarted():
                self.data.live = LiveLevel(c=event.c, requests=event.requests + event.warmup, reference=event.reference)
            case RequestsDone() if live is not None:
                live.done += event.n
                live.tokens += event.tokens
            case LevelProgress() if live is not None and event.c == live.c:
                live.in_flight, live.streamed = event.in_flight, event.streamed or 0
            case LevelDone() if event.reference:  # its first level again: the sweep's drift, not a point of the curve
                first = next((lv for lv in self.data.levels if lv.c == event.c and lv.measured), None)
                then = f" against {first.total_tok_s:.1f} at the start" if first else ""
                self.notify(f"{at(event.c)} measured again at the end: {event.total_tok_s:.1f} tok/s{then} (the sweep's drift)", timeout=8)
            case LevelDone():
                self.data.levels.append(event)
                self.query_one(LevelTable).add(event)
            case LevelRetry():
                self.notify(
                    f"{at(event.c)} failed ({visible(str(event.reason))}); the server answers again: measuring it once more",
                    severity="warning",
                    timeout=8,
                )
            case Said(type="failed"):
                self.notify(f"the load generator failed: {visible(event.message)}", severity="error", timeout=10)
            case Said():
                self.notify(visible(event.message), severity="warning", timeout=10)
            case SweepDone() if event.failed:
                self.notify(f"the sweep stopped: {visible(event.failed)}; the run is partial", severity="error", timeout=15)
                call_attention(self.app, self.session.config.notify, "sweep failed", visible(event.failed))
            case SweepDone():
                word = "aborted" if event.aborted else "stopped" if event.stopped else "finished"
                self.notify(f"sweep {word}: {self.run.name if self.run else ''}", timeout=6)
                call_attention(self.app, self.session.config.notify, f"sweep {word}", self.run.name if self.run else "")
        self.changed()

    def _ended(self, handle: SweepHandle) -> None:
        if self.handle is handle:
            self.handle, self.data.live = None, None
        self.changed()
        self._read_finished(handle.run)

    @work(thread=True, exclusive=True, group="sweep-read", exit_on_error=False)
    def _read_finished(self, run: Run) -> None:
        """The finished run's levels as its tables have them (pooled repeats, failed levels marked), read in a thread:
        a long run's files are not read on the screen's loop."""
        self.app.call_from_thread(self._show_finished, run, run.levels())

    def _show_finished(self, run: Run, levels: list[LevelDone]) -> None:
        if self.handle is None and self.data.run is run:  # unless another sweep or run is on screen meanwhile
            self._put_run(run, levels)

    # -- actions --------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        running = self.handle is not None
        if action == "new_sweep":
            return not running and self.session.lifecycle is not None
        if action in ("stop", "abort"):
            return running
        if action in ("write_adaptive", "repeat_uncertain", "refine"):  # offered with a comparison; else they say why not
            return True
        return True

    def action_new_sweep(self) -> None:
        """The form is pushed now, while `n` is handled: the keys typed after it are the form's (form.py on_key)."""

        def chosen(settings: SweepSettings | None) -> None:
            if settings is not None:
                self.start_sweep(settings)

        self.app.push_screen(SweepForm(self.session.config.sweep), chosen)

    def action_stop(self) -> None:
        if self.handle:
            self.handle.stop()
            self.notify("the sweep stops after this level", timeout=4)

    @work(group="ask", exit_on_error=False)
    async def action_abort(self) -> None:
        if (
            await confirmed(self.app, "Abort the sweep now?", ["Requests in flight are lost; finished ones are kept."], "Abort")
            and self.handle
        ):
            self.handle.abort()

    @work(exclusive=True, group="sweep", exit_on_error=False)
    async def start_sweep(
        self,
        settings: SweepSettings,
        *,
        run: Run | None = None,
        how: str = "new",
        levels: list[int] | None = None,
        allow_busy: bool = False,
    ) -> None:
        """A new run, or with `run` and `levels` those levels of it measured again and merged into it. A server already
        serving another client's requests is said before anything starts, and the operator decides."""
        while True:
            try:
                handle = await self.session.sweeps.start(settings, run=run, how=how, levels=levels, allow_busy=allow_busy)
                break
            except ServerBusy as e:
                if allow_busy or not await confirmed(self.app, "Sweep a busy server?", [Text(str(e))], "Sweep anyway"):
                    return
                allow_busy = True
            except (RunError, RemoteError) as e:
                self.notify(str(e), title="No sweep", severity="error", timeout=10)
                return
        async for _ in handle.events():  # drawn by _on_event, as a runbook's sweep is
            pass
        self._compare_with_counterpart(handle.run)

    def action_second_series(self) -> None:
        self.data.second = (self.data.second + 1) % len(SECOND)
        self.changed()
        second = SECOND[self.data.second]
        self._said_if_unseen(f"second series: {second[0] if second else 'none'}")

    def action_frontier(self) -> None:
        self.data.frontier = not self.data.frontier
        self.changed()
        self._said_if_unseen("the chart: tok/s per GPU against a user's tok/s" if self.data.frontier else "the chart: by concurrency")

    def _said_if_unseen(self, what: str) -> None:
        """A change of the chart's view while the pane is too short to draw it: said, or the key seems to do nothing."""
        chart = self.query_one(SweepChart)
        if chart.display and chart.is_compact:  # (hidden: no level to draw yet, in any view)
            zoomed = getattr(self.app, "zoomed", None) is self
            self.notify(f"{what} ({'a taller terminal shows it' if zoomed else 'z shows it'})", timeout=3)

    def action_overlays(self) -> None:
        self.overlay_count = (self.overlay_count + 1) % 4
        self.notify(f"{self.overlay_count} earlier run(s) overlaid", timeout=2)
        self._refresh_overlays()

"""The Sweep pane: the throughput curve growing while a sweep runs, earlier runs overlaid, the level
table, progress, start / stop / abort, and the comparison with its crossover and recommendation."""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING, Any, cast

from rich.color import Color
from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static
from textual.worker import WorkerState
from textual_plotext import PlotextPlot

from console.remote.errors import RemoteError
from console.sweep.adaptive import AdaptivePlan, NoAdaptiveProfile, plan, spec_host, write_adaptive_profile
from console.sweep.compare import Comparison, Verdict, bracket, compare, counterpart, label
from console.sweep.runner import SweepProcess, describe_server, identity_mismatch
from console.sweep.settings import SweepSettings
from console.sweep.store import Run, RunError, create_run, list_runs
from console.ui.colours import theme_style
from console.untrusted import visible
from console.ui.screens.confirm import Confirm
from console.ui.widgets.sweep.form import SweepForm

if TYPE_CHECKING:
    from console.ui.app import PivotApp

REDRAW_S = 0.5  # the chart redraws at most this often, however fast requests finish
SECOND = [("per-request tok/s", "req_tok_s_mean", 1.0), ("TTFT p50 ms", "ttft_p50", 1000.0),
          ("server's own gen tok/s", "server_gen_tok_s", 1.0), (None, None, 1.0)]


def _value(level: dict[str, Any], key: str) -> float | None:
    """A level's number, from a live level_done event (server view nested) or a stored row (flattened)."""
    if key.startswith("server_") and key not in level:
        return (level.get("server") or {}).get(key.removeprefix("server_"))
    return level.get(key)


# RGB, not names: plotext's "yellow" is undefined (textual-plotext draws it purple), and the legend under a short
# chart must show the very colour of the curve
RGB = tuple[int, int, int]
OVERLAY_COLOURS: list[RGB] = [(255, 165, 0), (0, 200, 215), (215, 95, 215), (95, 200, 95)]
SECOND_COLOUR: RGB = (235, 205, 0)
LIVE_COLOUR: RGB = (230, 60, 60)
LEGEND_INSIDE_ROWS = 16  # a shorter chart would be mostly legend: the legend goes under it instead


def _label(run: Run | None) -> str:
    return "this run" if run is None else label(run)


def _log(levels: list[int]) -> list[float]:
    return [math.log10(c) for c in levels]


class SweepPane(Vertical):
    DEFAULT_CSS = """
    SweepPane { padding: 0 1; }
    SweepPane PlotextPlot { height: 2fr; min-height: 8; }
    SweepPane #sweep-progress { height: auto; max-height: 7; }
    SweepPane #sweep-levels { height: 1fr; max-height: 11; }
    SweepPane #sweep-compare { height: 1fr; max-height: 16; display: none; scrollbar-gutter: stable; }
    SweepPane #sweep-compare.-shown { display: block; }
    SweepPane.-comparing #sweep-levels { display: none; }
    """
    BINDINGS = [
        Binding("n", "new_sweep", "Sweep", id="sweep.new", tooltip="Start a sweep against the running server (a form first)"),
        Binding("s", "stop", "Stop", id="sweep.stop", tooltip="Stop after the current level; finished levels are kept"),
        Binding("A", "abort", "Abort", id="sweep.abort", tooltip="Abort now; every finished request is kept (asks first)"),
        Binding("c", "compare", "Compare", id="sweep.compare", tooltip="Compare the last two runs: crossover and recommendation"),
        Binding("y", "second_series", "2nd series", id="sweep.second",
                tooltip="Overlay per-request tok/s, TTFT, the server's own throughput (/metrics), or nothing"),
        Binding("o", "overlays", "Overlays", id="sweep.overlays", tooltip="Show more or fewer earlier runs on the chart"),
        Binding("w", "write_adaptive", "Adaptive profile", id="sweep.adaptive",
                tooltip="Write a profile that turns drafting off above the crossover, its config uploaded to the host"),
        Binding("u", "repeat_uncertain", "Repeat uncertain", id="sweep.repeat",
                tooltip="Measure again the levels the comparison cannot decide, on the running server's run"),
        Binding("f", "refine", "Refine", id="sweep.refine",
                tooltip="Locate where drafting stops paying off: measure between levels, switching servers (asks first)"),
    ]

    def __init__(self, **kw: object):
        super().__init__(**kw)  # type: ignore[arg-type]
        self.border_title = "Sweep"
        self.process: SweepProcess | None = None
        self.run: Run | None = None
        self.levels: list[dict[str, Any]] = []  # level_done events of the run on screen
        self.live: dict[str, Any] = {}  # the level in progress: c, started, requests, done, tokens
        self.settings: SweepSettings | None = None
        self.second = 0
        self.overlay_count = 2
        self.dirty = True
        self.comparison_text: Text | None = None
        self.comparison: Comparison | None = None  # the one on screen
        self._overlay_frames: list[tuple[RGB, Run, Any]] = []
        self.warnings: list[str] = []
        self.legend: list[tuple[str, str, RGB]] = []  # (marker, label, colour) of what the chart shows

    @property
    def pivot(self) -> PivotApp:
        return cast("PivotApp", self.app)

    def compose(self) -> ComposeResult:
        yield PlotextPlot(id="sweep-chart")
        yield Static("", id="sweep-progress")
        table: DataTable[str] = DataTable(id="sweep-levels", cursor_type="row", zebra_stripes=True)
        yield table
        with VerticalScroll(id="sweep-compare"):  # focusable: the arrows scroll a comparison taller than the pane
            yield Static("", id="sweep-compare-text")

    def on_mount(self) -> None:
        table = self.query_one("#sweep-levels", DataTable)
        for col in ("C", "tok/s", "±", "per-req", "TTFT p50", "ITL p50", "errors", "note"):
            table.add_column(col, key=col)
        self.set_interval(REDRAW_S, self._redraw_if_dirty)
        runs = [r for r in list_runs(self.pivot.config.campaign_dir) if r.state != "corrupt"]
        if runs:
            self._show_run(runs[-1])
        self._show_progress()

    # -- drawing --------------------------------------------------------------
    def _overlays(self) -> list[Run]:
        runs = [r for r in list_runs(self.pivot.config.campaign_dir)
                if not r.meta.get("corrupt") and (self.run is None or r.name != self.run.name)]
        return runs[-self.overlay_count:] if self.overlay_count else []

    def _refresh_overlays(self) -> None:
        """Read the earlier runs once per change of run, not at every redraw of a running sweep."""
        frames = [(colour, run, run.measured()) for colour, run in zip(OVERLAY_COLOURS, self._overlays())]
        self._overlay_frames = [(colour, run, frame) for colour, run, frame in frames if frame.height]
        self.dirty = True

    def _redraw_if_dirty(self) -> None:
        if self.dirty:
            self.dirty = False
            self._draw()
            self._show_progress()

    def on_resize(self) -> None:
        self.dirty = True  # the legend's place depends on the chart's height

    def _draw(self) -> None:
        chart = self.query_one(PlotextPlot)
        plt = chart.plt
        plt.clear_data()
        plt.clear_figure()
        plt.theme("pro" if self.app.current_theme.dark else "clear")
        overlays = self._overlay_frames
        self.legend = []
        inside = chart.size.height >= LEGEND_INSIDE_ROWS

        def series(marker: str, label: str, colour: RGB) -> str | None:
            self.legend.append((marker, label, colour))
            return label if inside else None

        # nothing to draw yet: no empty frame, the line under it says what n does
        shown = bool(self.levels or overlays or self.live.get("c"))
        if shown and not chart.display:
            self.call_after_refresh(setattr, self, "dirty", True)  # drawn again once it has a height for the legend
        chart.display = shown
        if not shown:
            return
        # a log C axis drawn as log10(C) with C on the ticks: plotext's own log scale breaks on edge cases
        ticks = sorted({e["c"] for e in self.levels} | {c for _, _, f in overlays for c in f["c"].to_list()}
                       | ({self.live["c"]} if self.live.get("c") else set()))
        plt.xticks([math.log10(c) for c in ticks], [str(c) for c in ticks])
        plt.xlabel("concurrency C (log scale)")
        plt.ylabel("total output tok/s")
        for colour, run, frame in overlays:
            plt.plot(_log(frame["c"].to_list()), frame["total_tok_s"].to_list(),
                     label=series("•", _label(run), colour), color=colour, marker="dot")
        measured = [e for e in self.levels if not e.get("failed")]  # a failed level is not a point of the curve
        if measured:
            xs = _log([e["c"] for e in measured])
            label = _label(self.run)
            colour = (235, 235, 235) if self.app.current_theme.dark else (20, 20, 20)
            plt.plot(xs, [e["total_tok_s"] for e in measured], label=series("⣿", label, colour), color=colour,
                     marker="braille")
            suspect = [e for e in measured if e.get("client_bound")]
            if suspect:
                plt.scatter(_log([e["c"] for e in suspect]), [e["total_tok_s"] for e in suspect], marker="?",
                            color=LIVE_COLOUR, label=series("?", "client-bound: not the server's limit", LIVE_COLOUR))
            name, key, scale = SECOND[self.second]
            if key is not None:
                ys = [(_value(e, key) or 0) * scale for e in measured]
                plt.plot(xs, ys, label=series("x", name, SECOND_COLOUR), color=SECOND_COLOUR, yside="right", marker="x")
                plt.ylabel(name, yside="right")
        if self.live.get("c") and self.live.get("tokens"):
            elapsed = max(1e-6, time.monotonic() - self.live["started"])
            plt.scatter(_log([self.live["c"]]), [self.live["tokens"] / elapsed], marker="●", color=LIVE_COLOUR,
                        label=series("●", f"C={self.live['c']} now", LIVE_COLOUR))
        plt.title("total output tok/s by concurrency")
        chart.refresh()

    def _show_progress(self) -> None:
        text = Text()
        if self.legend and self.query_one(PlotextPlot).size.height < LEGEND_INSIDE_ROWS:
            for marker, label, colour in self.legend:  # no-break spaces: an entry wraps whole or not at all
                text.append(f"{marker}\u00a0", Style(color=Color.from_rgb(*colour)))
                text.append(label.replace(" ", "\u00a0") + "  ")
            text.append("\n")
        if self.process is not None and self.settings is not None and self.live.get("c"):
            levels = list(self.settings.levels)
            k = levels.index(self.live["c"]) + 1 if self.live.get("c") in levels else len(self.levels)
            elapsed = time.monotonic() - self.live["sweep_started"]
            done_fraction = (len(self.levels) + self.live["done"] / max(1, self.live["requests"])) / len(levels)
            eta = f", about {elapsed / done_fraction - elapsed:.0f} s left" if done_fraction > 0.05 else ""
            text.append(f"level {k} of {len(levels)} (C={self.live['c']}): {self.live['done']}/{self.live['requests']} "
                        f"requests, {elapsed:.0f} s{eta}", "bold")
        elif self.process is not None:
            text.append("starting the load generator…", "bold")
        elif self.run is not None:
            text.append(f"run {self.run.name}: {self.run.profile}, {self.run.state}", "dim")
        else:
            text.append("no sweep yet: n starts one against the running server", "dim")
        for warning in self.warnings:
            text.append(f"\n⚠ {warning}", theme_style(self.app, "warning"))
        self.query_one("#sweep-progress", Static).update(text)

    def _add_level_row(self, e: dict[str, Any]) -> None:
        ms = lambda v: "—" if v is None else f"{v * 1000:.0f}"  # noqa: E731
        num = lambda v: "—" if v is None else f"{v:.1f}"  # noqa: E731
        lo, hi, total = e.get("total_tok_s_lo"), e.get("total_tok_s_hi"), e.get("total_tok_s")
        spread = f"{(hi - lo) / 2 / total * 100:.0f}%" if lo is not None and hi is not None and total else "—"
        note = "FAILED" if e.get("failed") else "client-bound" if e.get("client_bound") else \
            "ITL?" if e.get("lagging") else f"{e['short']} short" if e.get("short") else ""
        self.query_one("#sweep-levels", DataTable).add_row(
            str(e["c"]), num(total), spread, num(e.get("req_tok_s_mean")),
            ms(e.get("ttft_p50")), "—" if e.get("itl_p50") is None else f"{e['itl_p50'] * 1000:.1f}",
            f"{e.get('errors', 0)}/{e.get('requests', 0)}", note)

    def _show_run(self, run: Run) -> None:
        self.run = run
        self.levels = list(run.levels().iter_rows(named=True))
        table = self.query_one("#sweep-levels", DataTable)
        table.clear()
        for e in self.levels:
            self._add_level_row(e)
        self._refresh_overlays()

    # -- actions --------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        running = self.process is not None
        if action == "new_sweep":
            return not running and self.pivot.lifecycle is not None and not self.pivot.readonly
        if action in ("stop", "abort"):
            return running
        if action in ("write_adaptive", "repeat_uncertain", "refine"):  # offered with a comparison; they say why not
            shown = self.comparison is not None and self.query_one("#sweep-compare").has_class("-shown")
            return shown and not running and not self.pivot.readonly
        return True

    def action_new_sweep(self) -> None:
        defaults = SweepSettings.from_dict(self.pivot.config.sweep)

        def chosen(settings: SweepSettings | None) -> None:
            if settings is not None:
                self.start_sweep(settings)

        self.app.push_screen(SweepForm(defaults), chosen)

    def action_stop(self) -> None:
        if self.process:
            self.process.stop()
            self.notify("the sweep stops after this level", timeout=4)

    def action_abort(self) -> None:
        def decided(ok: bool | None) -> None:
            if ok and self.process:
                self.process.abort()

        self.app.push_screen(Confirm("Abort the sweep now?", ["Requests in flight are lost; finished ones are kept."],
                                     action_label="Abort"), decided)

    def action_write_adaptive(self) -> None:
        cmp = self.comparison
        if cmp is None:
            return
        try:
            adaptive = plan(self.pivot.config, cmp)
        except NoAdaptiveProfile as e:
            self.notify(str(e), title="Adaptive profile", severity="warning", timeout=12)
            return
        host = spec_host(self.pivot.config, cmp) if adaptive.engine == "sglang" else None
        path = adaptive.profile_path
        lines = [adaptive.summary(),
                 f"will be written to {path}" + (" (replacing the one there)" if path.exists() else ""),
                 (f"its config will be uploaded to {host.name}" if host is not None else
                  "the schedule goes inside --speculative-config" if adaptive.engine == "vllm" else
                  "no host configured: nothing is uploaded"), *[f"warning: {w}" for w in adaptive.warnings]]

        def decided(ok: bool | None) -> None:
            if ok:
                self.write_adaptive(adaptive)
            else:
                self.notify("no profile written", timeout=4)

        self.app.push_screen(Confirm(f"Write profile {adaptive.name}?", [Text(line) for line in lines],
                                     action_label="Write"), decided)

    @work(group="adaptive", exit_on_error=False)
    async def write_adaptive(self, adaptive: AdaptivePlan) -> None:
        cmp = self.comparison
        host = spec_host(self.pivot.config, cmp) if cmp is not None and adaptive.engine == "sglang" else None
        try:
            written = await write_adaptive_profile(adaptive, self.pivot.pool.get(host.name) if host else None)
        except (RemoteError, OSError) as e:
            self.notify(f"no profile written: {e}", title="Adaptive profile", severity="error", timeout=12)
            return
        self.pivot.event_log.append("profile", name=adaptive.name, path=str(adaptive.profile_path),
                                    drafting_up_to=adaptive.drafting_up_to, first_off=adaptive.first_off)
        self.notify(written.describe(), title="Adaptive profile", timeout=12)

    def action_repeat_uncertain(self) -> None:
        """Re-measure, on the running server's run, the levels the comparison on screen cannot decide."""
        cmp = self.comparison
        lifecycle = self.pivot.lifecycle
        if cmp is None or lifecycle is None:
            return
        if not any(r.more_requests for r in cmp.repeats):
            self.notify("no level is uncertain enough for more requests to settle", timeout=6)
            return
        running = lifecycle.status.profile
        side = "b" if cmp.b.profile == running else "a" if cmp.a.profile == running else None
        wanted = {r.c: r.more_requests for r in cmp.repeats if r.more_requests and side in r.sides}
        if side is None or not wanted:
            need = sorted({s for r in cmp.repeats if r.more_requests for s in r.sides})
            self.notify(f"the levels to repeat are {' and '.join(cmp.name(s) for s in need)}'s: switch to "
                        f"{' or '.join((cmp.a if s == 'a' else cmp.b).profile for s in need)} first",
                        severity="warning", timeout=8)
            return
        run = cmp.a if side == "a" else cmp.b
        levels, requests = sorted(wanted), max(wanted.values())
        settings = SweepSettings.from_dict({**run.meta.get("settings", {}), "requests": requests})
        self.notify(f"repeating C = {', '.join(map(str, levels))} of {run.name}, {requests} request(s) each", timeout=6)
        self.start_sweep(settings, run=run, repeat=levels)

    def action_refine(self) -> None:
        cmp = self.comparison
        if cmp is None or self.pivot.lifecycle is None:
            return
        found = bracket(cmp)
        if found is None or found.located:
            self.notify("nothing to refine: " + ("no change of decision between two levels" if found is None else
                        f"{found.what} is located (C = {found.lo}..{found.hi})"), timeout=6)
            return
        lines = [f"{found.what} lies between C = {found.lo} and C = {found.hi}: C = {found.middle} is measured on both "
                 f"runs, and more levels until it is located within ±15 %",
                 f"the server is switched between {cmp.a.profile} and {cmp.b.profile} as often as it takes"]

        def decided(ok: bool | None) -> None:
            if ok:
                self.refine(cmp.a, cmp.b)

        self.app.push_screen(Confirm("Refine the crossover?", [Text(line) for line in lines], action_label="Refine"),
                             decided)

    @work(exclusive=True, group="sweep", exit_on_error=False)
    async def refine(self, a: Run, b: Run) -> None:
        from console.tasks.runbook import ActionFailed, Actions

        lifecycle = self.pivot.lifecycle
        if lifecycle is None:
            return

        async def never(question: str) -> bool:
            return False

        actions = Actions(self.pivot.config, lifecycle.conn, confirm_kill=never, lifecycle=lifecycle,
                          say=lambda line: self.notify(visible(line.strip()), timeout=6))
        self.warnings = [f"refining {a.name} against {b.name}: the server is switched as needed"]
        self.dirty = True
        try:
            await actions.do_refine(a.name, b.name)
        except ActionFailed as e:
            self.notify(f"refinement stopped: {e}", severity="error", timeout=12)
        finally:
            self.warnings = []
        self.show_comparison(a, b)

    def action_second_series(self) -> None:
        self.second = (self.second + 1) % len(SECOND)
        self.dirty = True

    def action_overlays(self) -> None:
        self.overlay_count = (self.overlay_count + 1) % 4
        self.notify(f"{self.overlay_count} earlier run(s) overlaid", timeout=2)
        self._refresh_overlays()

    def action_compare(self) -> None:
        box = self.query_one("#sweep-compare")
        if box.has_class("-shown"):
            had_focus = box.has_focus
            box.remove_class("-shown")
            self.remove_class("-comparing")
            if had_focus:
                self.query_one("#sweep-levels").focus()
            self.refresh_bindings()
            return
        runs = [r for r in list_runs(self.pivot.config.campaign_dir) if not r.meta.get("corrupt") and r.levels().height]
        if len(runs) < 2:
            self.notify("two runs with completed levels are needed to compare", severity="warning")
            return
        self.show_comparison(runs[-2], runs[-1])

    def show_comparison(self, a: Run, b: Run) -> None:
        try:
            cmp = compare(a, b)
            self.comparison = cmp
        except ValueError as e:
            self.notify(str(e), severity="error")
            return
        lines = cmp.report()
        text = Text.assemble((f"{lines[0]}\n", theme_style(self.app, "accent", bold=True)),
                             (f"A = {cmp.name('a')}, B = {cmp.name('b')}\n", "bold"),
                             "\n".join(lines[1:]))
        table = Table(box=None, padding=(0, 1), header_style="dim", pad_edge=False)
        for header in ("C", "A tok/s", "B tok/s", "B/A", "per-req B/A", "ITL B/A", "errors"):
            table.add_column(header, justify="right")

        def ratio(v: Verdict | None) -> Text:
            if v is None or v.ratio is None:
                return Text("—")
            mark = {"a": "A", "b": "B", None: "?"}[v.leader]
            style = theme_style(self.app, "success" if v.leader == "b" else "error" if v.leader == "a" else "warning")
            return Text(f"{v.ratio:.2f}±{(v.spread or 0):.2f} {mark}", style)

        for lv in cmp.levels:
            errors = f"{lv.a.get('errors', 0)}/{lv.b.get('errors', 0)}"
            table.add_row(str(lv.c), f"{lv.total.a.value:.1f}", f"{lv.total.b.value:.1f}", ratio(lv.total),
                          ratio(lv.per_request), ratio(lv.itl), errors)
        self.comparison_text = text
        self.query_one("#sweep-compare-text", Static).update(Group(text, table))
        box = self.query_one("#sweep-compare")
        box.add_class("-shown")
        if self.has_focus_within:
            box.focus()  # the level table it replaces had the focus
        self.add_class("-comparing")  # the comparison has the same levels: it takes the table's room
        self.refresh_bindings()

    async def sweep_for_runbook(self, settings: SweepSettings) -> str:
        """A runbook's sweep, drawn here like any other; its summary, or the reason it failed."""
        from console.tasks.runbook import ActionFailed

        worker = self.start_sweep(settings)
        while worker.state == WorkerState.PENDING:  # wait() refuses a worker that has not started yet
            await asyncio.sleep(0.01)
        await worker.wait()
        summary = self.run.summary() if self.run is not None else None
        if summary is None:
            raise ActionFailed("the sweep finished no level")
        return summary

    @work(exclusive=True, group="sweep", exit_on_error=False)
    async def start_sweep(self, settings: SweepSettings, *, run: Run | None = None, repeat: list[int] | None = None) -> None:
        """A new run, or with `run` and `repeat` those levels of it measured again and merged into it."""
        lifecycle = self.pivot.lifecycle
        cfg = self.pivot.config
        if lifecycle is None or cfg.path is None or self.pivot.host_name is None:
            self.notify("a sweep needs a host from a pivot.toml", severity="error")
            return
        try:
            meta, port = await describe_server(lifecycle.conn, cfg, self.pivot.host_name)
            if run is None:
                run = create_run(cfg.campaign_dir, {**meta, "settings": settings.to_dict()})
            elif mismatch := identity_mismatch(run.meta, meta):
                raise RunError(f"run {run.name} was measured on another server ({mismatch})")
        except (RunError, RemoteError) as e:
            self.notify(str(e), title="No sweep", severity="error", timeout=10)
            return
        self.pivot.event_log.append("sweep", run=run.name, profile=run.profile, levels=repeat or list(settings.levels))
        self.settings = settings
        self._show_run(run)
        self.query_one("#sweep-compare").remove_class("-shown")
        self.remove_class("-comparing")
        self.process = SweepProcess(run, ["--config", str(cfg.path), "--host", self.pivot.host_name, "--port", str(port)],
                                    repeat=repeat, requests=settings.requests if repeat and isinstance(settings.requests, int)
                                    else None)
        self.live = {"sweep_started": time.monotonic(), "done": 0, "requests": 0, "tokens": 0, "started": time.monotonic()}
        self.warnings = []
        self.refresh_bindings()
        try:
            async for event in self.process.events():
                self._on_event(event)
        finally:
            self.process = None
            self.live = {}
            self.refresh_bindings()
            self.dirty = True
        self._show_run(run)
        other = counterpart(run, list_runs(self.pivot.config.campaign_dir)) if run.measured().height else None
        if other is not None:
            self.show_comparison(other, run)

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "sweep_started":
            self.warnings = [visible(str(w)) for w in event.get("warnings", [])]
        elif kind == "level_started":
            self.live.update(c=event["c"], requests=event["requests"] + event.get("warmup", 0), done=0, tokens=0,
                             started=time.monotonic())
        elif kind == "request":
            self.live["done"] = self.live.get("done", 0) + 1
            self.live["tokens"] = self.live.get("tokens", 0) + (event.get("tokens") or 0)
        elif kind == "level_done":
            self.levels.append(event)
            self._add_level_row(event)
        elif kind == "level_retry":
            self.notify(f"C={event['c']} failed ({visible(str(event.get('reason')))}); the server answers again: "
                        "measuring it once more", severity="warning", timeout=8)
        elif kind == "failed":
            self.notify(f"the load generator failed: {visible(str(event['message']))}", severity="error", timeout=10)
        elif kind == "sweep_done" and event.get("failed"):
            self.notify(f"the sweep stopped: {visible(str(event['failed']))}; the run is partial", severity="error",
                        timeout=15)
        elif kind == "sweep_done":
            word = "aborted" if event.get("aborted") else "stopped" if event.get("stopped") else "finished"
            self.notify(f"sweep {word}: {self.run.name if self.run else ''}", timeout=6)
        self.dirty = True

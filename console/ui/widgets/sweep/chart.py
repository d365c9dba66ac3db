"""The sweep's chart: total output tok/s by concurrency on a log C axis, the run on screen, earlier runs overlaid,
the level in progress as a live point, and a second series on the right axis.

Every colour comes from the theme (its chart-* variables, console/ui/themes.py), and the chart is drawn again when
the theme changes. Under an ANSI theme a colour is one of the terminal's 16 (plotext sends it as 38;5;N with N < 16,
which Textual passes on as the terminal's own colour); the frame, ticks and title are drawn in chart-axes on the
pane's own background, through a plotext theme registered for each app theme (textual-plotext's automatic one
paints the canvas in the theme's surface, which an ANSI theme leaves transparent: black on black)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plotext._dict import themes as plotext_themes  # type: ignore[import-untyped]  # the dict textual-plotext reads too
from rich.text import Text
from textual.color import Color, ColorParseError
from textual.theme import Theme
from textual_plotext import PlotextPlot

from console.sweep.analysis.compare import label
from console.sweep.analysis.frontier import points
from console.sweep.model import LevelDone
from console.sweep.runs.store import Run, list_runs
from console.sweep.words.verdicts import at, naming, value
from console.ui.colours import theme_style
from console.ui.widgets.sweep.progress import LiveLevel

OVERLAYS = [("chart-1", "•"), ("chart-2", "+"), ("chart-3", "o"), ("chart-4", "*")]  # earlier runs, oldest first:
# a theme colour and a marker of its own for each, so that the chart reads without colour
CHART_ROWS = 10  # below this, title, ticks and labels leave a curve no rows (and plotext's axis reads downward): a
# line of the numbers instead, and `z` for the chart
DECORATION_ROWS = 5  # the title, the frame's two lines, the x ticks and the x label: the rest is the plot's
Figure = Callable[[LevelDone], float | None]
SECOND: list[tuple[str, Figure] | None] = [  # the right axis' series, in the order `y` steps through them
    ("per-request tok/s", lambda lv: lv.req_tok_s_mean),
    ("TTFT p50 ms", lambda lv: None if lv.ttft_p50 is None else lv.ttft_p50 * 1000),
    ("server's own gen tok/s", lambda lv: lv.server.get("gen_tok_s")),
    None,
]
PlotextColour = str | int | tuple[int, int, int]


def _log(levels: list[int]) -> list[float]:
    return [math.log10(c) for c in levels]


def plotext_colour(value: str | None) -> PlotextColour:
    """A theme colour as plotext takes it: one of the 16 ANSI colours as its number, RGB otherwise, "default" (no
    colour: the pane's own) for the terminal's default or a transparent one."""
    try:
        colour = Color.parse(value) if value else None
    except ColorParseError:
        colour = None
    if colour is None or colour.ansi == -1 or (colour.ansi is None and colour.a == 0):
        return "default"
    return colour.ansi if colour.ansi is not None else colour.rgb


def earlier_runs(campaign_dir: Path, run: Run | None, count: int) -> list[tuple[Run, list[LevelDone]]]:
    """The last `count` runs but the one on screen, oldest first, with their measured levels (none: left out)."""
    rates = run is not None and run.rates  # a chart's levels are all concurrencies, or all rates: one axis
    runs = [r for r in list_runs(campaign_dir) if r.state != "corrupt" and (run is None or r.name != run.name) and r.rates == rates]
    chosen = runs[-count:] if count else []
    return [(r, levels) for r, levels in ((r, r.measured()) for r in chosen) if levels]


@dataclass
class ChartData:
    run: Run | None = None
    levels: list[LevelDone] = field(default_factory=list)  # the levels of the run on screen
    overlays: list[tuple[Run, list[LevelDone]]] = field(default_factory=list)  # earlier runs, oldest first, measured
    live: LiveLevel | None = None  # the level in progress
    second: int = 0  # which SECOND series
    frontier: bool = False  # the second view: total tok/s per GPU against a user's tok/s

    @property
    def rates(self) -> bool:
        """Its levels are request rates (the run on screen's), not concurrencies."""
        return self.run is not None and self.run.rates


class SweepChart(PlotextPlot):
    DEFAULT_CSS = "SweepChart { height: 2fr; min-height: 8; } SweepChart.-empty { display: none; }"

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.legend: list[tuple[str, str, str]] = []  # (marker, label, theme variable) of what the chart shows
        self.data = ChartData()
        self._ys: dict[str, list[float]] = {}  # each y axis' values at the last draw: their ticks
        self.add_class("-empty")  # until a draw has something to show (a pane drawn late showed an empty chart's line)

    def on_mount(self) -> None:  # PlotextPlot's own on_mount runs too
        self._use_theme()  # the frame is the theme's before the first draw too
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, theme: Theme) -> None:
        if not self.has_class("-empty"):
            self.draw(self.data)
        else:
            self._use_theme()

    @property
    def is_compact(self) -> bool:
        """Too short for the chart: one line says the numbers instead."""
        return self.size.height < CHART_ROWS

    def render(self) -> Any:
        with naming(self.data.rates):
            return self.compact() if self.is_compact else super().render()

    def compact(self) -> Text:
        """The chart in one line, for a pane too short to draw it: the level in progress, the last measured and the
        peak (of the frontier too: it is drawn from the same levels)."""
        data, said = self.data, []
        live = data.live
        if live is not None and live.c and live.tokens:
            said.append(f"{at(live.c)} now: {live.tokens / max(1e-6, time.monotonic() - live.started):.1f} tok/s")
        if measured := [e for e in data.levels if e.measured]:
            last, peak = measured[-1], max(measured, key=lambda e: e.total_tok_s)
            per = f", {last.req_tok_s_mean:.1f} per request" if last.req_tok_s_mean is not None else ""
            said.append(f"{at(last.c)}: {last.total_tok_s:.1f} tok/s{per}")
            if peak is not last:
                said.append(f"peak {peak.total_tok_s:.1f} at {at(peak.c)}")
        text = Text("; ".join(said) or "no level measured yet", theme_style(self.app, "chart-run"))
        hint = "z: the chart"
        last_line = text.wrap(self.app.console, max(1, self.size.width))[-1].cell_len
        # the hint whole: on the numbers' last line where it fits, else on a line of its own
        return text.append(("  " if last_line + 2 + len(hint) <= self.size.width else "\n") + hint, "dim")

    def legend_text(self, width: int | None = None) -> Text:
        """The legend, under the chart (plotext's own, inside it, marks each series' axis with L and ⅃, which
        nobody reads): each entry in its series' colour, kept whole, on as many lines of `width` as it takes (a wrap
        at spaces cut "per-request tok/s" from its marker, no-break spaces included)."""
        text, used = Text(), 0
        for marker, name, variable in self.legend:
            entry = Text(f"{marker} ", theme_style(self.app, variable)).append(name)
            if used and width is not None and used + 2 + entry.cell_len > width:
                text.append("\n")
                used = 0
            elif used:
                text.append("  ")
                used += 2
            text.append_text(entry)
            used += entry.cell_len
        return text

    def _curve(self, xs: list[float], ys: list[float], *, scatter: bool = False, yside: str = "left", **kw: Any) -> None:
        """plt.plot (or plt.scatter) of xs and ys, the ys kept for the axis' ticks."""
        self._ys[yside].extend(ys)
        (self.plt.scatter if scatter else self.plt.plot)(xs, ys, yside=yside, **kw)

    def _even_ticks(self) -> None:
        """Each y axis labelled on the rows it has, evenly: plotext spaces its ticks for more rows than a short chart
        has and drops the ones that collide, so that 314.0 stood where 360 was."""
        rows = self.size.height - DECORATION_ROWS
        for side, ys in self._ys.items():
            if rows < 2 or not ys or (lo := min(ys)) == (hi := max(ys)):
                continue
            # a label every row on a short chart, every third or fourth on a tall one (up to twice that where it then
            # reaches the bottom row too), from the top
            apart = 1 if rows <= 8 else 3 if rows <= 30 else 4
            every = next((k for k in range(apart, 2 * apart + 1) if (rows - 1) % k == 0), apart)
            ticks = [hi - (hi - lo) * i / (rows - 1) for i in range(0, rows, every)]  # from the top: the peak is labelled
            self.plt.ylim(lo, hi, yside=side)  # type: ignore[arg-type]  # the stub has yside a number; plotext takes a side
            self.plt.yticks(ticks, [f"{t:.1f}" for t in ticks], yside=side)  # type: ignore[arg-type]

    def on_resize(self) -> None:
        if self.display and self._ys:
            self.draw(self.data)  # the ticks are for the rows it has

    def _series(self, marker: str, name: str, variable: str) -> None:
        self.legend.append((marker, name, variable))

    def _use_theme(self) -> dict[str, PlotextColour]:
        """The chart's colours in the app's theme, and a plotext theme of that name drawing the frame, ticks and
        title in chart-axes on no background of its own."""
        variables = self.app.theme_variables
        colours = {
            name: plotext_colour(variables.get(name))
            for name in ("chart-run", "chart-second", "chart-live", "chart-axes", *(v for v, _ in OVERLAYS))
        }
        name = f"pivot-{self.app.theme}"
        plotext_themes[name] = ["default", "default", colours["chart-axes"], "default", list(colours.values())]
        self.theme = name  # type: ignore[assignment]  # a plotext theme registered here, not one of its own names
        return colours

    def draw(self, data: ChartData) -> bool:
        """Draw the data; False when there is nothing to draw (then the chart hides: no empty frame)."""
        with naming(data.rates):
            return self._draw(data)

    def _draw(self, data: ChartData) -> bool:
        self.data = data
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        colours = self._use_theme()
        self.legend = []
        self._ys = {"left": [], "right": []}

        live = data.live if data.live is not None and data.live.c is not None else None
        shown = bool(data.levels or data.overlays or live)
        self.set_class(not shown, "-empty")  # a class, not `display`: the pane's CSS may hide it for a comparison too
        if not shown:
            return False
        if data.frontier:
            self._draw_frontier(data, colours)
            return True
        # a log C axis drawn as log10(C) with C on the ticks: plotext's own log scale breaks on edge cases
        ticks = sorted(
            {e.c for e in data.levels} | {lv.c for _, levels in data.overlays for lv in levels} | ({live.c} if live and live.c else set())
        )
        plt.xticks([math.log10(c) for c in ticks], [value(c) for c in ticks])
        plt.xlabel("request rate, req/s (log scale)" if data.rates else "concurrency C (log scale)")
        plt.ylabel("total output tok/s")
        for (run, levels), (variable, marker) in zip(data.overlays, OVERLAYS, strict=False):  # at most as many as OVERLAYS
            self._series(marker, label(run), variable)
            self._curve(
                _log([lv.c for lv in levels]),
                [lv.total_tok_s for lv in levels],
                color=colours[variable],
                marker=marker,
            )
        measured = [e for e in data.levels if e.measured]  # a failed level is not a point of the curve
        if measured:
            xs = _log([e.c for e in measured])
            self._series("⣿", label(data.run) if data.run else "this run", "chart-run")
            self._curve(
                xs,
                [e.total_tok_s for e in measured],
                color=colours["chart-run"],
                marker="braille",
            )
            suspect = [e for e in measured if e.client_bound]
            if suspect:
                self._series("?", "client-bound: not the server's limit", "chart-live")
                self._curve(
                    _log([e.c for e in suspect]),
                    [e.total_tok_s for e in suspect],
                    scatter=True,
                    marker="?",
                    color=colours["chart-live"],
                )
            if (second := SECOND[data.second]) is not None:
                name, figure = second
                ys = [figure(e) or 0 for e in measured]
                self._series("x", f"{name} (right axis)", "chart-second")
                self._curve(xs, ys, color=colours["chart-second"], yside="right", marker="x")
                plt.ylabel(name, yside="right")  # type: ignore[call-arg]  # the stub says xside; plotext takes yside
        if live and live.c and live.tokens:
            elapsed = max(1e-6, time.monotonic() - live.started)
            self._series("●", f"{at(live.c)} now", "chart-live")
            self._curve(
                _log([live.c]),
                [live.tokens / elapsed],
                scatter=True,
                marker="●",
                color=colours["chart-live"],
            )
        plt.title("total output tok/s by request rate" if data.rates else "total output tok/s by concurrency")
        self._even_ticks()
        self.refresh()
        return True

    def _draw_frontier(self, data: ChartData, colours: dict[str, PlotextColour]) -> None:
        """Each run's frontier: what it gives in total tok/s per GPU at each speed a user sees, one point a level."""
        plt = self.plt
        shown = [run for run, _ in data.overlays[: len(OVERLAYS)]] + ([data.run] if data.run is not None else [])
        per_gpu = all(run.meta.gpu_count for run in shown)  # one unit for every curve: per GPU where all say how many
        plt.xlabel("a user's tok/s")
        plt.ylabel("total tok/s per GPU" if per_gpu else "total tok/s")
        for (run, levels), (variable, marker) in zip(data.overlays, OVERLAYS, strict=False):
            if found := points(levels, run.meta.gpu_count if per_gpu else None):
                self._series(marker, label(run), variable)
                self._curve(
                    [x for x, _ in found],
                    [y for _, y in found],
                    color=colours[variable],
                    marker=marker,
                )
        if data.run is not None and (found := points(data.levels, data.run.meta.gpu_count if per_gpu else None)):
            self._series("⣿", label(data.run), "chart-run")
            self._curve(
                [x for x, _ in found],
                [y for _, y in found],
                color=colours["chart-run"],
                marker="braille",
            )
        plt.title("the frontier: throughput by a user's speed")
        self._even_ticks()
        self.refresh()

"""The sweep's chart: total output tok/s by concurrency on a log C axis, the run on screen, earlier runs overlaid,
the level in progress as a live point, and a second series on the right axis."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from textual_plotext import PlotextPlot

from console.sweep.compare import label
from console.sweep.store import Run

# RGB, not names: plotext's "yellow" is undefined (textual-plotext draws it purple), and the legend under a short
# chart must show the very colour of the curve
RGB = tuple[int, int, int]
OVERLAY_COLOURS: list[RGB] = [(255, 165, 0), (0, 200, 215), (215, 95, 215), (95, 200, 95)]
OVERLAY_MARKERS = ["•", "+", "o", "*"]  # a marker of its own for each earlier run: the chart reads without colour
SECOND_COLOUR: RGB = (235, 205, 0)
LIVE_COLOUR: RGB = (230, 60, 60)
LEGEND_INSIDE_ROWS = 16  # a shorter chart would be mostly legend: the legend goes under it instead
SECOND = [("per-request tok/s", "req_tok_s_mean", 1.0), ("TTFT p50 ms", "ttft_p50", 1000.0),
          ("server's own gen tok/s", "server_gen_tok_s", 1.0), (None, None, 1.0)]


def _value(level: dict[str, Any], key: str) -> float | None:
    """A level's number, from a live level_done event (server view nested) or a stored row (flattened)."""
    if key.startswith("server_") and key not in level:
        return (level.get("server") or {}).get(key.removeprefix("server_"))
    return level.get(key)


def _log(levels: list[int]) -> list[float]:
    return [math.log10(c) for c in levels]


@dataclass
class ChartData:
    run: Run | None = None
    levels: list[dict[str, Any]] = field(default_factory=list)  # level_done events of the run on screen
    overlays: list[tuple[RGB, Run, Any]] = field(default_factory=list)  # (colour, run, its measured levels)
    live: dict[str, Any] = field(default_factory=dict)  # the level in progress: c, started, tokens
    second: int = 0  # which SECOND series


class SweepChart(PlotextPlot):
    DEFAULT_CSS = "SweepChart { height: 2fr; min-height: 8; }"

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.legend: list[tuple[str, str, RGB]] = []  # (marker, label, colour) of what the chart shows

    @property
    def legend_inside(self) -> bool:
        return self.size.height >= LEGEND_INSIDE_ROWS

    def draw(self, data: ChartData) -> bool:
        """Draw the data; False when there is nothing to draw (then the chart hides: no empty frame)."""
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.theme("pro" if self.app.current_theme.dark else "clear")
        self.legend = []
        inside = self.legend_inside

        def series(marker: str, name: str, colour: RGB) -> str | None:
            self.legend.append((marker, name, colour))
            return name if inside else None

        shown = bool(data.levels or data.overlays or data.live.get("c"))
        self.display = shown
        if not shown:
            return False
        # a log C axis drawn as log10(C) with C on the ticks: plotext's own log scale breaks on edge cases
        ticks = sorted({e["c"] for e in data.levels} | {c for _, _, f in data.overlays for c in f["c"].to_list()}
                       | ({data.live["c"]} if data.live.get("c") else set()))
        plt.xticks([math.log10(c) for c in ticks], [str(c) for c in ticks])
        plt.xlabel("concurrency C (log scale)")
        plt.ylabel("total output tok/s")
        for (colour, run, frame), marker in zip(data.overlays, OVERLAY_MARKERS, strict=False):  # overlays are at most as many as markers
            plt.plot(_log(frame["c"].to_list()), frame["total_tok_s"].to_list(),
                     label=series(marker, label(run), colour), color=colour, marker=marker)
        measured = [e for e in data.levels if not e.get("failed")]  # a failed level is not a point of the curve
        if measured:
            xs = _log([e["c"] for e in measured])
            colour = (235, 235, 235) if self.app.current_theme.dark else (20, 20, 20)
            plt.plot(xs, [e["total_tok_s"] for e in measured], color=colour, marker="braille",
                     label=series("⣿", label(data.run) if data.run else "this run", colour))
            suspect = [e for e in measured if e.get("client_bound")]
            if suspect:
                plt.scatter(_log([e["c"] for e in suspect]), [e["total_tok_s"] for e in suspect], marker="?",
                            color=LIVE_COLOUR, label=series("?", "client-bound: not the server's limit", LIVE_COLOUR))
            name, key, scale = SECOND[data.second]
            if key is not None and name is not None:
                ys = [(_value(e, key) or 0) * scale for e in measured]
                plt.plot(xs, ys, label=series("x", name, SECOND_COLOUR), color=SECOND_COLOUR, yside="right", marker="x")
                plt.ylabel(name, yside="right")  # type: ignore[call-arg]  # the stub says xside; plotext takes yside
        if data.live.get("c") and data.live.get("tokens"):
            elapsed = max(1e-6, time.monotonic() - data.live["started"])
            plt.scatter(_log([data.live["c"]]), [data.live["tokens"] / elapsed], marker="●", color=LIVE_COLOUR,
                        label=series("●", f"C={data.live['c']} now", LIVE_COLOUR))
        plt.title("total output tok/s by concurrency")
        self.refresh()
        return True

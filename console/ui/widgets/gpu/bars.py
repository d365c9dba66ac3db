"""One line per GPU: index, name, memory bar, utilization bar, temperature, power, and a history sparkline."""

from __future__ import annotations

from collections import deque

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from console.gpu.format import bar, gib
from console.gpu.samples import Gpu, Sample
from console.ui.colours import theme_style

SPARK = "▁▂▃▄▅▆▇█"
HISTORY = 600  # samples kept: longer than any screen is wide


def sparkline(values: list[float], width: int) -> str:
    tail = values[-width:]
    return "".join(SPARK[min(7, int(v / 100 * 8))] for v in tail).rjust(width)


class GpuBars(Widget):
    DEFAULT_CSS = """
    GpuBars { height: auto; }
    """

    def __init__(self, **kw: object):
        super().__init__(**kw)  # type: ignore[arg-type]
        self.sample: Sample | None = None
        self.history: dict[int, deque[float]] = {}
        self.absent: str | None = None  # why there are no GPUs to show (no driver, or a host declared without)
        self._drawn: Text | None = None

    def no_gpus(self, why: str) -> None:
        """Said once, in place of the bars, wrapped to the pane's width."""
        if why != self.absent:
            self.absent, self.sample = why, None
            self.styles.height = "auto"
            self.refresh(layout=True)

    def update_sample(self, sample: Sample) -> None:
        self.sample, self.absent = sample, None
        for gpu in sample.gpus:
            self.history.setdefault(gpu.index, deque(maxlen=HISTORY)).append(gpu.util_pct or 0.0)
        height = len(sample.gpus) or 1
        if self.styles.height is None or self.styles.height.value != height:
            self.styles.height = height  # lays the screen out again, only when the number of GPUs changes
        if self._text() != self._drawn:  # most samples of an idle host read the same: no frame for them
            self.refresh()

    def _colour(self, name: str) -> Style:
        return theme_style(self.app, name)

    def _bar(self, fraction: float | None, width: int, colour: Style) -> Text:
        """The bar on a visible track, so that an empty GPU still shows its scale."""
        track = theme_style(self.app, "panel").color
        return Text(bar(fraction, width), style=colour + Style(bgcolor=track))

    def _line(self, gpu: Gpu, width: int) -> Text:
        """idx name │ temp │ power/cap │ MEM bar used/total │ UTIL bar pct │ history, as much as the width allows."""
        frac = gpu.mem_fraction
        mem_style = self._colour("gpu-mem-high") if frac is not None and frac > 0.9 else self._colour("primary")
        util_frac = None if gpu.util_pct is None else gpu.util_pct / 100
        temp = "  ?C" if gpu.temp_c is None else f"{gpu.temp_c:3.0f}C"
        power = "   ?W" if gpu.power_w is None else f"{gpu.power_w:4.0f}W"
        cap = "" if gpu.power_limit_w is None else f"/{gpu.power_limit_w:.0f}"
        mem = f"{gib(gpu.mem_used_mib):>5}/{gib(gpu.mem_total_mib)}G"
        util = "  ?%" if gpu.util_pct is None else f"{gpu.util_pct:3.0f}%"
        name = gpu.name.removeprefix("NVIDIA ")
        text = Text.assemble((f"{gpu.index:>2} ", "bold"))
        if width >= 100:  # everything, and the history in what is left
            fixed = 3 + 11 + 5 + 6 + len(cap) + 5 + len(mem) + 1 + 6 + 5
            mem_w, util_w = 24, 12
            spark_w = width - fixed - mem_w - util_w - 3
            text.append(f"{name[:10]:<10} ", "dim").append(f"{temp} {power}{cap} ").append("MEM ")
            text.append(self._bar(frac, mem_w, mem_style)).append(f" {mem} UTIL ")
            text.append(self._bar(util_frac, util_w, self._colour("success"))).append(f" {util}")
            if spark_w >= 8:
                text.append("  " + sparkline(list(self.history.get(gpu.index, ())), spark_w), self._colour("secondary"))
        elif width >= 60:
            mem_w = max(6, width - 3 - 7 - 5 - 6 - len(mem) - 2 - 6 - 1 - 5)
            text.append(f"{name[:6]:<6} ", "dim").append(f"{temp} {power} ")
            text.append(self._bar(frac, mem_w, mem_style)).append(f" {mem} ")
            text.append(self._bar(util_frac, 6, self._colour("success"))).append(f" {util}")
        else:
            mem_w = max(4, width - 3 - len(mem) - 1 - 5 - 5 - 6)
            text.append(self._bar(frac, mem_w, mem_style)).append(f" {mem} {util} {temp} {power}")
        text.truncate(width)
        return text

    def render(self) -> Text:
        self._drawn = self._text()
        return self._drawn

    def _text(self) -> Text:
        if self.absent is not None:
            return Text(self.absent, style="bold")
        if self.sample is None:
            return Text("waiting for the first sample…", style="dim")
        if not self.sample.gpus:
            return Text("the driver reports no GPUs on this host", style="dim")
        width = self.size.width or 80
        return Text("\n").join(self._line(g, width) for g in self.sample.gpus)

"""The comparison on screen: its sentences (the recommendation first), and one row per level with B/A, its 95 %
spread and who leads (A, B, or ? where the intervals cannot tell). Focusable: the arrows scroll one taller than
the pane."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from console.sweep.analysis.compare import Comparison
from console.sweep.analysis.intervals import Verdict
from console.sweep.words.comparison import report, short_names
from console.sweep.words.levels import ratio_text
from console.ui.colours import theme_style

WIDE_ENOUGH = 100  # columns: below this the ratios of seven columns are what fits


class ComparisonView(VerticalScroll):
    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.comparison: Comparison | None = None
        self.text: Text | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="sweep-compare-text")

    def show(self, cmp: Comparison, *, keys: bool = True, measures: bool = True) -> None:
        """`keys`: say what w, u and f do with it (not with --readonly, which takes them away); `measures`: u and f
        too (they measure on the server this console manages)."""
        said = "w writes the adaptive profile" + (", u measures undecided levels again, f refines the crossover" if measures else "")
        self.comparison = cmp
        lines = report(cmp, short_names(cmp))
        head = Text.assemble(
            (f"A = {cmp.names['a']}, B = {cmp.names['b']}\n", "bold"),
            (f"{lines[0]}\n", theme_style(self.app, "accent", bold=True)),
            (f"{said}\n" if keys else "", "dim"),
        )
        details = Text("\n".join(lines[1:]))
        self.text = Text.assemble(head, details)
        table = Table(box=None, padding=(0, 1), header_style="dim", pad_edge=False)
        # energy where a host read power, and where the pane is wide enough for an eighth column (the table and
        # `pivot compare` have it at any width)
        width = self.parent.size.width if isinstance(self.parent, Widget) else 0  # (this view is hidden until shown)
        energy = any(lv.energy for lv in cmp.levels) and width >= WIDE_ENOUGH
        errors = any(lv.a.errors or lv.b.errors for lv in cmp.levels)  # (none: the notes say nothing failed either)
        itl = width >= WIDE_ENOUGH or not errors  # a narrow pane keeps the errors over ITL: `pivot compare` has both
        headers = [cmp.axis, "A tok/s", "B tok/s", "B/A", "per-req B/A", *(["ITL B/A"] if itl else []), *(["J/tok B/A"] if energy else [])]
        for header in [*headers, *(["errors A, B"] if errors else [])]:
            table.add_column(header, justify="right")
        for lv in cmp.levels:
            table.add_row(
                cmp.level(lv.c),
                f"{lv.total.a.value:.1f}",
                f"{lv.total.b.value:.1f}",
                self._ratio(lv.total),
                self._ratio(lv.per_request),
                *([self._ratio(lv.itl)] if itl else []),
                *([self._ratio(lv.energy)] if energy else []),
                *([f"{lv.a.errors}, {lv.b.errors}"] if errors else []),
            )
        # the headline and the levels first, where the pane shows them without a scroll; the details under them
        head.rstrip()
        self.query_one("#sweep-compare-text", Static).update(Group(head, table, details))
        self.add_class("-shown")

    def hide(self) -> None:
        self.remove_class("-shown")

    def _ratio(self, v: Verdict | None) -> Text:
        if v is None or v.ratio is None or v.alike:  # alike: the plain text colour, nothing to act on
            return Text(ratio_text(v))
        style = theme_style(self.app, "success" if v.leader == "b" else "error" if v.leader == "a" else "warning")
        return Text(ratio_text(v), style)

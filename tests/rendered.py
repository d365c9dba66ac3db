"""What the console puts on the screen, cell run by cell run, with the colours Textual emits for it: for the
colour and contrast tests.

The segments are read from the screen's compositor (`render_strips`), after Textual's own line filters: under a
truecolor theme ANSI and dim colours are already turned into RGB there; under an ANSI theme (`ansi = true`) they
are what the terminal receives, and are shown here with the palette Textual itself uses to show ANSI colours
(`App.ansi_theme`: MONOKAI for a dark theme, ALABASTER for a light one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rich.color import Color as RichColor
from rich.color import ColorType
from rich.color_triplet import ColorTriplet
from rich.style import Style
from rich.terminal_theme import TerminalTheme
from textual.app import App
from textual.constants import DIM_FACTOR
from textual.errors import NoWidget
from textual.filter import dim_color
from textual.screen import ModalScreen

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class Cells:
    """A run of cells drawn in one style: where, what, by which widget, and the colours as emitted."""

    x: int
    y: int
    text: str
    widget: str  # the widget under the run's first cell: "SweepChart#sweep-chart"
    fg: RichColor | None  # None: the terminal's default
    bg: RichColor | None
    dim: bool
    reverse: bool
    behind: bool  # the screen's own cell under a modal: the faded screen behind the dialog

    def __str__(self) -> str:
        return f"{self.widget} at ({self.x},{self.y}) {self.text.strip()[:24]!r}"


def cells(app: App[Any]) -> Iterator[Cells]:
    """Every run of cells on the screen that shows something (not only spaces)."""
    screen = app.screen
    for y, strip in enumerate(screen._compositor.render_strips()):
        x = 0
        for segment in strip:
            if segment.control:
                continue
            style, width = segment.style or Style(), segment.cell_length
            if segment.text.strip():
                try:
                    widget, _ = screen.get_widget_at(x, y)
                except NoWidget:  # none expected: measured all the same
                    widget = None
                name = "?" if widget is None else f"{type(widget).__name__}#{widget.id}" if widget.id else type(widget).__name__
                yield Cells(
                    x,
                    y,
                    segment.text,
                    name,
                    style.color,
                    style.bgcolor,
                    bool(style.dim),
                    bool(style.reverse),
                    behind=widget is screen and isinstance(screen, ModalScreen),
                )
            x += width


def terminal_theme(app: App[Any]) -> TerminalTheme:
    """The palette Textual shows ANSI colours with: MONOKAI for a dark theme, ALABASTER for a light one."""
    return app.ansi_theme


def rgb(colour: RichColor | None, theme: TerminalTheme, *, foreground: bool) -> RGB:
    if colour is None or colour.type == ColorType.DEFAULT:
        triplet: ColorTriplet = theme.foreground_color if foreground else theme.background_color
    else:
        triplet = colour.get_truecolor(theme, foreground=foreground)
    return (triplet.red, triplet.green, triplet.blue)


def shown(run: Cells, theme: TerminalTheme) -> tuple[RGB, RGB]:
    """The run's text colour and background as a terminal with this palette shows them (reverse swapped, dim
    blended towards the background as Textual does)."""
    fg, bg = rgb(run.fg, theme, foreground=True), rgb(run.bg, theme, foreground=False)
    if run.reverse:
        fg, bg = bg, fg
    if run.dim:
        dimmed = dim_color(RichColor.from_rgb(*bg), RichColor.from_rgb(*fg), DIM_FACTOR).triplet
        assert dimmed is not None
        fg = (dimmed.red, dimmed.green, dimmed.blue)
    return fg, bg


def luminance(colour: RGB) -> float:
    """WCAG 2 relative luminance."""

    def linear(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: RGB, b: RGB) -> float:
    """WCAG 2 contrast ratio, 1 to 21."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def is_16_colour(colour: RichColor | None) -> bool:
    """The terminal's default, or one of its 16 ANSI colours."""
    return (
        colour is None
        or colour.type in (ColorType.DEFAULT, ColorType.STANDARD)
        or (colour.type == ColorType.EIGHT_BIT and colour.number is not None and colour.number < 16)
    )

"""Theme colours as Rich styles, for widgets that render Rich Text.

Theme variables hold Textual colour strings ("#5fafd7", "ansi_blue"); Rich
needs its own colours, and ANSI names differ between the two.

A widget builds its Text once (a table row, a log line, a comparison) and keeps it, so a colour taken from the
theme would stay the old theme's after the theme changes at runtime. The style says which variable its colour came
from instead, and `Recolour`, a line filter the app puts before Textual's own, gives such a segment the variable's
colour in the theme on screen whenever it is drawn: no widget needs to rebuild its text when the theme changes.
"""

from __future__ import annotations

from functools import lru_cache

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.app import App
from textual.color import Color, ColorParseError
from textual.filter import LineFilter

from console.server.state import ServerState

# How a server's state looks wherever it is drawn (the header, the Server pane): a glyph and a theme colour.
SERVER_LOOK = {
    ServerState.STOPPED: ("○", "foreground"),
    ServerState.STARTING: ("◌", "warning"),
    ServerState.READY: ("●", "success"),
    ServerState.UNHEALTHY: ("▲", "error"),
    ServerState.CRASHED: ("✕", "error"),
    ServerState.STOPPING: ("◌", "warning"),
    ServerState.UNKNOWN: ("?", "warning"),
}
THEMED = "pivot-colour"  # a style's meta: (the theme variable, the colour it had when the style was made)


def rich_colour(value: str | None) -> RichColor | None:
    """A theme variable's colour for Rich; None for none, one that does not parse, or transparent (an ANSI theme's
    surface and panel: the terminal's own background shows)."""
    try:
        colour = Color.parse(value) if value else None
    except ColorParseError:
        return None
    return None if colour is None or (colour.a == 0 and colour.ansi is None) else colour.rich_color


def theme_style(app: App[object], name: str, *, bold: bool = False) -> Style:
    colour = rich_colour(app.theme_variables.get(name))
    meta = {THEMED: (name, colour.name)} if colour is not None else None
    return Style(color=colour, bold=bold or None, meta=meta)


class Recolour(LineFilter):
    """Segments styled by theme_style get their variable's colour in these theme variables (one instance per set:
    Textual caches a filtered line per filter)."""

    def __init__(self, variables: dict[str, str]):
        super().__init__()
        self.variables = variables

    @lru_cache(1024)  # noqa: B019  # as Textual's own filters: one per theme, few styles
    def restyle(self, style: Style) -> Style:
        themed = style.meta.get(THEMED) if style.meta else None
        if themed is None or style.color is None or style.color.name != themed[1]:
            return style  # not a theme colour, or one replaced since (a style added over it)
        now = rich_colour(self.variables.get(themed[0])) or rich_colour(self.variables.get("foreground"))
        return style + Style(color=now) if now is not None else style

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        restyle = self.restyle
        return [Segment(text, restyle(style) if style is not None else None, control) for text, style, control in segments]

"""Theme colours as Rich styles, for widgets that render Rich Text.

Theme variables hold Textual colour strings ("#5fafd7", "ansi_blue"); Rich
needs its own colours, and ANSI names differ between the two.
"""

from __future__ import annotations

from rich.style import Style
from textual.app import App
from textual.color import Color, ColorParseError


def theme_style(app: App[object], name: str, *, bold: bool = False) -> Style:
    value = app.theme_variables.get(name)
    try:
        colour = Color.parse(value).rich_color if value else None
    except ColorParseError:
        colour = None
    return Style(color=colour, bold=bold or None)

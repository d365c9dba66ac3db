"""A Static for text that is set again and again (each sample, each second): it redraws only when the text
changed, and lays the screen out again only when its shape did (another number of lines, a longer line).
A plain `Static.update` lays out the whole screen at every call."""

from __future__ import annotations

from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static


def _shape(content: object) -> tuple[int, int]:
    lines = (content.plain if isinstance(content, Text) else str(content)).split("\n")
    return len(lines), max(len(line) for line in lines)


class QuietStatic(Static):
    _shown: object = ""
    _shape: tuple[int, int] = (1, 0)

    def update(self, content: VisualType = "", *, layout: bool | None = None) -> None:
        if content == self._shown:
            return
        shape = _shape(content)
        relayout = layout if layout is not None else shape != self._shape
        self._shown, self._shape = content, shape
        super().update(content, layout=relayout)

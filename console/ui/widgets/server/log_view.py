"""The server log: live, scrollable, filterable, error lines highlighted.

It follows new lines while the view is at the bottom and stops following as
soon as the operator scrolls up; scrolling back to the bottom resumes.
"""

from __future__ import annotations

import re
from collections import deque

from rich.text import Text
from textual import events
from textual.scrollbar import ScrollTo, ScrollUp
from textual.widgets import RichLog

from console.ui.colours import theme_style
from console.untrusted import visible

ERROR = re.compile(r"error|traceback|exception|fatal|out of memory|killed|segmentation fault|crashed", re.IGNORECASE)
WARNING = re.compile(r"warn", re.IGNORECASE)
KEEP = 5000


class LogView(RichLog):
    DEFAULT_CSS = """
    LogView { height: 1fr; min-height: 3; background: $surface; overflow-x: hidden; }
    """

    def __init__(self, **kw: object):
        # a long line is cut at the pane's edge, never scrolled sideways, and shown whole when the pane is zoomed
        # (wrapped lines would keep the width they arrived at: rewrapping 5,000 at each zoom costs the loop)
        super().__init__(max_lines=KEEP, wrap=False, markup=False, highlight=False, auto_scroll=False, **kw)  # type: ignore[arg-type]
        self.lines_kept: deque[str] = deque(maxlen=KEEP)
        self.filter_text = ""
        self.following = True

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new >= self.max_scroll_y:
            self.following = True  # at the bottom: follow

    # Only the operator stops the following: a layout change (a pane zoomed, the preflight lines cleared) also
    # moves scroll_y, and must not leave the log stuck above the newest lines.
    def action_scroll_up(self) -> None:
        self.following = False
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self.following = False
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self.following = False
        super().action_scroll_home()

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.following = False
        super()._on_mouse_scroll_up(event)

    def _on_scroll_up(self, event: ScrollUp) -> None:  # a click on the scrollbar above the thumb
        self.following = False
        super()._on_scroll_up(event)

    def _on_scroll_to(self, message: ScrollTo) -> None:  # the thumb dragged
        self.following = message.y is None or message.y >= self.max_scroll_y
        super()._on_scroll_to(message)

    def on_resize(self, event: events.Resize) -> None:  # RichLog's own handler runs too (Textual calls each class's)
        """A pane zoomed or given back its room: a log that was following stays at its end."""
        if self.following:
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)

    def _styled(self, line: str) -> Text:
        if ERROR.search(line):
            return Text(line, style=theme_style(self.app, "error", bold=True))
        if WARNING.search(line):
            return Text(line, style=theme_style(self.app, "warning"))
        return Text(line)

    def add(self, line: str) -> None:
        """A line of the server's log (the host's bytes): shown with its control characters made visible."""
        line = visible(line)
        self.lines_kept.append(line)
        if self.filter_text.lower() in line.lower():
            self.write(self._styled(line), scroll_end=self.following)

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self.clear()
        for line in self.lines_kept:
            if text.lower() in line.lower():
                self.write(self._styled(line), scroll_end=False)
        self.scroll_end(animate=False)
        self.following = True

    @property
    def shown(self) -> list[str]:
        return [line for line in self.lines_kept if self.filter_text.lower() in line.lower()]

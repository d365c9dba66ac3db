"""A pane whose feature is not built yet: it says what it will hold, and shows nothing fake."""

from __future__ import annotations

from textual.widgets import Static


class PendingPane(Static, can_focus=True):
    DEFAULT_CSS = """
    PendingPane { color: $text-muted; padding: 0 1; }
    """

    def __init__(self, title: str, holds: str, command: str, *, id: str):
        super().__init__(f"{holds}\n\nNot built yet: this pane and `{command}` arrive with their own issue.", id=id)
        self.border_title = title

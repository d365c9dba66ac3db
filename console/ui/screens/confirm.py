"""A confirmation for a destructive action: y / n / escape, and the focus on Cancel."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


class Confirm(ModalScreen[bool]):
    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical {
        width: 90%; max-width: 120; height: auto; max-height: 90%;
        border: thick $error; background: $surface; padding: 0 1;
    }
    Confirm .body { height: auto; max-height: 18; overflow-y: auto; }
    Confirm .note { color: $warning; height: auto; }
    Confirm Horizontal { height: auto; align-horizontal: right; margin-top: 1; }
    Confirm Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("y", "confirm", "Confirm", id="confirm.yes"),
        Binding("n,escape", "cancel", "Cancel", id="confirm.no"),
    ]

    def __init__(self, title: str, body: list[RenderableType], *, action_label: str, note: str = ""):
        super().__init__()
        self.title_text, self.body, self.action_label, self.note = title, body, action_label, note

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(self.title_text, style="bold"))
            for part in self.body:
                yield Static(part, classes="body")
            if self.note:
                yield Static(Text(self.note), classes="note")
            with Horizontal():
                yield Button(f"{self.action_label}  (y)", variant="error", id="confirm")
                yield Button("Cancel  (n)", variant="primary", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()  # Enter on a dialog that just appeared must not act

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


async def confirmed(app: App[Any], title: str, body: list[RenderableType], action_label: str) -> bool:
    """The operator's answer to a Confirm, awaited (from a worker: Textual's push_screen_wait)."""
    answer: bool = await app.push_screen_wait(Confirm(title, body, action_label=action_label))
    return answer

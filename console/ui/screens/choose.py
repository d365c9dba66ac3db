"""A question with a few answers, each on its own key, and Cancel (n / escape, with the focus)."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


class Choose(ModalScreen[str | None]):
    """answers: (key, label, value); dismissed with the chosen value, None for Cancel."""

    DEFAULT_CSS = """
    Choose { align: center middle; }
    Choose > Vertical { width: 90%; max-width: 100; height: auto; border: thick $warning; background: $surface; padding: 0 1; }
    Choose .body { height: auto; }
    Choose Vertical Vertical { height: auto; }
    Choose Horizontal { height: auto; margin-top: 1; }
    Choose Button { margin: 0 1 1 0; }
    """
    BINDINGS = [Binding("n,escape", "cancel", "Cancel", id="choose.no")]

    def __init__(self, title: str, body: list[RenderableType], answers: list[tuple[str, str, str]]):
        super().__init__()
        self.title_text, self.body, self.answers = title, body, answers

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(self.title_text, style="bold"))
            for part in self.body:
                yield Static(part, classes="body")
            with Vertical():
                for key, label, value in self.answers:
                    yield Button(f"{label}  ({key})", id=f"answer-{value}", compact=True)
            with Horizontal():
                yield Button("Cancel  (n)", variant="primary", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()  # Enter on a question that just appeared must not act

    def on_key(self, event) -> None:  # type: ignore[no-untyped-def]
        for key, _label, value in self.answers:
            if event.key == key:
                event.stop()
                self.dismiss(value)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        chosen = (event.button.id or "").removeprefix("answer-")
        self.dismiss(None if event.button.id == "cancel" else chosen)

    def action_cancel(self) -> None:
        self.dismiss(None)

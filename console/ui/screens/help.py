"""Every key, from the bindings themselves, so the help can never drift from the code."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 80; max-width: 95%; height: auto; max-height: 90%; border: round $accent;
                                  background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def __init__(self, sections: list[tuple[str, list[Binding]]], notes: list[str] | None = None):
        """notes: lines shown first (the demo's own host: its ssh line, how to crash its server, its config)."""
        super().__init__()
        self.sections, self.notes = sections, notes or []
        self.rows: list[tuple[str, str, str]] = []  # (section, keys, what it does), as shown

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            if self.notes:
                yield Static(Text("\n".join(self.notes) + "\n"))
            for title, bindings in self.sections:
                table = Table(box=None, show_header=False, pad_edge=False, title=title, title_justify="left", title_style="bold")
                table.add_column(width=14)
                table.add_column()
                for b in bindings:
                    keys = ", ".join(self.app.get_key_display(Binding(k.strip(), "")) for k in b.key.split(","))
                    table.add_row(keys, b.tooltip or b.description)
                    self.rows.append((title, keys, b.tooltip or b.description))
                yield Static(table)
            yield Static("\nEsc closes this help.", classes="dim")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)

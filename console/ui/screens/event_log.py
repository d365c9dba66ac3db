"""The campaign's event log: every kill, start, stop, sweep, adaptive profile and task change, newest last."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from console.events import summary
from console.untrusted import visible

SHOWN = 500


class EventLogScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    EventLogScreen { align: center middle; }
    EventLogScreen > Vertical { width: 95%; height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    EventLogScreen DataTable { height: 1fr; }
    """
    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, events: list[dict[str, Any]], path: str):
        super().__init__()
        self.events, self.path = events[-SHOWN:], path

    def compose(self) -> ComposeResult:
        with Vertical():
            which = f"the last {SHOWN} events" if len(self.events) == SHOWN else f"{len(self.events)} events"
            yield Static(Text(f"{which} of {self.path}  (pivot events --export FILE writes them all)", style="bold"))
            table: DataTable[Text] = DataTable(cursor_type="row")
            yield table

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("TIME", "KIND", "WHAT")
        for event in self.events:
            table.add_row(
                Text(visible(str(event.get("time", ""))[:19].replace("T", " "))),
                Text(visible(str(event.get("kind", "")))),
                Text(summary(event)),
            )
        table.move_cursor(row=max(0, table.row_count - 1))
        table.focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)

"""`pivot --fleet`: one line per GPU host of the config (link, round trip, GPUs busy, memory, strays, the managed
server), every host followed at once (console/fleet.py); Enter opens the console on the highlighted host, and
quitting that console comes back here."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static

from console.config import Config
from console.fleet import COLUMNS, FleetWatch
from console.ui.themes import DEFAULT_THEME, load_themes

REFRESH_S = 1.0


class FleetApp(App[str | None]):
    """Returns the host chosen with Enter, or None when quit."""

    TITLE = "pivot fleet"
    CSS = "#fleet-head { padding: 0 1; color: $text-muted; } DataTable { height: 1fr; }"
    BINDINGS = [Binding("enter", "open_host", "Open host", show=True), Binding("q", "quit", "Quit")]

    def __init__(self, config: Config, *, theme: str | None = None, fleet: FleetWatch | None = None):
        super().__init__()
        self.fleet = fleet or FleetWatch(config)
        themes, _ = load_themes()
        for t in themes:
            self.register_theme(t)
        self.theme = theme if theme in self.available_themes else DEFAULT_THEME

    def compose(self) -> ComposeResult:
        yield Static(f"{len(self.fleet.sessions)} GPU hosts, followed at once: Enter opens one, q quits",
                     id="fleet-head")
        yield DataTable(id="fleet", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        for view in self.fleet.views():
            table.add_row(*view.cells(), key=view.host)
        self.fleet.start()
        self.set_interval(REFRESH_S, self.refresh_rows)

    def refresh_rows(self) -> None:
        table = self.query_one(DataTable)
        for view in self.fleet.views():
            for col, cell in zip(COLUMNS, view.cells(), strict=True):
                if str(table.get_cell(view.host, col)) != str(cell):
                    table.update_cell(view.host, col, cell, update_width=True)

    def action_open_host(self) -> None:  # the table's own Enter selects the row; this is the footer's key
        self.query_one(DataTable).action_select_cursor()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.exit(str(event.row_key.value))

    async def on_unmount(self) -> None:
        await self.fleet.close()

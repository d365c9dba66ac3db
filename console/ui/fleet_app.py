"""`pivot --fleet`: one line per GPU host of the config (link, round trip, GPUs busy, memory, strays, the managed
server), every host followed at once (console/fleet.py); Enter opens the console on the highlighted host, and
quitting that console comes back here; K kills the highlighted host's stray processes, as its GPU pane's K does."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static

from console.actions import kill
from console.config import Config
from console.fleet import COLUMNS, FleetWatch
from console.gpu.format import kill_strays_question
from console.gpu.kill import KillPlan
from console.remote.errors import RemoteError
from console.ui.log_bridge import ScreenLog
from console.ui.screens.confirm_kill import kill_confirmed
from console.ui.themes import DEFAULT_THEME, load_themes

REFRESH_S = 1.0
# at 80 columns every column shows: short headers, long cells cut (the line under the table says the host's whole)
CELL_MAX = {"SERVER": 24, "NOTE": 10}
HEADERS = {"GPUS BUSY": "BUSY", "MEM GiB": "GiB"}


def fitted(col: str, cell: Any) -> Any:
    """A cell cut to its column's room, with an ellipsis (the highlighted host's line is said whole below the table)."""
    room = CELL_MAX.get(col)
    if room is None or len(str(cell)) <= room:
        return cell
    text = cell.copy() if isinstance(cell, Text) else Text(str(cell))
    text.truncate(room, overflow="ellipsis")
    return text


class FleetApp(App[str | None]):
    """Returns the host chosen with Enter, or None when quit."""

    TITLE = "pivot fleet"
    CSS = "#fleet-head, #fleet-line { padding: 0 1; color: $text-muted; } DataTable { height: 1fr; }"
    BINDINGS = [
        Binding("enter", "open_host", "Open host", show=True),
        Binding("K", "kill_stray", "Kill stray", tooltip="Kill the highlighted host's stray processes (asks first)"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        config: Config,
        *,
        theme: str | None = None,
        fleet: FleetWatch | None = None,
        readonly: bool = False,
        remembered: dict[str, tuple[Any, ...]] | None = None,
        cursor_host: str | None = None,
    ):
        """readonly: no kill (--readonly); remembered: each host's line as the fleet left it (back from a host), shown
        until this watch hears from it; cursor_host: the line the cursor starts on."""
        super().__init__()
        self.readonly = readonly
        self.remembered = dict(remembered or {})
        self.whole: dict[str, tuple[Any, ...]] = {}  # each host's cells before they were cut to fit
        self.cursor_host = cursor_host
        self.fleet = fleet or FleetWatch(config)
        themes, _ = load_themes()
        for t in themes:
            self.register_theme(t)
        self.theme = theme if theme in self.available_themes else DEFAULT_THEME

    def compose(self) -> ComposeResult:
        yield Static(
            f"{len(self.fleet.sessions)} GPU hosts, followed at once: Enter opens one, K kills its strays, q quits", id="fleet-head"
        )
        yield DataTable(id="fleet", cursor_type="row", zebra_stripes=True)
        yield Static("", id="fleet-line")
        yield Footer()

    def on_mount(self) -> None:
        self._screen_log = ScreenLog(self)  # a warning from a host (its workdir made) never over the screen
        self._screen_log.install()
        table = self.query_one(DataTable)
        for col in COLUMNS:
            table.add_column(HEADERS.get(col, col), key=col)
        for view in self.fleet.views():
            cells = self.remembered.get(view.host, view.cells())
            table.add_row(*(fitted(col, cell) for col, cell in zip(COLUMNS, cells, strict=True)), key=view.host)
        if self.cursor_host in self.fleet.sessions:  # back from a host: on the line it was opened from
            table.move_cursor(row=table.get_row_index(self.cursor_host))
        self.fleet.start()
        self.set_interval(REFRESH_S, self.refresh_rows)

    def refresh_rows(self) -> None:
        table = self.query_one(DataTable)
        for view in self.fleet.views():
            if view.state == "connecting" and view.host in self.remembered:
                continue  # its last line stays until this watch hears from it
            self.remembered.pop(view.host, None)
            self.whole[view.host] = view.cells()
            for col, cell in zip(COLUMNS, view.cells(), strict=True):
                if str(table.get_cell(view.host, col)) != str(fitted(col, cell)):
                    table.update_cell(view.host, col, fitted(col, cell), update_width=True)
        self._say_line()

    def on_data_table_row_highlighted(self) -> None:
        self._say_line()

    def _say_line(self) -> None:
        """The highlighted host's server and note, whole: the table cuts them to fit 80 columns."""
        table = self.query_one(DataTable)
        if not table.row_count:
            return
        host = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        cells = dict(zip(COLUMNS, self.whole.get(host) or self.remembered.get(host) or (), strict=False))
        said = [str(cells[c]) for c in ("SERVER", "NOTE") if str(cells.get(c, "")) not in ("", "—")]
        self.query_one("#fleet-line", Static).update(Text(f"{host}: {'; '.join(said)}" if said else host))

    def action_open_host(self) -> None:  # the table's own Enter selects the row; this is the footer's key
        self.query_one(DataTable).action_select_cursor()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        table = self.query_one(DataTable)
        self.remembered = {
            str(key.value): self.whole.get(str(key.value)) or self.remembered.get(str(key.value)) or tuple(table.get_row(key))
            for key in table.rows
        }
        self.cursor_host = str(event.row_key.value)
        self.exit(self.cursor_host)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (self.readonly and action == "kill_stray")

    @work(group="ask", exit_on_error=False)
    async def action_kill_stray(self) -> None:
        """The GPU pane's K for the highlighted host: its stray processes, the same confirmation, the same kill."""
        table = self.query_one(DataTable)
        host = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        sample, session = self.fleet.sample(host), self.fleet.sessions[host]
        stray = [p.pid for p in sample.stray] if sample is not None else []
        if sample is None or not stray:
            self.notify(f"{host}: no stray processes" if sample is not None else f"{host}: no sample yet", timeout=3)
            return
        plan = kill.plan(session, sample, stray)
        if await kill_confirmed(self, plan, self.fleet.config.kill_grace_s, kill_strays_question(len(set(stray)), host)):
            self.run_kill(host, plan)

    @work(group="fleet-kill", exit_on_error=False)
    async def run_kill(self, host: str, plan: KillPlan) -> None:
        try:
            report = await kill.kill(self.fleet.sessions[host], plan, via="console")
        except RemoteError as e:
            self.notify(f"{host}: {e}", title="Not killed", severity="error")
            return
        failed = [report.said(o) for o in report.outcomes if not o.ended]
        self.notify(
            "\n".join([*failed, *report.advice])
            or f"{host}: {len(report.outcomes)} ended; the line shows the memory as it comes back (Enter opens the host for more)",
            severity="warning" if failed else "information",
        )

    async def on_unmount(self) -> None:
        self._screen_log.remove()
        await self.fleet.close()

"""The pivot console: one screen, four panes, driven by the core over one SSH connection."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.widgets import Footer

from console.config import Config
from console.remote import ConnectionEvent, HostPool
from console.ui.messages import ConnectionChanged
from console.ui.widgets.host_status import HostStatus
from console.ui.widgets.pending_pane import PendingPane


class PivotApp(App[None]):
    TITLE = "pivot"
    CSS_PATH = ["styles/app.tcss"]
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("r", "reconnect", "Reconnect", id="reconnect", tooltip="Drop and re-establish the SSH connection"),
    ]

    def __init__(self, config: Config, host: str, *, theme: str | None = None):
        super().__init__()
        self.config = config
        self.host_name = host
        self.pool = HostPool(config)
        self._requested_theme = theme

    def compose(self) -> ComposeResult:
        yield HostStatus(self.host_name, id="host-status")
        with Container(id="panes"):
            yield PendingPane("GPUs", "Per-GPU memory, utilization, temperature and power, and the processes that hold GPU memory.", id="gpus")
            yield PendingPane("Server", "Launch profiles, start / stop / restart, readiness and the live server log.", id="server")
            yield PendingPane("Tasks", "The campaign's task list, persisted and advanced by the console's actions.", id="tasks")
            yield PendingPane("Sweep", "Concurrency sweeps drawn as they run, saved, and compared run against run.", id="sweep")
        yield Footer()

    def on_mount(self) -> None:
        if self._requested_theme and self._requested_theme in self.available_themes:
            self.theme = self._requested_theme
        connection = self.pool.get(self.host_name)
        connection.add_listener(lambda event: self.post_message(ConnectionChanged(event)))
        connection.start()

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        self.query_one(HostStatus).event = message.event

    def action_reconnect(self) -> None:
        self.pool.get(self.host_name).drop()

    async def on_unmount(self) -> None:
        await self.pool.close()

    @property
    def connection_event(self) -> ConnectionEvent | None:
        return self.query_one(HostStatus).event

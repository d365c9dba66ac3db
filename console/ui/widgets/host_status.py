"""The top line: host, connection state with round-trip time, profile, server state."""

from __future__ import annotations

import time

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from console.remote import ConnectionEvent, ConnState

_STYLE = {
    ConnState.UP: "bold $success",
    ConnState.CONNECTING: "$warning",
    ConnState.RECONNECTING: "bold $warning",
    ConnState.DOWN: "bold $error",
    ConnState.FAILED: "bold $error",
    ConnState.CLOSED: "$text-muted",
}


class HostStatus(Static):
    DEFAULT_CSS = """
    HostStatus { height: 1; background: $panel; padding: 0 1; }
    """

    event: reactive[ConnectionEvent | None] = reactive(None)

    def __init__(self, host: str, **kw: object):
        super().__init__(**kw)  # type: ignore[arg-type]
        self.host = host

    def on_mount(self) -> None:
        self.set_interval(1.0, self.refresh)  # "reconnecting in N s" counts down

    def render(self) -> Text:
        text = Text.assemble(("pivot ", "bold"), (self.host, "bold"), " ")
        event = self.event
        if event is None:
            return text.append("not connected")
        style = self.app.theme_variables.get(_STYLE[event.state].split("$")[-1], "") if self.is_mounted else ""
        bold = "bold " if "bold" in _STYLE[event.state] else ""
        label = {
            ConnState.UP: f"● up {event.rtt_s * 1000:.0f} ms" if event.rtt_s is not None else "● up",
            ConnState.CONNECTING: "◌ connecting…",
            ConnState.RECONNECTING: f"◌ reconnecting in {max(0, (event.retry_in_s or 0) - (time.time() - event.at)):.0f} s",
            ConnState.DOWN: "✕ down",
            ConnState.FAILED: "✕ failed",
            ConnState.CLOSED: "○ closed",
        }[event.state]
        text.append(label, f"{bold}{style}")
        if event.reason and event.state != ConnState.UP:
            text.append(f"  {event.reason}", "dim")
        return text

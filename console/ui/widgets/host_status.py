"""The top line: host, connection state with round-trip time, telemetry source and staleness, server."""

from __future__ import annotations

import time

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from console.gpu.samples import Sample, ServerRef
from console.remote import ConnectionEvent, ConnState
from console.server.state import ServerStatus
from console.ui.colours import SERVER_LOOK, theme_style

_LOOK = {  # state -> (glyph, theme colour)
    ConnState.UP: ("●", "success"),
    ConnState.CONNECTING: ("◌", "warning"),
    ConnState.RECONNECTING: ("◌", "warning"),
    ConnState.DOWN: ("✕", "error"),
    ConnState.FAILED: ("✕", "error"),
    ConnState.CLOSED: ("○", "foreground"),
}
STALE_AFTER_S = 3.0


class HostStatus(Static):
    DEFAULT_CSS = """
    HostStatus { height: 1; background: $panel; padding: 0 1; }
    """

    event: reactive[ConnectionEvent | None] = reactive(None, repaint=False)
    source: reactive[str | None] = reactive(None, repaint=False)
    last_sample: reactive[float | None] = reactive(None, repaint=False)
    server: reactive[ServerRef | None] = reactive(None, repaint=False)
    problem: reactive[str | None] = reactive(None, repaint=False)
    server_status: reactive[ServerStatus | None] = reactive(None, repaint=False)

    def __init__(self, host: str, *, local: bool = False, readonly: bool = False, unsampled: str | None = None, **kw: object):
        """unsampled: why this host's GPUs are not streamed (none, or a Slurm login node's), said in their place."""
        super().__init__(**kw)  # type: ignore[arg-type]
        self.host, self.unsampled = host, unsampled
        self._drawn: Text | None = None
        self.local, self.readonly = local, readonly

    def on_mount(self) -> None:
        self.set_interval(1.0, self._changed)  # the sample's age and "reconnecting in N s" count

    def _changed(self) -> None:
        """Drawn again only when the line reads differently: most samples (and ticks) change nothing ("0 s ago"),
        and a frame of the screen for nothing is most of what an idle console costs."""
        if self._line() != self._drawn:
            self.refresh()

    watch_event = watch_source = watch_last_sample = watch_server = watch_problem = watch_server_status = _changed

    def sampled(self, sample: Sample) -> None:
        """Four fields each second, the line made and compared once, not once per field."""
        self.set_reactive(HostStatus.source, sample.source)
        self.set_reactive(HostStatus.last_sample, sample.received)
        self.set_reactive(HostStatus.server, sample.server)
        self.set_reactive(HostStatus.problem, None)
        self._changed()

    def _colour(self, name: str, bold: bool = False) -> Style:
        return theme_style(self.app, name, bold=bold)

    def render(self) -> Text:
        self._drawn = self._line()
        return self._drawn

    def _line(self) -> Text:
        text = Text.assemble(("pivot ", "bold"), (self.host, "bold"), " ")
        if self.readonly:
            text.append("read-only", self._colour("warning", bold=True)).append(" ")
        event = self.event
        if self.local:
            text.append("this machine, no SSH", "dim")
        elif event is None:
            text.append("not connected", "dim")
        else:
            glyph, colour = _LOOK[event.state]
            label = {
                ConnState.UP: f"up, rtt {event.rtt_s * 1000:.0f} ms" if event.rtt_s is not None else "up",  # not an uptime
                ConnState.RECONNECTING: f"reconnecting in {max(0.0, (event.retry_in_s or 0) - (time.time() - event.at)):.0f} s",
            }.get(event.state, str(event.state))
            text.append(f"{glyph} {label}", self._colour(colour, bold=True))
            if event.reason and event.state != ConnState.UP:
                text.append(f" ({event.reason})", "dim")
        text.append(" │ ", "dim")
        if self.problem:
            text.append(self.problem, self._colour("error"))
        elif self.last_sample is None:
            text.append(self.unsampled or "telemetry: waiting", "dim")
        else:
            age = max(0.0, time.time() - self.last_sample)
            stale = age > STALE_AFTER_S
            text.append(f"{self.source} ", "dim")
            # whole seconds passed: rounded, the tick between two samples a second apart read "1 s ago" and the next
            # sample "0 s ago", a frame of the screen each for a sample on time
            text.append(f"{int(age)} s ago", self._colour("warning", bold=True) if stale else "dim")
        text.append(" │ ", "dim")
        status = self.server_status
        if status is not None and status.profile:
            _, colour = SERVER_LOOK[status.state]  # its colour as the Server pane's (the glyph: no room here)
            text.append(f"{status.profile} ", "bold").append(str(status.state), self._colour(colour, bold=True))
        elif self.server is None:
            text.append("no managed server", "dim")
        else:
            text.append(f"server {self.server.pid} ", "")
            text.append("running" if self.server.alive else "gone", self._colour("success" if self.server.alive else "error"))
        return text

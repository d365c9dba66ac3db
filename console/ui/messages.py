from __future__ import annotations

from textual.message import Message

from console.gpu.telemetry import TelemetryEvent
from console.remote import ConnectionEvent
from console.server.state import ServerStatus
from console.sweep.runs.store import Run


class ConnectionChanged(Message):
    """The SSH connection to a host changed state. Never coalesced: they are few, and a "down" carries the reason."""

    def __init__(self, event: ConnectionEvent):
        super().__init__()
        self.event = event


class TelemetryUpdate(Message):
    """A line from the telemetry agent. A newer sample replaces an unprocessed older one."""

    def __init__(self, event: TelemetryEvent):
        super().__init__()
        self.event = event

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TelemetryUpdate) and type(message.event) is type(self.event)


class StatusChanged(Message):
    """The managed server changed state; only the newest matters."""

    def __init__(self, status: ServerStatus):
        super().__init__()
        self.status = status

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StatusChanged)


class ShowComparison(Message):
    """A comparison to show under the curves (a runbook's compare step): the app hands it to the Sweep pane."""

    def __init__(self, a: Run, b: Run):
        super().__init__()
        self.a, self.b = a, b

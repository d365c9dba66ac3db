"""A connection's state, as its listeners are told of each change."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field


class ConnState(enum.StrEnum):
    CONNECTING = "connecting"
    UP = "up"
    DOWN = "down"
    RECONNECTING = "reconnecting"
    FAILED = "failed"  # needs the operator (unknown host key, authentication): no retry
    CLOSED = "closed"


@dataclass(frozen=True)
class ConnectionEvent:
    host: str
    state: ConnState
    rtt_s: float | None = None
    reason: str | None = None
    retry_in_s: float | None = None
    at: float = field(default_factory=time.time)

    def describe(self) -> str:
        match self.state:
            case ConnState.UP:
                return f"{self.host}: up, rtt {self.rtt_s * 1000:.0f} ms" if self.rtt_s is not None else f"{self.host}: up"
            case ConnState.RECONNECTING:
                return f"{self.host}: reconnecting in {self.retry_in_s:.0f} s ({self.reason})"
            case ConnState.DOWN | ConnState.FAILED:
                return f"{self.host}: {self.state} ({self.reason})"
            case _:
                return f"{self.host}: {self.state}"

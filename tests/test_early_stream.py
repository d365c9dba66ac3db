"""The telemetry stream the console starts before its screen exists: what came early is read in order, and a
failure reaches the reader, after which the stream starts again."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest

from console.gpu.samples import AgentError, Hello, Sample
from console.gpu.telemetry import EarlyStream, TelemetryEvent


class Flaky:
    hello: Hello | None = None

    def __init__(self) -> None:
        self.starts = 0

    async def events(self) -> AsyncGenerator[TelemetryEvent, None]:
        self.starts += 1
        yield AgentError("query-failed", f"first of start {self.starts}")
        if self.starts == 1:
            raise RuntimeError("the stream broke")
        yield AgentError("query-failed", "second")

    async def sample_once(self) -> Sample | AgentError:
        raise NotImplementedError

    async def kill(self, targets: list[str], grace_s: float) -> list[dict]:
        raise NotImplementedError


def message(event: TelemetryEvent) -> str:
    assert isinstance(event, AgentError), event
    return event.message


async def test_events_that_came_early_are_read_and_a_failure_reaches_the_reader() -> None:
    telemetry = Flaky()
    stream = EarlyStream(telemetry)
    reader = stream.events()
    assert message(await anext(reader)) == "first of start 1"
    with pytest.raises(RuntimeError, match="the stream broke"):
        await anext(reader)
    again = stream.events()  # a new reader (the console restarts its worker) starts the stream again
    assert [message(await anext(again)), message(await anext(again))] == ["first of start 2", "second"]
    await stream.close()

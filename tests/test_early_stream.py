"""The telemetry stream the console starts before its screen exists: what came early is read in order, and a
failure reaches the reader, after which the stream starts again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from console.gpu.samples import AgentError
from console.gpu.telemetry import EarlyStream, TelemetryEvent


class Flaky:
    hello = None

    def __init__(self) -> None:
        self.starts = 0

    async def events(self) -> AsyncIterator[TelemetryEvent]:
        self.starts += 1
        yield AgentError("query-failed", f"first of start {self.starts}")
        if self.starts == 1:
            raise RuntimeError("the stream broke")
        yield AgentError("query-failed", "second")

    async def sample_once(self):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    async def kill(self, targets: list[str], grace_s: float) -> list[dict]:
        raise NotImplementedError


async def test_events_that_came_early_are_read_and_a_failure_reaches_the_reader() -> None:
    telemetry = Flaky()
    stream = EarlyStream(telemetry)  # type: ignore[arg-type]
    reader = stream.events()
    assert (await anext(reader)).message == "first of start 1"
    with pytest.raises(RuntimeError, match="the stream broke"):
        await anext(reader)
    again = stream.events()  # a new reader (the console restarts its worker) starts the stream again
    assert [(await anext(again)).message, (await anext(again)).message] == ["first of start 2", "second"]
    await stream.close()

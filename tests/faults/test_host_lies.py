"""Issue 21, B: one unexpected value from the host or the server kills no watcher and reads as no state it is not.
A record pivot did not write as it is reads "unknown" with what is wrong with it (never "stopped", never a traceback);
the Server pane's watch survives an error nobody foresaw, says it, and goes on."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from textual.widget import Widget

from console.gpu.telemetry import TelemetryEvent
from console.server.state import ServerState, ServerStatus
from tests.conftest import wait_for
from tests.fake_telemetry import FakeTelemetry
from tests.faults.conftest import Host, pivot, serving

GOOD = {
    "profile": "baseline",
    "argv": ["serve"],
    "pid": 1,
    "start_ticks": 1,
    "started": 1.0,
    "host": "127.0.0.1",
    "port": 30000,
    "kind": "sglang",
}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (json.dumps({**GOOD, "started": "yesterday"}), "started: Input should be a valid number"),
        (json.dumps({**GOOD, "start_ticks": "soon"}), "start_ticks: Input should be a valid integer"),
        (json.dumps({**GOOD, "pid": "4100"}), "pid: Input should be a valid integer"),
        (json.dumps([GOOD]), "Input should be an object"),
        ('{"profile": "baseline", ', "Invalid JSON"),
        ("BIG", "server.json is over 256 KiB"),
    ],
    ids=["started", "start_ticks", "pid", "list", "cut", "big"],
)
async def test_a_record_pivot_did_not_write_reads_unknown_with_why(host: Host, text: str, said: str) -> None:
    host.workdir.mkdir(mode=0o700, exist_ok=True)  # as pivot left it
    text = json.dumps({**GOOD, "argv": ["x" * 1024] * 300}) if text == "BIG" else text
    (host.workdir / "server.json").write_text(text)
    status, out, err = await pivot(host.config_path, "server", "status")
    assert status == 1 and "Traceback" not in out + err and "unexpected" not in err
    assert "unknown" in out and said in out, out


class _Flaky:
    """A lifecycle whose poll after `fail_after` polls meets a value nobody foresaw."""

    runs_jobs = False

    def __init__(self) -> None:
        self.polls = 0
        self.fail_after: int | None = None
        self.status = ServerStatus(ServerState.READY, "demo-eagle3", 4100, time.time(), time.time())
        self.listeners: list = []

    def add_listener(self, callback) -> None:  # type: ignore[no-untyped-def]
        self.listeners.append(callback)

    def _set(self, status: ServerStatus) -> ServerStatus:
        self.status = status
        for callback in self.listeners:
            callback(status)
        return status

    async def poll(self) -> ServerStatus:
        self.polls += 1
        if self.fail_after is not None and self.polls == self.fail_after + 1:
            raise TypeError("'list' object is not subscriptable")
        return self._set(ServerStatus(ServerState.READY, "demo-eagle3", 4100, time.time(), time.time()))

    def unreachable(self, why: str) -> ServerStatus:
        return self._set(ServerStatus(ServerState.UNKNOWN, "demo-eagle3", detail=why))

    async def log_tail(self, lines: int = 50) -> list[str]:
        return []

    async def close(self) -> None:
        pass


async def test_the_server_watch_survives_an_error_nobody_foresaw(tmp_path: Path) -> None:
    from console.ui.widgets.server.pane import ServerPane
    from tests.test_app import canned_app

    app = canned_app(tmp_path)
    flaky = _Flaky()
    app.session.lifecycle = flaky  # type: ignore[assignment]
    async with app.run_test(size=(100, 30)):
        pane = app.query_one(ServerPane)
        pane.lifecycle = flaky  # type: ignore[assignment]
        flaky.add_listener(pane._status_changed)
        pane.start_watching()  # (or the first sample started it: its next poll is flaky's)
        flaky.fail_after = flaky.polls  # the next poll, whenever the watch makes it (at once when a sample says so)
        await wait_for(lambda: "watching the server failed (TypeError" in pane.status.detail, timeout=10)
        status = pane.status
        assert status.state == ServerState.UNKNOWN
        await wait_for(lambda: pane.status.state == ServerState.READY, timeout=15)  # and it goes on


class _FirstStreamFails(FakeTelemetry):
    """Telemetry whose first stream meets a value nobody foresaw; the next ones are as usual."""

    streams = 0

    async def events(self) -> AsyncGenerator[TelemetryEvent, None]:
        self.streams += 1
        if self.streams == 1:
            raise TypeError("'NoneType' object is not subscriptable")
        async for event in super().events():
            yield event


def _problem(pane: Widget) -> str:
    from console.ui.widgets.problem import PaneProblem

    line = pane.query_one(PaneProblem)
    return str(line.render()) if line.has_class("-shown") else ""


async def test_the_gpu_watch_survives_an_error_nobody_foresaw_and_says_it_in_its_pane(tmp_path: Path) -> None:
    from console import config
    from console.session import Session
    from console.ui.app import PivotApp
    from console.ui.widgets.gpu.pane import GpuPane

    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    telemetry = _FirstStreamFails()
    app = PivotApp(Session(cfg, None, local=True, via="console", telemetry=telemetry))
    async with app.run_test(size=(100, 30)):
        pane = app.query_one(GpuPane)
        await wait_for(
            lambda: "watching the GPUs failed (TypeError: 'NoneType' object is not subscriptable); trying again in 1 s" in _problem(pane),
            timeout=10,
        )
        await wait_for(lambda: pane.sample is not None, timeout=15)  # watched again
        await wait_for(lambda: not _problem(pane), timeout=5)
        assert app.is_running


async def test_a_nonsense_level_from_the_host_fails_a_drawing_not_the_console(tmp_path: Path) -> None:
    """A level whose numbers are not numbers is refused where events are read (console/sweep/model.py); one that got
    past anyway (a value nobody foresaw) reaches the Sweep pane: its drawing fails and says so in the pane; the
    console and the next drawings go on."""
    from console.sweep.model import EventError, LevelDone, LevelProgress, LevelStarted, decode_shown
    from console.ui.widgets.sweep.pane import SweepPane
    from tests.test_app import canned_app

    nonsense: dict[str, Any] = {"type": "level_done", "c": 4, "requests": 8, "errors": 0, "total_tok_s": "lots"}
    with pytest.raises(EventError, match="total_tok_s"):
        decode_shown(nonsense)
    app = canned_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(SweepPane)
        pane._on_event(LevelStarted(type="level_started", c=4, requests=8))
        pane._on_event(LevelDone.model_construct(**nonsense))
        await wait_for(lambda: "failed (" in _problem(pane), timeout=10)
        await pilot.press("z")
        await pilot.pause()
        assert app.is_running
        pane.data.levels.clear()  # what made it fail is gone: the next event and drawing work, and the line goes
        pane._on_event(LevelProgress(type="progress", c=4, in_flight=2, streamed=10))
        await wait_for(lambda: not _problem(pane), timeout=10)


@pytest.mark.parametrize("pidfile", ["4100 4101\n", "garbage\n", ""], ids=["two", "word", "empty"])
async def test_a_model_info_list_and_a_malformed_pid_file_leave_the_state_readable(host: Host, pidfile: str) -> None:
    """/model_info answers a JSON list (an unexpected TypeError in `server status`), server.pid holds nonsense (an
    IndexError): the server reads ready by its health and its record, the model unknown."""
    import asyncio

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                body = b"[1, 2, 3]" if head.startswith("GET /model_info") else b"ok"
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async with serving(host, answer, pidfile=pidfile):
        status, out, err = await pivot(host.config_path, "server", "status")
    assert "Traceback" not in out + err and "unexpected" not in err, out + err
    assert status == 0 and "ready" in out, out + err


def test_a_level_from_the_host_whose_numbers_are_not_numbers_is_not_kept_and_is_said(tmp_path: Path) -> None:
    """The host's load generator is the host's word: each event is read by the one decoder (console/sweep/model.py)
    before it is kept or shown; one that is not what it claims is dropped and said, and the sweep goes on."""
    from types import SimpleNamespace

    from console.sweep.loadgen.host_generator import HostGenerator

    class Sink:
        def __init__(self) -> None:
            self.kept: list = []
            self.shown: list = []

        def emit(self, event: object) -> None:
            self.kept.append(event)

        def show(self, event: object) -> None:
            self.shown.append(event)

    sink = Sink()
    generator = HostGenerator(SimpleNamespace(host="gpu1"), SimpleNamespace(python="python3"), sink, tmp_path)  # type: ignore[arg-type]
    level = {"type": "level_done", "c": 4, "requests": 8, "errors": 0}
    assert generator._take({**level, "seq": 1, "total_tok_s": "lots"}) is None
    assert generator._take({**level, "seq": 2, "total_tok_s": float("nan")}) is None
    assert not sink.kept and [s.message for s in sink.shown] == [
        "the load generator on gpu1 sent a level_done event pivot cannot read (level_done.total_tok_s: Input should be "
        "a valid number): not kept",
        "the load generator on gpu1 sent a level_done event pivot cannot read (level_done.total_tok_s: Input should be "
        "a finite number): not kept",
    ]
    assert generator._take({**level, "seq": 3, "total_tok_s": 812.5}) is not None and len(sink.kept) == 1

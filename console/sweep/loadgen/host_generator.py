"""The console's side of the load generator on the GPU host (console/sweep/loadgen/on_host.py): started over SSH with the
run's order, its events kept here as they come; when the link is lost, what it measured after is fetched from its
spool on the host once the link is back (or by `pivot sweep --resume`, when it does not come back in time)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import orjson

from console import config
from console.files import write_atomically
from console.remote import Connection, RemoteError
from console.remote.errors import Disconnected
from console.remote.streams import RemoteStream
from console.sweep.loadgen.generator import Sink
from console.sweep.model import EVENT_TYPES, Event, EventError, HostOrder, LevelProgress, Said, SweepDone, SweepStarted, decode_event
from console.sweep.runs.files import EVENTS, PENDING
from console.untrusted import visible
from console.zipapp import checked, loadgen_zip, not_there

RECONNECT_S = 600.0  # how long a lost link is waited for before the sweep is left to `pivot sweep --resume`
POLL_S = 2.0  # while the host's generator still measures, its spool is read this often
ABORT_WAIT_S = 5.0  # an abort's last events: the host sends them at once


class NotOnHost(Exception):
    """The host's python cannot run the load generator: why."""


class HostGenerator:
    """The load generator on `spec`'s host, writing into the run at `run_dir` through `sink`."""

    def __init__(self, conn: Connection, spec: config.HostSpec, sink: Sink, run_dir: Path):
        self.conn, self.spec, self.sink, self.run_dir = conn, spec, sink, run_dir
        self.name, self.data = loadgen_zip()
        self.seq = 0  # the number of the last of the host's events kept here
        self.base = 0  # the run's event lines before this sweep's first
        self.last: Event | None = None  # and that event

    def _argv(self, *args: str) -> list[str]:
        return checked(f"agent/{self.name}", self.data, [self.spec.python, f"agent/{self.name}", *args])

    async def run(self, port: int, order: HostOrder, stop_after_level: asyncio.Event, server_gone: asyncio.Event) -> int:
        """The sweep to its end, as a sweep here ends (0, 3 when a level failed, 130 aborted)."""
        token = secrets.token_hex(16)
        order = order.model_copy(update={"spool": token})
        self.base = _complete_lines(self.run_dir / EVENTS)
        self._keep_pending(token)  # from the start: a console that dies unannounced (its terminal closed) leaves it
        for attempt in (1, 2):
            stream = await self.conn.stream(self._argv("--port", str(port)), cwd=self.spec.workdir)
            sayers = [
                asyncio.create_task(_say_when(stream, event, word)) for event, word in ((stop_after_level, "stop"), (server_gone, "gone"))
            ]
            lost: str | None = None
            try:
                try:
                    stream.write(order.model_dump_json() + "\n")  # (gone already when not there: its status says)
                    async for line in stream:
                        event = self._take(_parse(line), unsupported_ends=self.last is None)
                        if isinstance(event, SweepDone):
                            with contextlib.suppress(RemoteError):
                                stream.write("ack\n")  # the host may remove its spool
                except Disconnected as e:
                    lost = str(e)
                status = await stream.finished()
                if self.last is None and attempt == 1 and not_there(status, stream.stderr_tail):
                    await self.conn.upload(self.data, f"{self.spec.workdir.rstrip('/')}/agent/{self.name}")
                    continue
                if self.last is not None and not isinstance(self.last, SweepDone) and status is None:  # the link ended
                    return await self.recover(token, lost or f"{self.conn.host}: its channel closed without an exit status")
                if not isinstance(self.last, SweepDone):
                    why = "; ".join(stream.stderr_tail) or f"exit status {status}"
                    raise RemoteError(self.conn.host, f"the load generator on the host ended before the sweep did: {why}")
                (self.run_dir / PENDING).unlink(missing_ok=True)  # all of it kept here: the host removes its spool
                return _status(self.last)
            except asyncio.CancelledError:
                try:
                    stream.write("abort\n")
                except RemoteError:  # the host goes on alone: what it measures waits there for a resume
                    raise asyncio.CancelledError from None
                await self._take_the_rest(stream)
                (self.run_dir / PENDING).unlink(missing_ok=True)  # an aborted sweep's spool is removed on the host
                raise
            finally:
                for sayer in sayers:
                    sayer.cancel()
                await stream.stop()
        raise AssertionError("unreachable")

    async def _take_the_rest(self, stream: RemoteStream) -> None:
        """After an abort: the host's last events (the requests that finished, its aborted end), for a moment."""
        with contextlib.suppress(RemoteError, TimeoutError):
            async with asyncio.timeout(ABORT_WAIT_S):
                async for line in stream:
                    if isinstance(self._take(_parse(line)), SweepDone):
                        return

    def _take(self, event: dict[str, Any] | None, *, unsupported_ends: bool = False) -> Event | None:
        """An event of the host's, kept if it is of a known type and was not kept before (its `seq`)."""
        if event is None:
            return None
        event_type = event.get("type")
        if event_type == "unsupported" and unsupported_ends:
            raise NotOnHost(visible(str(event.get("why"))))
        seq = event.pop("seq", None)
        if event_type != "progress" and (event_type not in EVENT_TYPES or not isinstance(seq, int) or seq <= self.seq):
            return None
        try:
            typed = decode_event(event)
        except EventError as e:  # the host's word: a number that is not one is not kept, and said
            self.sink.show(
                Said(
                    type="notice",
                    message=f"the load generator on {self.conn.host} sent a {visible(str(event_type))} "
                    f"event pivot cannot read ({visible(str(e))}): not kept",
                )
            )
            return None
        if isinstance(typed, LevelProgress):
            self.sink.show(typed)
            return None
        self.seq = seq
        self.last = typed.model_copy(update={"pid": os.getpid()}) if isinstance(typed, SweepStarted) else typed
        self.sink.emit(self.last)
        return self.last

    async def recover(self, token: str, why: str) -> int:
        """The link was lost mid-sweep: the host's generator measures the level in progress to its end and begins no
        other. Wait for the link, then keep what it measured from its spool, until it has ended."""
        self._keep_pending(token)
        why = why.removeprefix(f"{self.conn.host}: ")
        self.sink.show(
            Said(
                type="link_lost",
                message=f"the link to {self.conn.host} was lost ({visible(why)}): the load "
                "generator there measures the level in progress to its end; what it measures is fetched when "
                "the link is back",
            )
        )
        return await self.fetch_until_ended(token, RECONNECT_S)

    async def fetch_until_ended(self, token: str, within_s: float) -> int:
        deadline = time.monotonic() + within_s
        said_back = False
        while True:
            try:
                await self.conn.connected(timeout=max(1.0, deadline - time.monotonic()))
                if not said_back:
                    self.sink.show(
                        Said(
                            type="link_back",
                            message=f"the link to {self.conn.host} is back: fetching what the load generator there measured",
                        )
                    )
                    said_back = True
                running = await self._fetch(token)
            except RemoteError as e:
                if not e.retry or time.monotonic() >= deadline:
                    raise RemoteError(
                        self.conn.host,
                        f"{e}; what the load generator there measured waits on the host, "
                        f"and `pivot sweep --resume {self.run_dir.name}` fetches it and measures the "
                        "rest",
                    ) from None
                await asyncio.sleep(POLL_S)
                continue
            if not running:
                with contextlib.suppress(RemoteError):
                    await self.conn.run(["rm", "-f", "--", f"sweeps/{token}.jsonl"], cwd=self.spec.workdir)
                (self.run_dir / PENDING).unlink(missing_ok=True)
                if not isinstance(self.last, SweepDone):
                    raise RemoteError(
                        self.conn.host, "the load generator on the host ended before the sweep did (what it measured is kept)"
                    )
                return _status(self.last)
            await asyncio.sleep(POLL_S)

    async def _fetch(self, token: str) -> bool:
        """The spool's events not kept yet, kept; whether its generator still runs."""
        for attempt in (1, 2):
            running = True
            async with await self.conn.stream(self._argv("--fetch", token, "--after", str(self.seq)), cwd=self.spec.workdir) as stream:
                async for line in stream:
                    event = _parse(line)
                    if event is not None and event.get("type") == "spool":
                        running = bool(event.get("running"))
                    else:
                        self._take(event)
                status = await stream.finished()
            self._keep_pending(token)
            if status == 0:
                return running
            if attempt == 1 and not_there(status, stream.stderr_tail):
                await self.conn.upload(self.data, f"{self.spec.workdir.rstrip('/')}/agent/{self.name}")
                continue
            why = "; ".join(stream.stderr_tail) or f"exit status {status}"
            raise RemoteError(self.conn.host, f"cannot read the load generator's spool: {why}")
        raise AssertionError("unreachable")

    def _keep_pending(self, token: str) -> None:
        """Where the host's events of this sweep wait (`base`: the run's complete event lines before its first, so that
        a resume knows how many it kept even when this process could not say)."""
        pending = {"host": self.conn.host, "token": token, "seq": self.seq, "base": self.base}
        write_atomically(self.run_dir / PENDING, json.dumps(pending))


def _complete_lines(path: Path) -> int:
    """The complete lines of an event file (a torn last one is cut before the next event, so it is not counted)."""
    try:
        with open(path, "rb") as f:
            return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def kept_of(run_dir: Path, pending: dict[str, Any]) -> int:
    """The number of the last of the host's events kept in the run (its `seq`): the pending file's, or, where the
    process that kept them died without saying (a closed terminal), the run's event lines written since the sweep's
    first (every event of the host's is kept, in its order, one line each)."""
    base = pending.get("base")
    counted = _complete_lines(run_dir / EVENTS) - base if isinstance(base, int) else 0
    return max(int(pending["seq"]), counted)


def _parse(line: str) -> dict[str, Any] | None:
    with contextlib.suppress(orjson.JSONDecodeError):
        event = orjson.loads(line)
        return event if isinstance(event, dict) else None
    return None


def _status(last: SweepDone) -> int:
    return 130 if last.aborted else 3 if last.failed else 0


async def _say_when(stream: Any, event: asyncio.Event, word: str) -> None:
    """Tell the load generator on the host a word of the console's (stop after the level; the server is gone)."""
    await event.wait()
    with contextlib.suppress(RemoteError):
        stream.write(f"{word}\n")

"""Telemetry from the GPU host: the agent installed once, one long-lived SSH
channel streaming its lines, parsed into typed samples. Local mode reads the
console's own GPUs with nvitop in-process, with the same samples."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from console.config import HostSpec
from console.gpu import agent
from console.gpu.samples import AgentError, Hello, Sample, SampleParseError, parse_line
from console.remote.errors import Disconnected, RemoteError
from console.untrusted import visible
from console.zipapp import agent_zip, checked, not_there

if TYPE_CHECKING:  # (SSH is loaded by what makes a connection: a local session never does)
    from console.remote import Connection
    from console.remote.streams import RunResult

log = logging.getLogger(__name__)

SERVER_PIDFILE = "server.pid"  # in the host's workdir: the server pivot manages
RETRY_S = 2.0


@dataclass(frozen=True)
class LinkDown:
    """The stream is interrupted (connection down or agent gone); it restarts by itself."""

    reason: str


TelemetryEvent = Hello | Sample | AgentError | LinkDown


class Telemetry(Protocol):
    """What the console, the commands and the actions need of a host's GPUs: a stream of events, one sample, a kill."""

    hello: Hello | None

    def events(self) -> AsyncGenerator[TelemetryEvent, None]: ...

    async def sample_once(self) -> Sample | AgentError: ...

    async def kill(self, targets: list[str], grace_s: float) -> list[dict]: ...


class RemoteTelemetry:
    def __init__(self, conn: Connection, spec: HostSpec, *, interval: float = 1.0):
        self.conn, self.spec, self.interval = conn, spec, interval
        self.hello: Hello | None = None

    async def install(self) -> None:
        """Upload the agent (its name carries a hash: a host keeps one copy of each version)."""
        name, data = agent_zip()
        await self.conn.upload(data, f"{self.spec.workdir.rstrip('/')}/agent/{name}", mode=0o644)

    async def _run(self, args: tuple[str, ...], timeout: float, via: tuple[str, ...] = ()) -> RunResult:
        """An agent command, run as it is: the agent is uploaded only when the host's python cannot open it, rather
        than asked for first (a round trip, an SSH session on every call and the console's first sample later).
        via: a command the agent runs under (`srun …` on a Slurm job's node)."""
        argv = [*via, *self.argv(*args)]
        result = await self.conn.run(argv, cwd=self.spec.workdir, timeout=timeout)
        if not_there(result.exit_status, result.stderr.splitlines()):
            await self.install()
            result = await self.conn.run(argv, cwd=self.spec.workdir, timeout=timeout)
        return result

    def argv(self, *args: str) -> list[str]:
        """The agent command line on the host (its python, the agent's zip in the workdir, args)."""
        name, data = agent_zip()
        return checked(f"agent/{name}", data, [self.spec.python, f"agent/{name}", *args])

    async def events(self) -> AsyncGenerator[TelemetryEvent, None]:
        """Hello, then samples, forever: across agent restarts and reconnects."""
        while True:
            try:
                await self.conn.connected(timeout=3600)
                stream = await self.conn.stream(
                    self.argv("sample", "--interval", str(self.interval), "--server-pidfile", SERVER_PIDFILE),
                    cwd=self.spec.workdir,
                )
            except RemoteError as e:
                yield LinkDown(str(e))
                await asyncio.sleep(RETRY_S)
                continue
            lines = 0
            try:
                async for line in stream:
                    lines += 1
                    try:
                        event = parse_line(line, self.hello.source if self.hello else "?")
                    except SampleParseError as e:
                        log.warning("%s: agent line skipped: %s", self.conn.host, e)
                        continue
                    if isinstance(event, Hello):
                        self.hello = event
                    yield event
                status = await stream.finished()
                if not lines and not_there(status, stream.stderr_tail):
                    await self.install()
                    continue  # at once: this is the console's first sample on a host new to this version
                why = "; ".join(stream.stderr_tail) or f"agent exited with status {status}"
                yield AgentError("agent-exited", why)
            except RemoteError as e:
                yield LinkDown(str(e))
            finally:
                await stream.stop()
            await asyncio.sleep(RETRY_S)

    async def sample_once(self, via: tuple[str, ...] = ()) -> Sample | AgentError:
        """One sample; via: a command the agent runs under, on another machine (whose hello is not this host's)."""
        result = await self._run(("sample", "--once", "--server-pidfile", SERVER_PIDFILE), 60, via)
        events = []
        for line in result.stdout.splitlines():
            event = parse_line(line)
            if isinstance(event, Hello) and not via:
                self.hello = event
            events.append(event)
        if not events:
            why = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"agent exited with status {result.exit_status}"
            return AgentError("agent-failed", visible(why))
        last = events[-1]
        if isinstance(last, Sample) and self.hello:
            last = Sample(last.t, last.gpus, last.procs, last.server, self.hello.source, last.received)
        return last  # type: ignore[return-value]

    async def agent(self, *args: str, timeout: float = 60.0) -> tuple[int | None, list[dict]]:
        """Run one of the agent's other subcommands (port, help); its exit status and JSON lines."""
        result = await self._run(args, timeout)
        lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        if not lines and result.stderr.strip():
            raise RemoteError(self.conn.host, f"agent {args[0]}: {visible(result.stderr.strip().splitlines()[-1])}")
        return result.exit_status, lines

    async def kill(self, targets: list[str], grace_s: float, via: tuple[str, ...] = ()) -> list[dict]:
        """Run the agent's kill on the host; one result per target. via: a command the kill runs under (the lifecycle's
        script that marks the record stopped in the same remote step)."""
        try:
            result = await self._run(("kill", "--grace", str(grace_s), *targets), grace_s + 0.05 * len(targets) + 30, via)
        except Disconnected:  # the link dropped mid-kill: each target's fate is unknown here, and said so
            return [
                {
                    "pid": int(t.split(":")[0]),
                    "outcome": "unknown",
                    "detail": "the link was lost before the host said; pivot gpus shows whether it still runs",
                }
                for t in targets
                if t.split(":")[0].isdigit()
            ]
        outcomes = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        if not outcomes and not result.ok:
            why = visible(result.stderr.strip()) or f"exit status {result.exit_status}"
            raise RemoteError(self.conn.host, f"kill failed: {why}")
        return outcomes


class EarlyStream:
    """A telemetry stream started before anyone reads it: the console starts it while Textual is still being
    imported, so that the link is up and the first sample on its way before the screen exists. Read with events(),
    as many times as needed (a reader that failed reads on); a failure of the stream is raised to its reader, and
    the next read starts it again."""

    def __init__(self, telemetry: Telemetry, *, keep: int = 16):
        self.telemetry = telemetry
        self._queue: asyncio.Queue[TelemetryEvent | BaseException] = asyncio.Queue(maxsize=keep)  # then it waits
        self._pump: asyncio.Task[None] | None = None
        self.start()

    def start(self) -> None:
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._run(), name="telemetry")

    async def _run(self) -> None:
        try:
            async for event in self.telemetry.events():
                await self._queue.put(event)
        except Exception as e:  # noqa: BLE001 - the reader hears of it, whatever it is
            await self._queue.put(e)

    async def events(self) -> AsyncIterator[TelemetryEvent]:
        self.start()
        while True:
            event = await self._queue.get()
            if isinstance(event, BaseException):
                raise event
            yield event

    async def close(self) -> None:
        """The pump cancelled, again each second until it ends: a cancellation that lands as the stream's own wait
        ends is lost inside asyncio.wait_for (Python 3.11), and the pump would stream on, its queue full, forever."""
        pump = self._pump
        while pump is not None and not pump.done():
            pump.cancel()
            await asyncio.wait({pump}, timeout=1.0)


class LocalTelemetry:
    """`pivot --local`: this machine's GPUs through nvitop, in a thread so the event loop never waits on NVML."""

    def __init__(self, *, interval: float = 1.0, pidfile: str | None = None):
        self.interval = interval
        self.pidfile = pidfile
        self.hello: Hello | None = None

    async def events(self) -> AsyncGenerator[TelemetryEvent, None]:
        import os
        import socket

        source = agent.NvitopSource()
        btime = agent.boot_time()
        self.hello = Hello("nvitop", os.getpid(), socket.gethostname(), self.interval, agent.VERSION)
        yield self.hello
        while True:
            try:
                raw = await asyncio.to_thread(agent.collect, source, btime, self.pidfile)
                event = parse_line(json.dumps(raw), "nvitop")
            except agent.NoDriver as e:
                event = AgentError("no-driver", str(e))
            except Exception as e:  # noqa: BLE001 - report and keep sampling, as the agent does
                event = AgentError("query-failed", f"{type(e).__name__}: {e}")
            yield event
            await asyncio.sleep(self.interval)

    async def sample_once(self) -> Sample | AgentError:
        stream = self.events()
        try:
            async for event in stream:
                if isinstance(event, (Sample, AgentError)):
                    return event
        finally:
            await stream.aclose()
        return AgentError("query-failed", "no sample")

    async def kill(self, targets: list[str], grace_s: float) -> list[dict]:
        parsed = [(int(pid), int(ticks), mode) for pid, ticks, mode in (t.split(":") for t in targets)]
        return await asyncio.to_thread(lambda: list(agent.kill_all(parsed, grace_s)))

"""One SSH connection per host, shared by everything that talks to it.

A supervisor task keeps the connection up: it connects, measures the round
trip (beside the first commands, not before them), waits for the link to drop
and reconnects with backoff, publishing each change as a `ConnectionEvent`.
Operations wait (up to their timeout) for the link to be up, so a short outage
delays them instead of failing them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import asyncssh

from console.config import HostSpec
from console.remote.command import WORKDIR_MADE, in_workdir, shell_command, workdir_failure
from console.remote.connect import SshClient, known_hosts_path, known_keys, open_ssh
from console.remote.errors import CommandTimeout, Disconnected, RemoteError
from console.remote.state import ConnectionEvent, ConnState
from console.remote.streams import PortForward, RemoteStream, RunResult
from console.untrusted import decode, visible

__all__ = [
    "ConnState",
    "Connection",
    "ConnectionEvent",
    "PortForward",
    "RemoteStream",
    "RunResult",
    "known_hosts_path",
    "known_keys",
]

log = logging.getLogger(__name__)

BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
RTT_INTERVAL_S = 5.0  # a line echoed over a kept channel: cheap, and the fleet's RTT column and the header follow the link


class Connection:
    def __init__(self, spec: HostSpec, *, tunnel: Connection | None = None):
        self.spec = spec
        self.host = spec.name
        self._tunnel = tunnel
        self._conn: asyncssh.SSHClientConnection | None = None
        self._client: SshClient | None = None
        self._up = asyncio.Event()
        self._rtt_known = asyncio.Event()  # this connection's first round trip measured (or found unmeasurable)
        self._rtt_s: float | None = None
        self._changed = asyncio.Event()  # replaced on every state change; waiters hold the old one
        self._supervisor: asyncio.Task[None] | None = None
        self._listeners: list[Callable[[ConnectionEvent], None]] = []
        self._forwards: dict[int, PortForward] = {}
        self._echo: asyncssh.SSHClientProcess | None = None  # `cat` on the host: the round trip, on one channel
        self._echo_of: asyncssh.SSHClientConnection | None = None  # the connection it runs on
        self.last_error: RemoteError | None = None
        self.last_event = ConnectionEvent(self.host, ConnState.CLOSED)
        self._home: str | None = None
        self._workdir_made = False  # said once, however many of the first commands found the workdir missing
        self._workdir_there: asyncssh.SSHClientConnection | None = None  # the link on which a command found it

    # -- events ---------------------------------------------------------------
    def add_listener(self, callback: Callable[[ConnectionEvent], None]) -> Callable[[], None]:
        """Call `callback` on every state change (and now, with the current state)."""
        self._listeners.append(callback)
        callback(self.last_event)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def _emit(self, state: ConnState, **kw: object) -> None:
        self.last_event = event = ConnectionEvent(self.host, state, **kw)  # type: ignore[arg-type]
        self._changed.set()
        self._changed = asyncio.Event()
        log.info("%s", event.describe())
        for callback in list(self._listeners):
            try:
                callback(event)
            except Exception:  # a broken listener must not stop the supervisor
                log.exception("connection listener failed")

    @property
    def state(self) -> ConnState:
        return self.last_event.state

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        if self._supervisor is None or self._supervisor.done():
            self._supervisor = asyncio.create_task(self._supervise(), name=f"ssh:{self.host}")

    async def close(self) -> None:
        supervisor, self._supervisor = self._supervisor, None
        while supervisor is not None and not supervisor.done():
            # again each second until it ends: a cancellation that lands as a connect attempt's own wait ends is lost
            # inside asyncio.wait_for (Python 3.11), and the supervisor would go on reconnecting, for ever
            supervisor.cancel()
            await asyncio.wait({supervisor}, timeout=1.0)
        for forward in list(self._forwards.values()):
            forward.close()
        if self._echo is not None:
            self._echo.close()
            self._echo = None
        if self._conn:
            self._conn.close()
            with contextlib.suppress(Exception):  # a peer that never answers the close is not waited for
                await asyncio.wait_for(self._conn.wait_closed(), 5.0)
            self._conn = None
        self._up.clear()
        self._emit(ConnState.CLOSED)

    def drop(self) -> None:
        """Abort the transport as a network failure would (for tests and for 'reconnect now')."""
        if self._conn:
            self._conn.abort()

    async def _supervise(self) -> None:
        attempt = 0
        while True:
            self._emit(ConnState.CONNECTING)
            try:
                self._conn, self._client = await open_ssh(self.spec, self._tunnel)
            except RemoteError as e:
                self.last_error = e
                if not e.retry:
                    self._emit(ConnState.FAILED, reason=str(e))
                    return
                delay = BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
                attempt += 1
                self._emit(ConnState.RECONNECTING, reason=str(e), retry_in_s=delay)
                await asyncio.sleep(delay)
                continue
            attempt = 0
            self.last_error = None
            await self._restore_forwards()
            self._rtt_known.clear()
            self._up.set()
            self._emit(ConnState.UP)  # commands go now: the round trip is a session of its own, not one to wait for
            try:
                self._rtt_s = await self._measure_rtt()
            finally:  # measured, or never will be on this link (closed meanwhile): nobody waits on
                self._rtt_known.set()
            if self._rtt_s is not None:
                self._emit(ConnState.UP, rtt_s=self._rtt_s)
            closed = asyncio.ensure_future(self._conn.wait_closed())
            while not closed.done():
                done, _ = await asyncio.wait({closed}, timeout=RTT_INTERVAL_S)
                if not done and (rtt := await self._measure_rtt()) is not None:
                    self._rtt_s = rtt
                    self._emit(ConnState.UP, rtt_s=rtt)
            self._up.clear()
            reason = self._client.lost_reason if self._client else None
            self.last_error = Disconnected(self.host, f"connection lost: {reason or 'unknown reason'}")
            self._emit(ConnState.DOWN, reason=reason or "connection lost")

    async def _measure_rtt(self) -> float | None:
        """A line echoed by `cat` on the host, over a channel kept for the connection's life: the link's round trip,
        without a new SSH session (and its entry in the host's auth log) at each measurement."""
        if self._conn is None:
            return None
        try:
            if self._echo is None or self._echo_of is not self._conn or self._echo.is_closing():
                self._echo = await self._conn.create_process("cat", stdin=asyncssh.PIPE)
                self._echo_of = self._conn
            t0 = time.monotonic()
            self._echo.stdin.write("\n")
            if not await asyncio.wait_for(self._echo.stdout.readline(), timeout=10):
                raise EOFError
        except (asyncssh.Error, OSError, EOFError, TimeoutError):
            if self._echo is not None:
                self._echo.close()
            self._echo = None
            return None
        return time.monotonic() - t0

    async def up_now(self) -> asyncssh.SSHClientConnection:
        """For a one-shot command: up within the host's connect timeout, or its one-line error at the first failure."""
        return await self.connected(timeout=self.spec.connect_timeout_s + 5, fail_fast=True)

    async def connected(self, timeout: float = 30.0, *, fail_fast: bool = False) -> asyncssh.SSHClientConnection:
        """The live connection, waiting up to `timeout` for it; raises the reason it is not up.

        With fail_fast the first failed attempt is raised at once (headless commands),
        otherwise the wait spans reconnect attempts (panes, which show the retries).
        """
        self.start()
        deadline = time.monotonic() + timeout
        while not self._up.is_set():
            if self.state == ConnState.FAILED or (fail_fast and self.state == ConnState.RECONNECTING):
                assert self.last_error is not None
                raise self.last_error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self.last_error or Disconnected(self.host, f"not connected after {timeout:g} s")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        assert self._conn is not None
        return self._conn

    async def round_trip(self, timeout: float = 30.0) -> float | None:
        """The link's round trip as last measured on the live connection (None where it could not be)."""
        deadline = time.monotonic() + timeout
        await self.connected(timeout)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._rtt_known.wait(), max(0.0, deadline - time.monotonic()))
        return self._rtt_s

    # -- operations -----------------------------------------------------------
    async def home(self) -> str:
        """The remote user's $HOME, asked once: argv is never run through a shell that would expand ~."""
        if self._home is None:
            self._home = (await self.run(["sh", "-c", 'printf %s "$HOME"'])).stdout
        return self._home

    async def expand(self, path: str) -> str:
        """A leading ~/ or ~ as the remote home."""
        if path == "~" or path.startswith("~/"):
            return await self.home() + path[1:]
        return path

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 30.0,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
    ) -> RunResult:
        """Run argv on the host; returns its exit status, stdout and stderr."""
        conn = await self.connected(timeout)
        workdir = self._workdir_of(cwd)
        result = await self._run(conn, argv, self._command(argv, cwd, env, workdir), timeout, input)
        if workdir is None:
            return result
        stderr = self._workdir_lines(result.stderr.splitlines(keepends=True))
        if (why := workdir_failure(result.exit_status, stderr)) is not None:
            raise RemoteError(self.host, f"cannot create the workdir {visible(workdir)}: {visible(why)}")
        self._workdir_there = conn
        return dataclasses.replace(result, stderr="".join(stderr))

    def _workdir_of(self, path: str | None) -> str | None:
        """The workdir, if path is in it (as written in the config, or with the remote home expanded)."""
        if path is None:
            return None
        workdir = self.spec.workdir.rstrip("/") or "/"
        forms = {workdir}
        if self._home is not None and (workdir == "~" or workdir.startswith("~/")):
            forms.add(self._home + workdir[1:])
        return workdir if any(path.rstrip("/") == w or path.startswith(w + "/") for w in forms) else None

    @staticmethod
    def _command(argv: Sequence[str], cwd: str | None, env: Mapping[str, str] | None, workdir: str | None) -> str:
        line = shell_command(argv, cwd=cwd, env=env)
        return in_workdir(workdir, line) if workdir is not None else line

    def _workdir_lines(self, lines: list[str]) -> list[str]:
        """A command's stderr less the guard's word that it made the workdir (its first line, if any): said once per
        connection, in the log."""
        if not lines or not lines[0].startswith(WORKDIR_MADE):
            return lines
        if not self._workdir_made:
            self._workdir_made = True
            made = visible(lines[0].removeprefix(WORKDIR_MADE).rstrip("\n"))
            log.warning("%s: a host new to pivot: created its workdir %s (mode 0700)", self.host, made)
        return lines[1:]

    async def _run(
        self, conn: asyncssh.SSHClientConnection, argv: Sequence[str], command: str, timeout: float, input: str | None
    ) -> RunResult:
        try:
            process = await conn.create_process(command, stdin=asyncssh.PIPE if input is not None else asyncssh.DEVNULL)
        except (asyncssh.Error, OSError) as e:
            raise Disconnected(self.host, f"cannot start {argv[0]}: {visible(str(e))}") from e
        if input is not None:
            process.stdin.write(input)
            process.stdin.write_eof()
        try:
            completed = await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(Exception):
                process.send_signal("TERM")
            process.close()
            raise CommandTimeout(self.host, f"{argv[0]} did not finish within {timeout:g} s") from None
        except (asyncssh.Error, OSError) as e:
            raise Disconnected(self.host, f"connection lost while running {argv[0]}: {visible(str(e))}") from e
        return RunResult(
            argv=tuple(argv),
            exit_status=completed.exit_status,
            stdout=decode(completed.stdout or ""),
            stderr=decode(completed.stderr or ""),
            signal=completed.exit_signal[0] if completed.exit_signal else None,
        )

    async def stream(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> RemoteStream:
        """Start a long-running command; iterate its stdout lines, then `stop()` it."""
        conn = await self.connected(timeout)
        workdir = self._workdir_of(cwd)
        process = await conn.create_process(self._command(argv, cwd, env, workdir), stdin=asyncssh.PIPE)
        return RemoteStream(self.host, tuple(argv), process, own_stderr=None if workdir is None else self._workdir_lines)

    async def upload(self, source: bytes | str | os.PathLike[str], remote_path: str, *, mode: int = 0o644) -> None:
        """Write a local file (or bytes) to the host atomically: a temporary name, then rename."""
        conn = await self.connected()
        workdir = self._workdir_of(remote_path)  # made as a command makes it, before SFTP makes its path
        if workdir is not None and self._workdir_there is not conn:
            await self.run(["true"], cwd=workdir)
        data = source if isinstance(source, bytes) else await asyncio.to_thread(Path(source).read_bytes)
        path = remote_path[2:] if remote_path.startswith("~/") else remote_path  # SFTP is relative to home
        # an unpredictable name, created exclusively: a symlink planted at it is never followed (the rename then
        # replaces whatever sits at the path, a symlink included, without following it)
        tmp = f"{path}.pivot-tmp-{secrets.token_hex(8)}"
        try:
            async with conn.start_sftp_client() as sftp:
                parent = os.path.dirname(path)
                if parent:
                    await sftp.makedirs(parent, exist_ok=True)
                async with sftp.open(tmp, "xb") as f:
                    await f.write(data)
                await sftp.chmod(tmp, mode)
                await sftp.posix_rename(tmp, path)
        except asyncssh.SFTPError as e:
            raise RemoteError(self.host, f"cannot write {visible(remote_path)}: {visible(e.reason)}") from e
        except (asyncssh.Error, OSError) as e:  # the link, not the host's disk
            raise Disconnected(self.host, f"connection lost while writing {visible(remote_path)}: {visible(str(e))}") from e

    async def read_file(self, remote_path: str, *, limit: int) -> bytes:
        """A small file of the host (at most `limit` bytes, else RemoteError): untrusted bytes."""
        conn = await self.connected()
        path = remote_path[2:] if remote_path.startswith("~/") else remote_path  # SFTP is relative to home
        try:
            async with conn.start_sftp_client() as sftp, sftp.open(path, "rb") as f:
                raw = await f.read(limit + 1)
        except asyncssh.SFTPError as e:
            raise RemoteError(self.host, f"cannot read {visible(remote_path)}: {visible(e.reason)}") from e
        except (asyncssh.Error, OSError) as e:
            raise Disconnected(self.host, f"connection lost while reading {visible(remote_path)}: {visible(str(e))}") from e
        data = raw if isinstance(raw, bytes) else raw.encode()  # "rb": bytes
        if len(data) > limit:
            raise RemoteError(self.host, f"{visible(remote_path)} is larger than {limit} bytes")
        return data

    async def forward(self, remote_host: str, remote_port: int, local_port: int = 0) -> PortForward:
        """Listen on 127.0.0.1:local_port and carry each connection to remote_host:remote_port.

        The forward survives reconnects: it is opened again on the same local port.
        """
        conn = await self.connected()
        listener = await conn.forward_local_port("127.0.0.1", local_port, remote_host, remote_port)
        forward = PortForward(lambda port: self._forwards.pop(port, None), remote_host, remote_port, listener.get_port(), listener)
        self._forwards[forward.local_port] = forward
        return forward

    async def _restore_forwards(self) -> None:
        assert self._conn is not None
        for forward in list(self._forwards.values()):
            try:
                forward._listener = await self._conn.forward_local_port(
                    "127.0.0.1", forward.local_port, forward.remote_host, forward.remote_port
                )
            except (asyncssh.Error, OSError) as e:
                log.warning("%s: cannot restore forward %s: %s", self.host, forward, e)

"""One SSH connection per host, shared by everything that talks to it.

A supervisor task keeps the connection up: it connects, measures the round
trip, waits for the link to drop and reconnects with backoff, publishing each
change as a `ConnectionEvent`. Operations wait (up to their timeout) for the
link to be up, so a short outage delays them instead of failing them.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from console.config import HostSpec
from console.remote.command import shell_command
from console.remote.errors import (
    AuthFailed,
    CommandTimeout,
    ConnectFailed,
    ConnectionRefused,
    ConnectTimeout,
    Disconnected,
    DnsError,
    HostKeyMismatch,
    HostKeyUnknown,
    RemoteError,
)
from console.untrusted import decode, visible

log = logging.getLogger(__name__)

BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
RTT_INTERVAL_S = 30.0


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


@dataclass(frozen=True)
class RunResult:
    argv: tuple[str, ...]
    exit_status: int | None
    stdout: str
    stderr: str
    signal: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class _Client(asyncssh.SSHClient):
    def __init__(self) -> None:
        self.lost_reason: str | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost_reason = visible(str(exc)) if exc else "closed by the remote end"  # may carry the host's words


class Connection:
    def __init__(self, spec: HostSpec, *, tunnel: Connection | None = None):
        self.spec = spec
        self.host = spec.name
        self._tunnel = tunnel
        self._conn: asyncssh.SSHClientConnection | None = None
        self._client: _Client | None = None
        self._up = asyncio.Event()
        self._changed = asyncio.Event()  # replaced on every state change; waiters hold the old one
        self._supervisor: asyncio.Task[None] | None = None
        self._listeners: list[Callable[[ConnectionEvent], None]] = []
        self._forwards: dict[int, PortForward] = {}
        self.last_error: RemoteError | None = None
        self.last_event = ConnectionEvent(self.host, ConnState.CLOSED)
        self._home: str | None = None

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
        if self._supervisor:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        for forward in list(self._forwards.values()):
            forward.close()
        if self._conn:
            self._conn.close()
            with contextlib.suppress(Exception):
                await self._conn.wait_closed()
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
                self._conn, self._client = await self._connect()
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
            rtt = await self._measure_rtt()
            await self._restore_forwards()
            self._up.set()
            self._emit(ConnState.UP, rtt_s=rtt)
            closed = asyncio.ensure_future(self._conn.wait_closed())
            while not closed.done():
                done, _ = await asyncio.wait({closed}, timeout=RTT_INTERVAL_S)
                if not done and (rtt := await self._measure_rtt()) is not None:
                    self._emit(ConnState.UP, rtt_s=rtt)
            self._up.clear()
            reason = self._client.lost_reason if self._client else None
            self.last_error = Disconnected(self.host, f"connection lost: {reason or 'unknown reason'}")
            self._emit(ConnState.DOWN, reason=reason or "connection lost")

    async def _measure_rtt(self) -> float | None:
        if self._conn is None:
            return None
        t0 = time.monotonic()
        try:
            await asyncio.wait_for(self._conn.run("true", check=False), timeout=10)
        except (asyncssh.Error, OSError, asyncio.TimeoutError):
            return None
        return time.monotonic() - t0

    # -- connecting -----------------------------------------------------------
    async def _connect(self) -> tuple[asyncssh.SSHClientConnection, _Client]:
        spec = self.spec
        options: dict[str, object] = {
            # remote output is untrusted bytes: one invalid UTF-8 byte must not fail the channel and drop the link
            "encoding": "utf-8",
            "errors": "replace",
            "keepalive_interval": spec.keepalive_s,
            "keepalive_count_max": 3,
            "connect_timeout": spec.connect_timeout_s,
        }
        if spec.user:
            options["username"] = spec.user
        if spec.port:
            options["port"] = spec.port
        if spec.identity:
            identity = os.path.expanduser(spec.identity)
            try:  # loaded here so that a missing or unreadable key is named (asyncssh says only "No such file")
                options["client_keys"] = asyncssh.load_keypairs([identity])
            except (OSError, asyncssh.KeyImportError) as e:
                raise AuthFailed(self.host, f"identity file {identity} (hosts.{self.host}.identity): "
                                            f"{getattr(e, 'strerror', None) or e}") from None
        if spec.known_hosts:
            known = known_hosts_path(spec)
            if not known.is_file():
                raise HostKeyUnknown(self.host, f"known_hosts file {known} does not exist; run `pivot trust {self.host}`")
            options["known_hosts"] = str(known)
        if self._tunnel is not None:
            options["tunnel"] = await self._tunnel.connected(timeout=spec.connect_timeout_s)
        elif spec.jump:
            options["tunnel"] = spec.jump
        client = _Client()
        try:
            conn = await asyncssh.connect(spec.target, client_factory=lambda: client, **options)  # type: ignore[arg-type]
        except Exception as e:  # every failure becomes one readable line
            raise self._classify(e) from e
        return conn, client

    def _classify(self, e: Exception) -> RemoteError:
        where = f"{self.spec.target}:{self.spec.port or 22}"
        if isinstance(e, RemoteError):
            return e
        if isinstance(e, asyncssh.HostKeyNotVerifiable):
            if self._has_known_key():
                return HostKeyMismatch(
                    self.host,
                    f"HOST KEY CHANGED for {where}: refusing to connect. If the host was reinstalled, "
                    f"check the new fingerprint and remove the old key (ssh-keygen -R), then `pivot trust {self.host}`",
                )
            return HostKeyUnknown(self.host, f"host key of {where} is not known; check it with `pivot trust {self.host}`")
        if isinstance(e, asyncssh.PermissionDenied):
            return AuthFailed(self.host, f"authentication failed for {self.spec.user or 'default user'}@{where}")
        if isinstance(e, socket.gaierror):
            return DnsError(self.host, f"cannot resolve {self.spec.target!r}: {e.strerror}")
        if isinstance(e, ConnectionRefusedError):
            return ConnectionRefused(self.host, f"connection refused by {where}")
        if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
            return ConnectTimeout(self.host, f"no answer from {where} within {self.spec.connect_timeout_s:g} s")
        if isinstance(e, asyncssh.Error):
            return ConnectFailed(self.host, f"{where}: {visible(e.reason)}")
        if isinstance(e, OSError):
            return ConnectFailed(self.host, f"{where}: {e.strerror or e}")
        return ConnectFailed(self.host, f"{where}: {type(e).__name__}: {e}")

    def _has_known_key(self) -> bool:
        """Whether known_hosts holds any key for this host: then a refused key is a changed key."""
        return bool(known_keys(self.spec))

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
        command = shell_command(argv, cwd=cwd, env=env)
        try:
            process = await conn.create_process(command, stdin=asyncssh.PIPE if input is not None else asyncssh.DEVNULL)
        except (asyncssh.Error, OSError) as e:
            raise Disconnected(self.host, f"cannot start {argv[0]}: {visible(str(e))}") from e
        if input is not None:
            process.stdin.write(input)
            process.stdin.write_eof()
        try:
            completed = await asyncio.wait_for(process.wait(), timeout)
        except asyncio.TimeoutError:
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
        process = await conn.create_process(shell_command(argv, cwd=cwd, env=env), stdin=asyncssh.PIPE)
        return RemoteStream(self.host, tuple(argv), process)

    async def upload(self, source: bytes | str | os.PathLike[str], remote_path: str, *, mode: int = 0o644) -> None:
        """Write a local file (or bytes) to the host atomically: a temporary name, then rename."""
        conn = await self.connected()
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        path = remote_path[2:] if remote_path.startswith("~/") else remote_path  # SFTP is relative to home
        tmp = f"{path}.pivot-tmp-{os.getpid()}"
        async with conn.start_sftp_client() as sftp:
            parent = os.path.dirname(path)
            if parent:
                await sftp.makedirs(parent, exist_ok=True)
            async with sftp.open(tmp, "wb") as f:
                await f.write(data)
            await sftp.chmod(tmp, mode)
            await sftp.posix_rename(tmp, path)

    async def forward(self, remote_host: str, remote_port: int, local_port: int = 0) -> PortForward:
        """Listen on 127.0.0.1:local_port and carry each connection to remote_host:remote_port.

        The forward survives reconnects: it is opened again on the same local port.
        """
        conn = await self.connected()
        listener = await conn.forward_local_port("127.0.0.1", local_port, remote_host, remote_port)
        forward = PortForward(self, remote_host, remote_port, listener.get_port(), listener)
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


def known_hosts_path(spec: HostSpec) -> Path:
    return Path(os.path.expanduser(spec.known_hosts)) if spec.known_hosts else Path.home() / ".ssh" / "known_hosts"


def known_keys(spec: HostSpec) -> list[asyncssh.SSHKey]:
    """The keys known_hosts holds for this host (by name or address, and port)."""
    try:
        known = asyncssh.read_known_hosts(str(known_hosts_path(spec)))
    except (OSError, ValueError):
        return []
    try:
        addr = socket.gethostbyname(spec.target)
    except OSError:
        addr = spec.target
    trusted, ca_keys = known.match(spec.target, addr, spec.port or 22)[:2]
    return [*trusted, *ca_keys]


class PortForward:
    def __init__(self, owner: Connection, remote_host: str, remote_port: int, local_port: int, listener: asyncssh.SSHListener):
        self._owner = owner
        self.remote_host, self.remote_port, self.local_port = remote_host, remote_port, local_port
        self._listener: asyncssh.SSHListener | None = listener

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    def close(self) -> None:
        self._owner._forwards.pop(self.local_port, None)
        if self._listener:
            self._listener.close()
            self._listener = None

    def __str__(self) -> str:
        return f"127.0.0.1:{self.local_port} -> {self.remote_host}:{self.remote_port}"


class RemoteStream:
    """The lines of a long-running remote command. Use `async with` or call `stop()`."""

    def __init__(self, host: str, argv: tuple[str, ...], process: asyncssh.SSHClientProcess):
        self.host, self.argv = host, argv
        self._process = process
        self.stderr_tail: deque[str] = deque(maxlen=50)
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            async for line in self._process.stderr:
                self.stderr_tail.append(visible(line.rstrip("\n")))

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        while (line := await self.readline()) is not None:
            yield line

    async def readline(self) -> str | None:
        """The next line, or None at the end of the stream."""
        try:
            line = await self._process.stdout.readline()
        except (asyncssh.Error, OSError) as e:
            raise Disconnected(self.host, f"stream {self.argv[0]} lost: {visible(str(e))}") from e
        return line.rstrip("\n") if line else None

    @property
    def exit_status(self) -> int | None:
        return self._process.exit_status

    async def stop(self, grace_s: float = 2.0) -> None:
        """SIGTERM the remote command, close its stdin, and close the channel after a grace period."""
        process = self._process
        if process.exit_status is None:
            with contextlib.suppress(Exception):
                process.send_signal("TERM")
            with contextlib.suppress(Exception):
                process.stdin.write_eof()
            with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error, OSError):
                await asyncio.wait_for(process.wait_closed(), grace_s)
        process.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(process.wait_closed(), grace_s)
        self._stderr_task.cancel()

    async def __aenter__(self) -> RemoteStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

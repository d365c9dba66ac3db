"""What a connection hands out: a command's result, a long-running command's lines, a local port forward."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

import asyncssh

from console.remote.errors import Disconnected
from console.untrusted import visible


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


class PortForward:
    def __init__(
        self, closed: Callable[[int], object], remote_host: str, remote_port: int, local_port: int, listener: asyncssh.SSHListener
    ):
        """closed: told the local port when the forward closes (its connection forgets it)."""
        self._closed = closed
        self.remote_host, self.remote_port, self.local_port = remote_host, remote_port, local_port
        self._listener: asyncssh.SSHListener | None = listener

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    def close(self) -> None:
        self._closed(self.local_port)
        if self._listener:
            self._listener.close()
            self._listener = None

    def __str__(self) -> str:
        return f"127.0.0.1:{self.local_port} -> {self.remote_host}:{self.remote_port}"


class LineStream(Protocol):
    """Lines as they come, until stopped: a remote command's (RemoteStream), or a test's."""

    async def __aenter__(self) -> LineStream: ...
    async def __aexit__(self, *exc: object) -> None: ...
    def __aiter__(self) -> AsyncIterator[str]: ...


class RemoteStream:
    """The lines of a long-running remote command. Use `async with` or call `stop()`."""

    def __init__(
        self,
        host: str,
        argv: tuple[str, ...],
        process: asyncssh.SSHClientProcess,
        *,
        own_stderr: Callable[[list[str]], list[str]] | None = None,
    ):
        """own_stderr: given the first stderr line, what of it is the command's own (the rest was pivot's word to itself)."""
        self.host, self.argv = host, argv
        self._process = process
        self._own_stderr = own_stderr
        self.stderr_tail: deque[str] = deque(maxlen=50)
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            first = True
            async for line in self._process.stderr:
                if not line:  # asyncssh hands the end of the stream over as an empty read
                    break
                for kept in self._own_stderr([line]) if first and self._own_stderr is not None else [line]:
                    self.stderr_tail.append(visible(kept.rstrip("\n")))
                first = False

    async def __aiter__(self) -> AsyncIterator[str]:
        while (line := await self.readline()) is not None:
            yield line

    async def readline(self) -> str | None:
        """The next line, or None at the end of the stream."""
        try:
            line = await self._process.stdout.readline()
        except (asyncssh.Error, OSError) as e:
            raise Disconnected(self.host, f"stream {self.argv[0]} lost: {visible(str(e))}") from e
        return line.rstrip("\n") if line else None

    def write(self, text: str) -> None:
        """To the remote command's stdin (a closed channel fails at the next read)."""
        try:
            self._process.stdin.write(text)
        except (asyncssh.Error, OSError) as e:
            raise Disconnected(self.host, f"stream {self.argv[0]} lost: {visible(str(e))}") from e

    @property
    def exit_status(self) -> int | None:
        return self._process.exit_status

    async def finished(self, within_s: float = 5.0) -> int | None:
        """After the last line: the command's exit status once its channel closes, and its stderr read to the end
        (None if it does not close within within_s)."""
        with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error, OSError):
            await asyncio.wait_for(self._process.wait_closed(), within_s)
            await asyncio.wait_for(asyncio.shield(self._stderr_task), within_s)
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

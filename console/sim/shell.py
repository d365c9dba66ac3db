"""The simulated host's SSH sessions, as sshd runs them: each exec a real process in its own session, on pipes (exit
status, channel signals, end of file passed through, both ways) or on a pty (an interactive login)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import signal
import struct
import termios
from collections.abc import Callable
from pathlib import Path

import asyncssh


class Sessions:
    def __init__(self, env: Callable[[], dict[str, str]], home: Path):
        self.env, self.home = env, home
        self.running: dict[int, asyncio.subprocess.Process] = {}  # pid -> a session's process (our direct children)
        self.spawning = 0  # sessions being started, not yet in `running`

    async def __call__(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        """asyncssh's process_factory: one session, to its exit status."""
        try:
            if process.term_type:
                status = await self._pty_session(process)
            else:
                status = await self._pipe_session(process)
        except Exception as e:  # noqa: BLE001 - one broken session must not take the host down
            status = 255
            with contextlib.suppress(Exception):
                process.stderr.write(f"pivot demo host: {e}\n".encode())
        with contextlib.suppress(Exception):
            process.exit(status)

    async def _spawn(self, argv: list[str], **kw: object) -> asyncio.subprocess.Process:
        """A session's process, registered as ours before the reaper may look: a command that ends at once (test -e)
        must not be reaped as an adopted orphan, which would steal its exit status from the session."""
        self.spawning += 1
        try:
            kw = {"env": self.env(), "cwd": self.home, "start_new_session": True, **kw}
            child = await asyncio.create_subprocess_exec(*argv, **kw)  # type: ignore[arg-type]
            self.running[child.pid] = child
            return child
        finally:
            self.spawning -= 1

    async def _pipe_session(self, process: asyncssh.SSHServerProcess[bytes]) -> int:
        argv = ["/bin/sh", "-c", process.command] if process.command else ["/bin/sh"]
        child = await self._spawn(argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert child.stdin and child.stdout and child.stderr

        def on_channel_exception(exc: Exception) -> None:
            # sshd delivers a channel signal to the command, whether or not stdin is still open
            if isinstance(exc, asyncssh.SignalReceived):
                with contextlib.suppress(ProcessLookupError, KeyError):
                    child.send_signal(signal.Signals[f"SIG{exc.signal}"])

        process.exception_received = on_channel_exception  # type: ignore[method-assign]

        def hang_up() -> None:
            # the channel is gone (closed, or its connection lost): close the child's pipes, as sshd does, so that its
            # stdin reaches end of file and its next write a broken pipe, and no output is read for nobody
            for pipe in (child.stdin, child.stdout, child.stderr):
                transport = getattr(pipe, "_transport", None) or getattr(pipe, "transport", None)
                if transport is not None:
                    transport.close()

        async def feed() -> None:
            assert child.stdin is not None  # started with stdin=PIPE
            while True:
                try:
                    data = await process.stdin.read(65536)
                except (asyncssh.Error, OSError):
                    hang_up()  # the connection died under the channel
                    return
                if not data:
                    break
                try:
                    child.stdin.write(data)
                    await child.stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    return
            with contextlib.suppress(OSError):
                child.stdin.close()

        async def pump(source: asyncio.StreamReader, sink: asyncssh.SSHWriter[bytes]) -> None:
            while data := await source.read(65536):
                try:
                    sink.write(data)
                    await sink.drain()
                except (asyncssh.Error, OSError):
                    hang_up()
                    return

        feeder = asyncio.create_task(feed())
        watcher = asyncio.create_task(process.wait_closed())
        watcher.add_done_callback(lambda _: hang_up())
        try:
            await asyncio.gather(pump(child.stdout, process.stdout), pump(child.stderr, process.stderr))
            status = await child.wait()
        finally:
            watcher.cancel()
            feeder.cancel()
            self.running.pop(child.pid, None)
            if child.returncode is None:  # cancelled before the child ended: nobody reads its pipes any more
                hang_up()
        return status if status >= 0 else 128 - status

    async def _pty_session(self, process: asyncssh.SSHServerProcess[bytes]) -> int:
        master, slave = pty.openpty()
        cols, rows, *_ = process.term_size
        if cols and rows:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        argv = ["/bin/sh", "-c", process.command] if process.command else ["/bin/bash", "-i"]

        def controlling_tty() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        env_term = process.term_type or "xterm"
        child = await self._spawn(
            argv, stdin=slave, stdout=slave, stderr=slave, env={**self.env(), "TERM": env_term}, preexec_fn=controlling_tty
        )
        os.close(slave)
        try:
            await process.redirect(stdin=os.dup(master), stdout=master)
            status = await child.wait()
        finally:
            self.running.pop(child.pid, None)
        return status if status >= 0 else 128 - status

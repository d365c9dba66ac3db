"""A constant shell script run again at each `ask()` over one long-lived SSH channel.

A poll that runs a command opens an SSH session each time: a 1 s poll is a session a second in the host's
auth log and a channel set-up's CPU on both ends. Here one `sh` on the host reads a line per ask, runs the
script, and ends its output with a token of this loop's own (so that no line the script prints, a log
line included, can pass for the end). The channel is opened again after a drop or a timeout.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING

from console.remote.command import workdir_failure
from console.remote.errors import CommandTimeout, Disconnected, RemoteError
from console.remote.streams import RemoteStream
from console.untrusted import visible

if TYPE_CHECKING:
    from console.remote.connection import Connection

# $1: the end token. The script is a constant of the caller's: no data is ever put in it.
_LOOP = 'while IFS= read -r _; do {{ {script}\n}}; printf "\\n%s\\n" "$1"; done'


class RemoteLoop:
    def __init__(self, conn: Connection, script: str, *, cwd: str | None = None):
        self.conn, self.script, self.cwd = conn, script, cwd
        self._stream: RemoteStream | None = None
        self._end = ""
        self._lock = asyncio.Lock()

    async def ask(self, timeout: float = 20.0) -> str:
        """The script's output this time (its last newline aside); raises Disconnected or CommandTimeout, or RemoteError where
        the workdir it runs in could not be made."""
        async with self._lock:
            if self._stream is None or self._stream.exit_status is not None:
                await self._drop()
                self._end = f"--pivot-end-{secrets.token_hex(8)}--"
                self._stream = await self.conn.stream(
                    ["sh", "-c", _LOOP.format(script=self.script), "sh", self._end], cwd=self.cwd, timeout=timeout
                )
            stream = self._stream
            lines: list[str] = []
            try:
                async with asyncio.timeout(timeout):
                    stream.write("\n")
                    while (line := await stream.readline()) is not None:
                        if line == self._end:
                            return "\n".join(lines[:-1] if lines and lines[-1] == "" else lines)
                        lines.append(line)
            except TimeoutError:
                await self._drop()
                raise CommandTimeout(self.conn.host, f"{self.script.split()[0]} did not answer within {timeout:g} s") from None
            except (Disconnected, asyncio.CancelledError):  # a cancelled ask's answer would be read as the next one's
                await self._drop()
                raise
            status = await stream.finished(within_s=2.0)
            await self._drop()
            if (why := workdir_failure(status, stream.stderr_tail)) is not None:
                raise RemoteError(self.conn.host, f"cannot create the workdir {visible(self.cwd or '')}: {visible(why)}")
            raise Disconnected(self.conn.host, "the probe's shell ended")

    async def _drop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop(grace_s=0.5)

    async def close(self) -> None:
        async with self._lock:
            await self._drop()

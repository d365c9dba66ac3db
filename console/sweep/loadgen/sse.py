"""Server-sent events from an untrusted server: the data of each event, with a bound on line length.

A line is read into memory whole before it is parsed; a server that never ends one would grow the
load generator without limit (an unterminated line grew it to 2.3 GB in 20 s), so a line longer
than the bound ends the stream with an error instead. Only what OpenAI-compatible streams use is
read: `data:` fields (joined by newlines within one event), events ended by a blank line; comments
and other fields are skipped, as the SSE specification says.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from console.untrusted import decode


class SSEError(Exception):
    pass


async def sse_data(chunks: AsyncIterator[bytes], *, max_line: int = 1 << 20, idle_s: float | None = None) -> AsyncIterator[str]:
    """idle_s: how long bytes may come without making a whole event (a server that trickles a byte at a time is never
    idle to the socket's timeout, and held a request for the whole of timeout_s)."""
    buffer = bytearray()
    data: list[str] = []
    last_event = time.monotonic()
    async for chunk in chunks:
        buffer += chunk
        if idle_s is not None and b"\n\n" not in chunk and b"\n\r\n" not in chunk and time.monotonic() - last_event > idle_s:
            raise SSEError(f"timeout: bytes but no whole event for {idle_s:g} s (the server trickles)")
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[start:end]).removesuffix(b"\r")
            start = end + 1
            if not line:
                if data:
                    last_event = time.monotonic()
                    yield "\n".join(data)
                    data = []
            elif line.startswith(b"data:"):
                data.append(decode(line[5:].removeprefix(b" ")))
        del buffer[:start]
        if len(buffer) > max_line:
            raise SSEError(f"the server sent a line longer than {max_line // 1024} KiB without ending it")
    if data:
        yield "\n".join(data)

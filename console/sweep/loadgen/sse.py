"""Server-sent events from an untrusted server: the data of each event, with a bound on what is held unfinished.

A line is read into memory whole before it is parsed; a server that never ends one would grow the load generator
without limit (an unterminated line grew it to 2.3 GB in 20 s), so an event held unfinished past the bound ends the
stream with an error instead. Only what OpenAI-compatible streams use is read: `data:` fields (joined by newlines
within one event), events ended by a blank line; comments and other fields are skipped, as the SSE specification says.

This is the load generator's hottest code after the socket (issue 40): what a read brings is cut at its last blank
line in one step, and an event of one `data: ` line (every stream pivot has met) is its data without a Python loop
over its bytes; anything else (`\\r\\n` endings, several lines, comments) takes the general path. Data stays bytes:
the JSON parser reads them, and they are decoded (with replacement) only to be shown.
"""

from __future__ import annotations


class SSEError(Exception):
    pass


class EventReader:
    """Events out of what each read brings, in order; `feed` returns the data of the events that read completed."""

    def __init__(self, *, max_event: int = 1 << 20, idle_s: float | None = None, now: float = 0.0):
        self.max_event, self.idle_s = max_event, idle_s
        self.pending = b""  # an unfinished event
        self.last_event = now

    def feed(self, chunk: bytes, now: float) -> list[bytes]:
        """now: the read's time (time.monotonic()), for the trickle's bound."""
        if not self.pending and chunk.startswith(b"data: ") and chunk.endswith(b"\n\n") and chunk.count(b"\n") == 2 and b"\r" not in chunk:
            self.last_event = now  # a read of one event of one data line: most reads of most streams
            return [chunk[6:-2]]
        text = self.pending + chunk if self.pending else chunk
        if b"\r" in text:
            events = self._general(text, now)
        else:
            end = text.rfind(b"\n\n")
            if end < 0:
                events, self.pending = [], text
            else:
                self.pending = text[end + 2 :]
                self.last_event = now  # an event ended, data or not (a comment that keeps a connection alive)
                events = []
                for block in text[:end].split(b"\n\n"):
                    if block.startswith(b"data: ") and b"\n" not in block:
                        events.append(block[6:])
                    elif block:
                        events += _data(block.split(b"\n"))
        if not events and self.idle_s is not None and now - self.last_event > self.idle_s:
            raise SSEError(f"timeout: bytes but no whole event for {self.idle_s:g} s (the server trickles)")
        if len(self.pending) > self.max_event:
            what = "an event" if b"\n" in self.pending else "a line"
            raise SSEError(f"the server sent {what} longer than {self.max_event // 1024} KiB without ending it")
        return events

    def _general(self, text: bytes, now: float) -> list[bytes]:
        """Lines ended by \\n or \\r\\n, an event by a blank one."""
        events: list[bytes] = []
        lines: list[bytes] = []
        start = 0
        while (end := text.find(b"\n", start)) >= 0:
            line = text[start:end].removesuffix(b"\r")
            start = end + 1
            if line:
                lines.append(line)
            elif lines:
                events += _data(lines)
                lines = []
                self.last_event = now
        self.pending = b"".join(line + b"\n" for line in lines) + text[start:]
        return events

    def end(self) -> list[bytes]:
        """What an unfinished last event's whole lines held, once the stream ends (a line cut off is not one)."""
        lines = [line.removesuffix(b"\r") for line in self.pending.split(b"\n")[:-1]]
        self.pending = b""
        return _data([line for line in lines if line])


def _data(lines: list[bytes]) -> list[bytes]:
    """The data of one event's lines ([] for an event with none)."""
    data = [line[5:].removeprefix(b" ") for line in lines if line.startswith(b"data:")]
    return [b"\n".join(data)] if data else []

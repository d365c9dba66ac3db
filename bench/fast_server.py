"""A server that is never the limit (issue 40): OpenAI-compatible streaming completions from several processes sharing
one port (SO_REUSEPORT: the kernel spreads connections over them), each answer prepared once per shape and written
as fast as the socket takes it, so that what a benchmark measures is the client.

An answer is `tokens / tokens_per_chunk` SSE events of one word per token, the last with finish_reason "length", then
a usage-only event and `data: [DONE]`, as OpenAI's stream with `stream_options.include_usage` ends (chunked transfer
encoding, kept alive). `--itl-ms` paces each stream (a token every so many ms, as a real engine's decode step); 0
writes `--burst` events a time, yielding to the other streams between. It answers GET /v1/models and 404 to anything
else it does not serve (/metrics, /tokenize). The body is parsed only for what shapes the answer.

    python -m bench.fast_server --port 8000 [--processes 2] [--tokens-per-chunk 1] [--itl-ms 0] [--burst 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
from functools import lru_cache

import orjson

MODEL = "fast"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"0\r\n\r\n"
MAX_BODY = 1 << 22


def _chunk(data: bytes) -> bytes:
    """One HTTP chunk holding one SSE event."""
    event = b"data: " + data + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


@lru_cache(maxsize=256)
def answer(tokens: int, per_chunk: int, chat: bool, prompt_tokens: int) -> tuple[bytes, ...]:
    """The events of one answer, each an HTTP chunk, made once per shape."""
    kind = b"chat.completion.chunk" if chat else b"text_completion"
    envelope = b'{"id":"cmpl-fast","object":"%s","created":0,"model":"%s",' % (kind, MODEL.encode())
    events = []
    sent = 0
    while sent < tokens:
        n = min(per_chunk, tokens - sent)
        sent += n
        text = orjson.dumps(" tok" * n)
        finish = b'"length"' if sent == tokens else b"null"
        if chat:
            choice = b'{"index":0,"delta":{"content":%s},"finish_reason":%s}' % (text, finish)
        else:
            choice = b'{"index":0,"text":%s,"logprobs":null,"finish_reason":%s}' % (text, finish)
        events.append(_chunk(envelope + b'"choices":[%s],"usage":null}' % choice))
    usage = orjson.dumps({"prompt_tokens": prompt_tokens, "completion_tokens": tokens, "total_tokens": prompt_tokens + tokens})
    events.append(_chunk(envelope + b'"choices":[],"usage":%s}' % usage))
    events.append(_chunk(b"[DONE]"))
    events.append(END)
    return tuple(events)


def _plain(status: str, body: bytes, content_type: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (status.encode(), content_type, len(body), body)


MODELS = _plain("200 OK", orjson.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "bench"}]}))
NOT_FOUND = _plain("404 Not Found", b'{"error":"not found"}')


class Connection(asyncio.Protocol):
    """One client connection: requests in order (a kept-alive connection carries one at a time)."""

    def __init__(self, per_chunk: int, itl_s: float, burst: int):
        self.per_chunk, self.itl_s, self.burst = per_chunk, itl_s, burst
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.busy: asyncio.Task[None] | None = None
        self.writable = asyncio.Event()
        self.writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.busy is not None:
            self.busy.cancel()
        self.writable.set()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.busy is None or self.busy.done():
            self._next()

    def _next(self) -> None:
        """Take the next whole request from the buffer, if there is one."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        method, path, _ = (head[0].split(" ") + ["", ""])[:3]
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip() or 0)
        if length > MAX_BODY or len(self.buffer) < end + 4 + length:
            return
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        self.busy = asyncio.get_running_loop().create_task(self._answer(method, path, body))
        self.busy.add_done_callback(lambda _: self._next() if self.buffer else None)

    async def _answer(self, method: str, path: str, body: bytes) -> None:
        transport = self.transport
        assert transport is not None
        if method == "GET" and path == "/v1/models":
            transport.write(MODELS)
            return
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            transport.write(NOT_FOUND)
            return
        request = orjson.loads(body)
        tokens = int(request.get("max_tokens") or 16)
        prompt = request.get("prompt") or request.get("messages") or ""
        events = answer(tokens, self.per_chunk, path.endswith("chat/completions"), max(1, len(str(prompt)) // 4))
        transport.write(HEAD)
        for i, event in enumerate(events):
            transport.write(event)
            if self.itl_s and i < len(events) - 3:
                await asyncio.sleep(self.itl_s * self.per_chunk)
            elif (i + 1) % self.burst == 0:
                await asyncio.sleep(0)
            if not self.writable.is_set():  # the client reads slower than this writes: wait for it, as a server does
                await self.writable.wait()
            if transport.is_closing():
                return


def serve(sock: socket.socket, per_chunk: int, itl_s: float, burst: int) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Connection(per_chunk, itl_s, burst), sock=sock, backlog=4096)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        server.close()

    asyncio.run(main())


def listening(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(4096)
    return sock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")  # loopback: benchmarks never leave the machine
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--burst", type=int, default=1, help="events written between yields, unpaced")
    args = parser.parse_args()
    children = []
    for _ in range(args.processes):  # each its own socket on the one port, bound before the next forks
        sock = listening(args.host, args.port)
        pid = os.fork()
        if pid == 0:
            with contextlib.suppress(KeyboardInterrupt):
                serve(sock, args.tokens_per_chunk, args.itl_ms / 1000, args.burst)
            os._exit(0)
        sock.close()
        children.append(pid)
    print(f"serving on {args.host}:{args.port} in {len(children)} processes", flush=True)

    def stop(*_: object) -> None:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for pid in children:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    sys.exit(0)


if __name__ == "__main__":
    main()

"""A hostile or broken OpenAI-compatible server on loopback, for the load generator's fault tests.

    python -m tests.faults.hostile_server MODE PORT

Plain asyncio streams (no framework that would tidy up what it sends): each mode answers
/v1/completions with one kind of garbage, everything else as a well-behaved server would.
"""

from __future__ import annotations

import asyncio
import json
import sys

GOOD_CHUNK = {"id": "x", "object": "text_completion", "choices": [{"index": 0, "text": " tok", "finish_reason": None}]}


def chunk(data: object) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def good_stream(
    max_tokens: int, *, per_chunk: int = 1, usage: bool = True, finish: str = "length", stop_after: int | None = None
) -> list[bytes]:
    out, sent = [], 0
    limit = stop_after or max_tokens
    while sent < limit:
        n = min(per_chunk, limit - sent)
        sent += n
        body: dict[str, object] = {
            **GOOD_CHUNK,
            "choices": [{"index": 0, "text": " tok" * n, "finish_reason": finish if sent >= limit else None}],
        }
        if usage:
            body["usage"] = {"prompt_tokens": 4, "completion_tokens": sent, "total_tokens": 4 + sent}
        out.append(chunk(body))
    return out + [b"data: [DONE]\n\n"]


async def stream_body(mode: str, max_tokens: int, writer: asyncio.StreamWriter) -> None:
    bad = {
        "choices_str": {"choices": "str"},
        "choices_null": {"choices": [None]},
        "usage_list": {**GOOD_CHUNK, "usage": [1]},
        "tokens_abc": {**GOOD_CHUNK, "usage": {"completion_tokens": "abc"}},
        "top_list": [1, 2, 3],
        "top_null": None,
        "top_number": 5,
        "usage_huge": {**GOOD_CHUNK, "usage": {"completion_tokens": 10**30}},
    }
    if mode in bad:
        writer.write(chunk(GOOD_CHUNK) + chunk(bad[mode]))
        return
    if mode == "deep_json":
        writer.write(b"data: " + b"[" * 100000 + b"]" * 100000 + b"\n\n")
    elif mode == "endless":
        while not writer.is_closing():
            writer.write(chunk(GOOD_CHUNK))
            await writer.drain()
    elif mode == "empty_endless":  # valid chunks without any content, for ever
        while not writer.is_closing():
            writer.write(chunk({**GOOD_CHUNK, "choices": [{"index": 0, "text": "", "finish_reason": None}]}))
            await writer.drain()
    elif mode == "unterminated":
        writer.write(b"data: ")
        while not writer.is_closing():
            writer.write(b"x" * 65536)
            await writer.drain()
    elif mode == "stall":
        writer.write(chunk(GOOD_CHUNK))
        await writer.drain()
        await asyncio.sleep(3600)
    elif mode == "trickle":  # one byte at a time, never idle for long: a request held for its whole timeout_s
        for part in good_stream(max_tokens):
            for i in range(len(part)):
                if writer.is_closing():
                    return
                writer.write(part[i : i + 1])
                await writer.drain()
                await asyncio.sleep(0.05)
    elif mode == "over":  # 5000 tokens for any max_tokens, in four chunks
        for part in good_stream(5000, per_chunk=1250):
            writer.write(part)
    elif mode == "no_usage_multi":  # 3 tokens in each chunk, no usage at all, finish "length"
        for part in good_stream(max_tokens, per_chunk=3, usage=False):
            writer.write(part)
    elif mode == "short_stop":  # the model stops after 5 tokens
        for part in good_stream(max_tokens, stop_after=5, finish="stop"):
            writer.write(part)
    elif mode == "cut":  # the connection closes mid-stream: no finish reason, no [DONE]
        for part in good_stream(max_tokens)[:3]:
            writer.write(part)
    else:
        for part in good_stream(max_tokens):
            writer.write(part)


NOT_A_STREAM = {  # mode: (content type, body) of a 200 answer to a streamed request
    "whole_json": (
        b"application/json",
        json.dumps({"id": "x", "object": "text_completion", "choices": [GOOD_CHUNK["choices"][0]]}).encode(),
    ),
    "html": (b"text/html", b"<html><body><h1>502 Bad Gateway</h1><hr><center>nginx</center></body></html>"),
    "bad_chunk": (b"text/event-stream", b"zz\r\ndata: {}\r\n"),  # a chunk size that is not hex
}


async def handle(mode: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *headers = head.decode("latin-1").split("\r\n")
            method, path, _ = request_line.split(" ", 2)
            length = next((int(h.split(":", 1)[1]) for h in headers if h.lower().startswith("content-length:")), 0)
            body = json.loads(await reader.readexactly(length)) if length else {}
            if path == "/v1/models":
                data = {"data": "not a list"} if mode == "models_bad" else {"data": [{"id": "hostile"}]}
                payload = json.dumps(data).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                    + str(len(payload)).encode()
                    + b"\r\n\r\n"
                    + payload
                )
            elif path == "/v1/completions" and mode == "redirect":  # to another service on the operator's loopback
                writer.write(b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:9/v1/completions\r\ncontent-length: 0\r\n\r\n")
            elif path == "/v1/completions" and mode == "error_body":
                payload = b"\x1b]0;pwned\x07\x1b[2J boom"
                writer.write(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
            elif path == "/v1/completions" and mode in NOT_A_STREAM:  # a 200 that is no event stream
                content_type, payload = NOT_A_STREAM[mode]
                head = b"HTTP/1.1 200 OK\r\ncontent-type: " + content_type + b"\r\n"
                if mode == "bad_chunk":
                    writer.write(head + b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n" + payload)
                else:
                    writer.write(head + b"content-length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
            elif path == "/v1/completions":
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
                await stream_body(mode, int(body.get("max_tokens", 16)), writer)
                await writer.drain()
                writer.close()
                return
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            del method
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(mode: str, port: int) -> None:
    server = await asyncio.start_server(lambda r, w: handle(mode, r, w), "127.0.0.1", port)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))

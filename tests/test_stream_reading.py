"""A request's stream read without parsing each chunk (issue 40): what it records is what a full parse of every chunk
records, and a chunk that is not the learnt one with other text is parsed (and refused where it is garbage)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from console.settings import SweepSettings
from console.sweep.loadgen import chunks
from console.sweep.loadgen.chunks import BadStream, Received, TokensPerChunk, learnt_events, take
from console.sweep.loadgen.requests import Client, by_read, one_request, spread
from console.sweep.loadgen.sse import EventReader, SSEError
from console.sweep.metrics import RequestRecord


@contextlib.asynccontextmanager
async def serving(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> AsyncIterator[str]:
    """A real HTTP server on loopback whose /v1/completions is `handler`: its base URL."""
    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def ask(url: str, max_tokens: int, per_chunk: TokensPerChunk | None = None) -> RequestRecord:
    """One request, as the load generator sends it (per_chunk: what it saw, content chunks counted)."""
    body = {"model": "m", "prompt": "p", "max_tokens": max_tokens, "stream": True}
    settings = SweepSettings.from_dict({"levels": [1], "max_tokens": max_tokens})
    async with Client(url, {}, 2, 30) as client:
        return await one_request(client, "/v1/completions", body, 1, 0, time.monotonic(), False, settings, per_chunk or TokensPerChunk())


ENVELOPE = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m"}


def completion(text: str, finish: str | None = None, usage: dict[str, int] | None = None, *, spaced: bool = False) -> bytes:
    chunk = {**ENVELOPE, "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}], "usage": usage}
    return json.dumps(chunk, separators=(", ", ": ") if spaced else (",", ":"), ensure_ascii=spaced).encode()


def chat(delta: dict[str, str], finish: str | None = None) -> bytes:
    return json.dumps({**ENVELOPE, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode()


STREAMS = {
    "completions": [completion(t) for t in (" a", " b", ' "quoted"', " caf\u00e9", "", " \\ back", " c")]
    + [completion(" d", "length"), completion("", None, {"prompt_tokens": 3, "completion_tokens": 8, "total_tokens": 11})],
    "spaced, ASCII-escaped": [completion(t, spaced=True) for t in (" a", " \u00e9t\u00e9", " b")] + [completion(" c", "stop", spaced=True)],
    "chat": [chat({"role": "assistant", "content": ""}), *(chat({"content": t}) for t in (" a", " b", "", " c")), chat({}, "length")],
    "reasoning": [chat({"reasoning_content": t}) for t in (" think", " more")] + [chat({"content": " x"}), chat({}, "stop")],
}


def record(events: list[bytes], *, learn: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[object, ...]:
    if not learn:
        monkeypatch.setattr(chunks, "_template", lambda data, content: None)
    got, per_chunk = Received(), TokensPerChunk()
    for i, data in enumerate([*events, b"[DONE]"]):
        if take([data], float(i), got, per_chunk):
            break
    monkeypatch.undo()
    return got.times, got.counts, got.usage_tokens, got.prompt_tokens, got.finish, got.done, per_chunk.seen, got.template is not None


@pytest.mark.parametrize("name", STREAMS)
def test_a_stream_read_by_its_learnt_chunk_records_what_a_parse_of_every_chunk_does(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed, learnt = record(STREAMS[name], learn=False, monkeypatch=monkeypatch), record(STREAMS[name], learn=True, monkeypatch=monkeypatch)
    assert parsed[:-1] == learnt[:-1] and learnt[-1]  # the same record, and the short way was taken


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (
            b'{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" x"y","logprobs":null,'
            b'"finish_reason":null}],"usage":null}',
            "malformed SSE data",
        ),  # a raw quote: not a string, so parsed, and refused
        (completion(" x").replace(b'"usage":null', b'"usage":[1]'), "usage is not an object"),
    ],
)
def test_a_chunk_that_is_not_the_learnt_one_with_other_text_is_parsed(bad: bytes, why: str) -> None:
    got, per_chunk = Received(), TokensPerChunk()
    take([completion(" a"), completion(" b")], 0.0, got, per_chunk)
    assert got.template is not None and len(got.times) == 2
    with pytest.raises(BadStream, match=why):
        take([bad], 1.0, got, per_chunk)


def test_events_are_cut_from_reads_whatever_their_split_and_line_endings() -> None:
    stream = b"data: one\n\n: a comment\n\ndata: two\ndata: lines\n\nevent: x\ndata: three\r\n\r\ndata: four\n\n"
    for size in (1, 2, 3, 7, len(stream)):
        reader, got = EventReader(), []
        for i in range(0, len(stream), size):
            got += reader.feed(stream[i : i + size], 0.0)
        assert got + reader.end() == [b"one", b"two\nlines", b"three", b"four"], size


async def test_a_request_whose_reads_are_each_one_learnt_chunk_records_what_a_parse_of_each_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Against a real stream on loopback, each chunk its own write (so mostly its own read): the record of a request
    read by the learnt chunk is the record of one whose every chunk is parsed."""
    texts = [" a", " b", ' "q"', "", " \u00e9", " c"]

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i, text in enumerate(texts):
            await response.write(b"data: " + completion(text, "length" if i == len(texts) - 1 else None) + b"\n\n")
            await asyncio.sleep(0.002)
        usage = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
        await response.write(b"data: " + completion("", None, usage).replace(b'"choices":[{', b'"choices":[],"x":[{') + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        return response

    records, read_short, string = [], [], chunks.JSON_STRING

    class Counted:  # how many chunks were read the short way
        def fullmatch(self, text: bytes) -> object:
            read_short.append(text)
            return string.fullmatch(text)

    async with serving(stream) as url:
        for learn in (False, True):
            monkeypatch.setattr(chunks, "JSON_STRING", Counted())  # the short way of a chunk, and of a read of chunks alone
            if not learn:
                monkeypatch.setattr(chunks, "_template", lambda data, content: None)
            records.append(await ask(url, 16))
            monkeypatch.undo()
    parsed, learnt = records
    assert parsed.ok and learnt.ok, (parsed.error, learnt.error)
    # (the chunks of one read are one arrival: each request's reads fall where they fall, its tokens do not)
    assert (parsed.tokens, sum(n for _, n in parsed.chunks), parsed.finish_reason, parsed.prompt_tokens) == (
        learnt.tokens,
        sum(n for _, n in learnt.chunks),
        learnt.finish_reason,
        learnt.prompt_tokens,
    )
    assert learnt.tokens == 5 and len(read_short) >= 4  # all but the first, where each came alone


async def test_reads_of_several_learnt_chunks_are_read_whole_and_anything_else_in_them_is_parsed() -> None:
    """Several events a write (so several a read): learnt chunks with a bare quote or an empty text among them, then
    a chunk that only looks like the learnt one (a raw quote in its text): the request fails with the parser's reason,
    and one without it has every chunk counted."""
    first = b"data: " + completion(" a") + b"\n\n"
    many = b"".join(b"data: " + completion(t) + b"\n\n" for t in (" b", ' "q"', "", " \u00e9", " c"))
    forged = b"data: " + completion(" d").replace(b'" d"', b'" d"d"') + b"\n\n"
    end = b"data: " + completion(" f", "length") + b"\n\ndata: [DONE]\n\n"

    def writing(*parts: bytes) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def stream(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for part in parts:
                await response.write(part)
                await asyncio.sleep(0.01)
            return response

        return stream

    per_chunk = TokensPerChunk()
    async with serving(writing(first, many, end)) as url:
        record = await ask(url, 16, per_chunk)
    assert record.ok and per_chunk.seen == 6 and record.finish_reason == "length", record.error  # "" is no chunk of text
    assert sum(n for _, n in record.chunks) == 16
    async with serving(writing(first, many + forged, end)) as url:
        record = await ask(url, 16)
    assert record.error is not None and record.error.startswith("malformed SSE data: "), record.error


def test_a_read_is_cut_into_learnt_chunks_up_to_the_first_that_is_not_one() -> None:
    framed = (b'data: {"choices":[{"text":"', b'"}]}\n\n')
    event = b"".join(framed).replace(b'""', b'"%s"')
    read = b"".join(event % t for t in (b" a", b"", b' \\"q\\"', b" b"))
    assert learnt_events(read, framed) == ([b" a", b"", b' \\"q\\"', b" b"], b"")
    assert learnt_events(read + b"data: [DONE]\n\n", framed) == ([b" a", b"", b' \\"q\\"', b" b"], b"data: [DONE]\n\n")
    forged = event % b' c","finish_reason":"stop'  # a raw quote: not a string's body, so not the learnt chunk
    assert learnt_events(event % b" a" + forged + event % b" d", framed) == ([b" a"], forged + event % b" d")
    assert learnt_events(b"data: [DONE]\n\n", framed) == ([], b"data: [DONE]\n\n")


def test_the_chunks_of_one_read_are_one_arrival_and_a_total_is_spread_over_the_chunks() -> None:
    assert by_read([0.1, 0.1, 0.2, 0.3, 0.3, 0.3], [1, 1, 2, 1, 1, 1]) == ((0.1, 2), (0.2, 2), (0.3, 3))
    assert spread(10, 4) == [3, 3, 2, 2] and spread(3, 5) == [1, 1, 1, 0, 0]


def test_a_comment_keeps_a_stream_alive_and_a_line_cut_off_at_its_end_is_not_read() -> None:
    reader = EventReader(idle_s=1.0, now=0.0)
    assert reader.feed(b": keep-alive\n\n", 0.9) == [] and reader.feed(b": again\n\n", 1.8) == []  # not idle: events end
    with pytest.raises(SSEError, match="no whole event for 1 s"):
        reader.feed(b"data: {", 3.0)
    cut = EventReader()
    assert cut.feed(b"data: a\ndata: b", 0.0) == [] and cut.end() == [b"a"]


async def test_an_endless_stream_of_the_learnt_chunk_is_cut_at_the_bound() -> None:
    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        while True:  # until the client goes
            await response.write(b"data: " + completion(" a") + b"\n\n")
            await asyncio.sleep(0.001)

    async with serving(endless) as url:
        record = await ask(url, 4)
    assert record.error == "the stream went on past 32 chunks for max_tokens 4"

"""What a streamed completion's chunks say, read from untrusted bytes: each chunk's content, token counts and finish
reason (checked for shape: a malformed chunk fails its request with the reason), the server's own record where it
sends one (llama-server's `timings`), and a request's chunks taken by the one it parsed (`_template`): issue 40's
short way, without JSON for a chunk that is the learnt one with other text."""

from __future__ import annotations

import json
import re
from itertools import takewhile
from typing import Any

import orjson

from console.untrusted import decode, visible

MAX_REPORTED_TOKENS = 10**7  # a usage count beyond this is not a count


class BadStream(Exception):
    """What the server sent cannot be a completion stream: the request fails with this reason."""


def _excerpt(data: Any) -> str:
    return visible(json.dumps(data)[:80] if not isinstance(data, str) else data[:80])


def _count(usage: dict[str, Any], key: str) -> int | None:
    tokens = usage.get(key)
    if tokens is None:
        return None
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= MAX_REPORTED_TOKENS:
        raise BadStream(f"{key} is not a token count: {_excerpt(tokens)}")
    return tokens


def prompt_count(data: Any) -> int | None:
    """The prompt's tokens, by the usage of a chunk parse_chunk took already."""
    usage = data.get("usage") if isinstance(data, dict) else None
    return _count(usage, "prompt_tokens") if isinstance(usage, dict) else None


def parse_chunk(data: Any) -> tuple[str, int | None, str | None]:
    """(content, completion tokens so far per the server's usage, finish reason) of one streamed chunk."""
    if type(data) is not dict:
        raise BadStream(f"a chunk that is not a JSON object: {_excerpt(data)}")
    if data.get("error") is not None:
        raise BadStream(f"the server reported an error mid-stream: {_excerpt(data['error'])}")
    choices = data.get("choices") or []
    if type(choices) is not list:
        raise BadStream(f"choices is not a list: {_excerpt(choices)}")
    content, finish = "", None
    if choices:
        choice = choices[0]
        if type(choice) is not dict:
            raise BadStream(f"a choice that is not an object: {_excerpt(choice)}")
        text = choice.get("text")
        if text is None:
            delta = choice.get("delta")
            if delta is not None and type(delta) is not dict:
                raise BadStream(f"a delta that is not an object: {_excerpt(delta)}")
            if delta:
                text = delta.get("content") or delta.get("reasoning_content")
        if text is not None and type(text) is not str:
            raise BadStream(f"content that is not text: {_excerpt(text)}")
        content = text or ""
        finish = choice.get("finish_reason")
        if finish is not None and type(finish) is not str:
            raise BadStream(f"a finish_reason that is not text: {_excerpt(finish)}")
    usage = data.get("usage")
    if usage is None:
        return content, None, finish
    if type(usage) is not dict:
        raise BadStream(f"usage is not an object: {_excerpt(usage)}")
    return content, _count(usage, "completion_tokens"), finish


class TokensPerChunk:
    """For a server that sends no usage: tokens per chunk, learnt from its requests that ran to max_tokens
    (finish_reason "length", so their token count is known); 1 until one did."""

    def __init__(self) -> None:
        self.tokens = 0
        self.chunks = 0
        self.seen = 0  # every content chunk received so far, finished requests or not: the level's visible progress

    def learn(self, tokens: int, chunks: int) -> None:
        self.tokens += tokens
        self.chunks += chunks

    @property
    def ratio(self) -> float:
        return self.tokens / self.chunks if self.chunks else 1.0


def loads(data: str | bytes) -> Any:
    """orjson, and json for what orjson refuses (a number past 64 bits, bytes that are not UTF-8: decoded with
    replacement first): such a chunk fails with the same reason."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(decode(data) if isinstance(data, bytes) else data)


TIMINGS = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_second", "draft_n", "draft_n_accepted")


def server_timings(data: Any) -> dict[str, float] | None:
    """llama.cpp's llama-server puts its own record of the request in the last chunk's `timings` (tools/server/
    server-common.cpp, server_slot_stats::to_json: prompt and decode counts and times, and, for a drafting server,
    `draft_n` tokens proposed of which `draft_n_accepted` were accepted). Kept where every figure is a finite,
    non-negative number; None otherwise."""
    timings = data.get("timings") if isinstance(data, dict) else None
    if not isinstance(timings, dict):
        return None
    kept = {k: float(v) for k in TIMINGS if isinstance(v := timings.get(k), int | float) and not isinstance(v, bool)}
    if not kept or any(not (0 <= v < 1e12) for v in kept.values()):
        return None
    return kept


class Received:
    """What one request has received so far."""

    def __init__(self) -> None:
        self.timings: dict[str, float] | None = None
        self.times: list[float] = []
        self.counts: list[int | None] = []  # tokens of each content chunk per the server's running usage, where it says
        self.usage_tokens: int | None = None
        self.prompt_tokens: int | None = None
        self.finish: str | None = None
        self.status: int | None = None
        self.done = False
        self.template: tuple[bytes, bytes] | None = None  # a content chunk's bytes around its text (see _template)
        self.framed: tuple[bytes, bytes] | None = None  # the same, framed as one SSE event: a read of it alone


def take(events: list[bytes], now: float, got: Received, per_chunk: TokensPerChunk) -> bool:
    """The events of one read, arrived `now` seconds after the request was sent, into what the request received;
    True at [DONE]."""
    for data in events:
        if (template := got.template) is not None and data.startswith(template[0]) and data.endswith(template[1]):
            text = data[len(template[0]) : len(data) - len(template[1])]
            if len(data) >= len(template[0]) + len(template[1]) and JSON_STRING.fullmatch(text):
                if text:  # the chunk a full parse learnt the template from, with other text: no usage, no finish
                    got.counts.append(None)
                    got.times.append(now)
                    per_chunk.seen += 1
                continue
        try:
            parsed = orjson.loads(data)  # (the common case first: a chunk, valid UTF-8 JSON)
        except orjson.JSONDecodeError:
            if data.strip() == b"[DONE]":
                got.done = True
                return True
            try:
                parsed = loads(data)
            except (ValueError, RecursionError):
                raise BadStream(f"malformed SSE data: {visible(data[:80])}") from None
        content, tokens, chunk_finish = parse_chunk(parsed)
        if chunk_finish is not None:
            got.finish = chunk_finish or got.finish
        if "timings" in parsed:  # llama-server's last chunk
            got.timings = server_timings(parsed) or got.timings
        if parsed.get("usage"):
            got.prompt_tokens = prompt_count(parsed) or got.prompt_tokens
        if tokens is None:
            if content:
                got.counts.append(None)
                got.times.append(now)
                per_chunk.seen += 1
                if got.template is None and chunk_finish is None and "timings" not in parsed:
                    got.template = _template(data, content)
                    if got.template is not None and not any(b"\n" in part or b"\r" in part for part in got.template):
                        got.framed = (b"data: " + got.template[0], got.template[1] + b"\n\n")
            continue
        new = tokens - (got.usage_tokens or 0)
        got.usage_tokens = tokens
        if content:
            got.counts.append(max(new, 1))
            got.times.append(now)
            per_chunk.seen += 1
        elif new > 0 and got.counts and got.counts[-1] is not None:  # a usage-only chunk after the text
            got.counts[-1] = got.counts[-1] + new
    return False


# The body of a JSON string: no raw quote or control character, only JSON's escapes (RFC 8259, section 7)
JSON_STRING = re.compile(rb'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
PLAIN_STRING = re.compile(rb'[^"\\\x00-\x1f]*')  # the same without escapes: a run of them is one
TEXT_KEYS = (b'"text":', b'"content":', b'"reasoning_content":')


def _template(data: bytes, content: str) -> tuple[bytes, bytes] | None:
    """A content chunk's bytes before and after its text, where the text stands once as the value of its key: a later
    chunk of the same request that is these bytes around another JSON string is the same chunk with other text (no
    usage, no finish reason, no error: they would be bytes of their own), read without parsing it (issue 40: JSON of
    every chunk was the load generator's largest cost after the socket). None where the text is not found so."""
    needle = orjson.dumps(content)
    found = [
        (i + len(key) + space, i + len(key) + space + len(needle))
        for key in TEXT_KEYS
        for space in (0, 1)
        for i in _all(data, key + b" " * space + needle)
    ]
    if len(found) != 1:
        return None
    start, end = found[0]
    return data[: start + 1], data[end - 1 :]  # the string's quotes stay with the bytes around it


def learnt_events(read: bytes, framed: tuple[bytes, bytes]) -> tuple[list[bytes], bytes]:
    """The texts of the whole SSE events of the learnt chunk (`Received.framed`) a read opens with, and the bytes
    after them, from an event's start: the rest of the read, to be cut and parsed. A stream read as fast as it comes
    brings dozens of events a read, the last of them the finish, the usage and [DONE]; each was cut and matched in
    Python. A JSON string's body holds no raw quote, and the bytes between two texts start with one, so the read is
    cut at them unambiguously while each piece is such a body."""
    head, tail = framed
    if not read.startswith(head):
        return [], read
    parts = read[len(head) :].split(tail + head)
    last = parts.pop()
    if PLAIN_STRING.fullmatch(b"".join(parts)):  # no escape, quote or control character in any: each is a string's body
        texts = parts
    else:
        texts = list(takewhile(JSON_STRING.fullmatch, parts))
    if len(texts) == len(parts) and (end := last.find(tail)) >= 0 and JSON_STRING.fullmatch(last[:end]):
        texts.append(last[:end])  # one more, before what ends the stream
    whole = len(head) * len(texts) + sum(map(len, texts)) + len(tail) * len(texts)
    return texts, read[whole:]


def _all(data: bytes, needle: bytes) -> list[int]:
    at, i = [], data.find(needle)
    while i >= 0:
        at.append(i)
        i = data.find(needle, i + 1)
    return at

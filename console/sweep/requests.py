"""One streaming request against a server whose every byte is untrusted.

A malformed chunk, an endless or stalled stream, an unterminated line or an impossible token count fails that
one request with its reason. Token counts come from the server's usage; without it, from finish_reason "length"
(the request ran to max_tokens) or from the chunks, at the tokens per chunk seen in requests that ran to length,
and the request says so.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from console.sweep.metrics import RequestRecord
from console.sweep.settings import SweepSettings
from console.sweep.sse import SSEError, sse_data
from console.untrusted import visible

WORDS = "the quick brown fox jumps over a lazy dog while engines batch many tokens in each step".split()
MAX_CHUNKS_PER_TOKEN = 4  # a stream of more than 4 chunks per asked token (+16) is endless, not slow
MAX_REPORTED_TOKENS = 10**7  # a usage count beyond this is not a count


class BadStream(Exception):
    """What the server sent cannot be a completion stream: the request fails with this reason."""


def _excerpt(data: Any) -> str:
    return visible(json.dumps(data)[:80] if not isinstance(data, str) else data[:80])


def prompts(settings: SweepSettings) -> list[Any]:
    if settings.prompt_file:
        items = []
        for line in Path(settings.prompt_file).read_text(encoding="utf-8").splitlines():
            if line.strip():
                data = json.loads(line)
                items.append(data.get("messages") or data.get("prompt") or data)
        if not items:
            raise ValueError(f"{settings.prompt_file}: no prompts")
        return items
    rng = random.Random(settings.seed)
    # about four characters per token, as the server counts them
    return [" ".join(rng.choice(WORDS) for _ in range(settings.input_tokens * 4 // 5)) for _ in range(64)]


def request_body(settings: SweepSettings, model: str, prompt: Any, *, ignore_eos: bool = True) -> tuple[str, dict[str, Any]]:
    """ignore_eos: the server honours the field (console/server/engines.py); one that does not may refuse it."""
    common = {"model": model, "max_tokens": settings.max_tokens, "stream": True, "temperature": 0,
              "stream_options": {"include_usage": True, "continuous_usage_stats": True},
              **({"ignore_eos": True} if ignore_eos else {}), **settings.extra_body}
    if settings.api == "chat":
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
        return "/v1/chat/completions", {**common, "messages": messages}
    return "/v1/completions", {**common, "prompt": prompt if isinstance(prompt, str) else json.dumps(prompt)}


def parse_chunk(data: Any) -> tuple[str, int | None, str | None]:
    """(content, completion tokens so far per the server's usage, finish reason) of one streamed chunk."""
    if not isinstance(data, dict):
        raise BadStream(f"a chunk that is not a JSON object: {_excerpt(data)}")
    if data.get("error") is not None:
        raise BadStream(f"the server reported an error mid-stream: {_excerpt(data['error'])}")
    choices = data.get("choices") or []
    if not isinstance(choices, list):
        raise BadStream(f"choices is not a list: {_excerpt(choices)}")
    content, finish = "", None
    if choices:
        choice = choices[0]
        if not isinstance(choice, dict):
            raise BadStream(f"a choice that is not an object: {_excerpt(choice)}")
        delta = choice.get("delta")
        if delta is not None and not isinstance(delta, dict):
            raise BadStream(f"a delta that is not an object: {_excerpt(delta)}")
        text = choice.get("text")
        if text is None and delta:
            text = delta.get("content") or delta.get("reasoning_content")
        if text is not None and not isinstance(text, str):
            raise BadStream(f"content that is not text: {_excerpt(text)}")
        content = text or ""
        finish = choice.get("finish_reason")
        if finish is not None and not isinstance(finish, str):
            raise BadStream(f"a finish_reason that is not text: {_excerpt(finish)}")
    usage = data.get("usage")
    if usage is None:
        return content, None, finish
    if not isinstance(usage, dict):
        raise BadStream(f"usage is not an object: {_excerpt(usage)}")
    tokens = usage.get("completion_tokens")
    if tokens is None:
        return content, None, finish
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= MAX_REPORTED_TOKENS:
        raise BadStream(f"completion_tokens is not a token count: {_excerpt(tokens)}")
    return content, tokens, finish


def spread(total: int, parts: int) -> list[int]:
    """`total` tokens over `parts` chunks as evenly as integers allow."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


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


async def _error_body(response: aiohttp.ClientResponse) -> str:
    body = b""
    async for part in response.content.iter_any():
        body += part
        if len(body) > 400:
            break
    return visible(body[:200])


def _loads(data: str) -> Any:
    """orjson, and json for what orjson refuses (a number past 64 bits): such a chunk fails with the same reason."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


JSON = {"Content-Type": "application/json"}


async def one_request(client: aiohttp.ClientSession, path: str, body: dict[str, Any], c: int, index: int, level_t0: float,
                      warmup: bool, settings: SweepSettings, per_chunk: TokensPerChunk) -> RequestRecord:
    start = time.monotonic()
    times: list[float] = []
    counts: list[int | None] = []  # tokens of each content chunk per the server's running usage, where it says
    usage_tokens: int | None = None
    finish: str | None = None
    status: int | None = None
    error: str | None = None
    done = False
    max_tokens = int(body["max_tokens"])
    max_chunks = MAX_CHUNKS_PER_TOKEN * max_tokens + 16
    try:
        async with asyncio.timeout(settings.timeout_s):
            async with client.post(path, data=orjson.dumps(body), headers=JSON) as response:
                status = response.status
                if status != 200:
                    raise BadStream(f"HTTP {status}: {await _error_body(response)}")
                async for data in sse_data(response.content.iter_any()):
                    if data.strip() == "[DONE]":
                        done = True
                        break
                    try:
                        parsed = _loads(data)
                    except (ValueError, RecursionError):
                        raise BadStream(f"malformed SSE data: {visible(data[:80])}") from None
                    content, tokens, chunk_finish = parse_chunk(parsed)
                    now = time.monotonic() - start
                    finish = chunk_finish or finish
                    if tokens is not None:
                        new = tokens - (usage_tokens or 0)
                        usage_tokens = tokens
                        if content:
                            counts.append(max(new, 1))
                            times.append(now)
                            per_chunk.seen += 1
                        elif new > 0 and counts and counts[-1] is not None:  # a usage-only chunk after the text
                            counts[-1] = counts[-1] + new
                    elif content:
                        counts.append(None)
                        times.append(now)
                        per_chunk.seen += 1
                    if len(times) > max_chunks:
                        raise BadStream(f"the stream went on past {max_chunks} chunks for max_tokens {max_tokens}")
        if not times and not usage_tokens:
            raise BadStream("the stream ended without any token")
        if not done and finish is None:
            raise BadStream(f"the stream was cut off after {len(times)} chunks, without a finish reason")
    except aiohttp.ServerTimeoutError as e:  # before TimeoutError, which it also is
        error = f"timeout: no data for {settings.idle_timeout_s:g} s ({type(e).__name__})"
    except TimeoutError:
        error = f"timeout: no end after {settings.timeout_s:g} s"
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as e:
        error = f"connection closed mid-stream: {visible(str(e))}"
    except (aiohttp.ClientError, OSError) as e:
        error = visible(str(e)) or type(e).__name__
    except (BadStream, SSEError) as e:
        error = str(e)
    end = time.monotonic() - start
    usage_missing = usage_tokens is None
    if usage_tokens is not None:
        total = usage_tokens
    elif finish == "length":  # counted another way, and the record says so
        total = max_tokens
        per_chunk.learn(max_tokens, len(times))
    else:
        total = round(len(times) * per_chunk.ratio)
    chunk_tokens = [n or 0 for n in counts]
    if times and (usage_missing or any(n is None for n in counts) or sum(chunk_tokens) != total):
        chunk_tokens = spread(total, len(times))  # only a total is known: spread it over the chunks
    ok = error is None
    return RequestRecord(
        c=c, index=index, start=round(start - level_t0, 6), status=status, error=error,
        ttft=times[0] if times else None, e2e=end if ok else None, tokens=total if ok else 0,
        usage_missing=usage_missing and bool(times), chunks=tuple((round(t, 6), n) for t, n in zip(times, chunk_tokens, strict=True)),
        warmup=warmup, finish_reason=finish, over_asked=ok and total > max_tokens,
    )

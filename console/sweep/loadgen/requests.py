"""One streaming request against a server whose every byte is untrusted.

A malformed chunk, an endless or stalled stream, an unterminated line or an impossible token count fails that
one request with its reason. Token counts come from the server's usage; without it, from finish_reason "length"
(the request ran to max_tokens) or from the chunks, at the tokens per chunk seen in requests that ran to length,
and the request says so.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from itertools import groupby
from operator import itemgetter
from typing import Any, cast

import aiohttp
import orjson

from console.settings import SweepSettings
from console.sweep.loadgen.chunks import BadStream, Received, TokensPerChunk, learnt_events, loads, take
from console.sweep.loadgen.sse import EventReader, SSEError
from console.sweep.metrics import RequestRecord
from console.sweep.model import PromptSource
from console.untrusted import visible

WORDS = "the quick brown fox jumps over a lazy dog while engines batch many tokens in each step".split()
WORD_OF_BYTE = [WORDS[b % len(WORDS)] for b in range(256)]  # a drawn byte's word, looked up in C
MAX_CHUNKS_PER_TOKEN = 4  # a stream of more than 4 chunks per asked token (+16) is endless, not slow


def synthetic_pool(settings: SweepSettings) -> list[str]:
    """With unique_prompts = false, a seeded pool of 64 prompts used over and over; [] when each request gets a prompt
    of its own (UniquePrompts)."""
    if settings.unique_prompts:
        return []
    rng = random.Random(settings.seed)
    # about four characters per token, as the server counts them
    return [" ".join(rng.choice(WORDS) for _ in range(settings.input_tokens * 4 // 5)) for _ in range(64)]


class UniquePrompts:
    """A prompt of its own for every request of every level and run: it opens with words drawn from a random number
    of this sweep's own, so that no two requests share a prefix a server's prompt cache could serve (a pool of 64
    prompts reused by every run let llama-server's cache serve 98 of 103 prompt tokens). Its length is counted in the
    server's own tokens where the server has a tokenizer endpoint, else estimated at 4/5 of a word per token."""

    def __init__(self, input_tokens: int, nonce: int | None = None) -> None:
        self.input_tokens = input_tokens
        self.nonce = random.SystemRandom().getrandbits(64) if nonce is None else nonce
        self.words = max(1, input_tokens * 4 // 5)
        self.counted_by = "an estimate (4/5 of a word per token)"
        self.tokens: int | None = None  # a generated prompt's length in the server's tokens, where it was counted
        self.issued = 0

    def prompt(self, words: int | None = None) -> str:
        """The next request's prompt: a level measured again gets new ones too."""
        self.issued += 1
        return self.keyed(str(self.issued), words)

    def keyed(self, key: str, words: int | None = None) -> str:
        """The prompt of this key: the same in every process that has this sweep's nonce (a worker's request)."""
        # the words drawn by the bytes of an extendable hash of the key (a Random seeded by a string hashed it with
        # SHA-512 and drew each word in Python: a third of a request's own cost)
        drawn = hashlib.shake_128(f"{self.nonce}:{key}".encode()).digest(5 + (words or self.words))
        return " ".join([drawn[:6].hex(), *map(WORD_OF_BYTE.__getitem__, drawn[6:])])

    async def calibrate(self, session: aiohttp.ClientSession) -> None:
        """llama.cpp's llama-server: POST /tokenize {"content": text} answers {"tokens": [...]} (tools/server/server.cpp,
        handle_tokenize). A server without it keeps the estimate."""
        tokens = await _count_tokens(session, self.prompt(200))
        if tokens is None or not 10 <= tokens <= 10_000:
            return
        self.words = max(1, round(self.input_tokens * 200 / tokens))
        self.counted_by = "the server's /tokenize"
        self.tokens = await _count_tokens(session, self.prompt())

    def share(self) -> dict[str, Any]:
        """What a worker process needs to make the same prompts (`keyed`)."""
        return {"input_tokens": self.input_tokens, "nonce": self.nonce, "words": self.words}

    def describe(self) -> PromptSource:
        return PromptSource(
            source="unique per request", input_tokens=self.input_tokens, words=self.words, counted_by=self.counted_by, tokens=self.tokens
        )


async def _count_tokens(session: aiohttp.ClientSession, text: str) -> int | None:
    """The server's own count of `text`'s tokens, where it has /tokenize; None where it has not."""
    try:
        async with session.post(
            "/tokenize", json={"content": text}, allow_redirects=False, timeout=aiohttp.ClientTimeout(total=10)
        ) as response:
            tokens = loads(await response.content.read(1 << 20)).get("tokens") if response.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError):
        return None
    return len(tokens) if isinstance(tokens, list) else None


def request_body(
    settings: SweepSettings, model: str, prompt: Any, max_tokens: int | None = None, *, ignore_eos: bool = True
) -> tuple[str, dict[str, Any]]:
    """max_tokens: this request's (None: the settings'); ignore_eos: the server honours the field (console/engines/),
    and the answers run to their length (a server that does not honour it may refuse it)."""
    common = {
        "model": model,
        "max_tokens": max_tokens or settings.max_tokens,
        "stream": True,
        "temperature": 0,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        **({"ignore_eos": True} if ignore_eos else {}),
        **settings.extra_body,
    }
    if settings.api == "chat":
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
        return "/v1/chat/completions", {**common, "messages": messages}
    return "/v1/completions", {**common, "prompt": prompt if isinstance(prompt, str) else as_text(prompt)}


def as_text(messages: list[dict[str, str]]) -> str:
    """A conversation sent to /v1/completions, which takes text: its turns' words, a blank line between them."""
    return "\n\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))


def spread(total: int, parts: int) -> list[int]:
    """`total` tokens over `parts` chunks as evenly as integers allow."""
    base, extra = divmod(total, parts)
    return [base + 1] * extra + [base] * (parts - extra)


def by_read(times: list[float], tokens: list[int]) -> tuple[tuple[float, int], ...]:
    """(t, n) of each read that brought content: the chunks one read brought share its time and are one arrival
    (console/sweep/metrics.py, BURST_S), kept as one: a stream read as fast as it comes brings dozens a read, and
    every figure after it (the record, its event, the level's numbers) went over each of them."""
    return tuple((t, sum(map(itemgetter(1), run))) for t, run in groupby(zip(times, tokens, strict=True), key=itemgetter(0)))


async def _error_body(response: aiohttp.ClientResponse) -> str:
    body = b""
    async for part in response.content.iter_any():
        body += part
        if len(body) > 400:
            break
    return visible(body[:200])


JSON = {"Content-Type": "application/json"}


class Client:
    """The load generator's HTTP client. aiohttp: its HTTP parser is C (llhttp), and per streamed token it costs half
    of httpx's CPU. A connection per request in flight, kept alive from one request to the next, until the server is
    seen closing a kept-alive connection under a new request: llama.cpp's llama-server answers a stream with
    `Keep-Alive: timeout=5, max=100` and may close the connection all the same (seen on 11434.0.0 at C=1 to 8: a
    third of the requests that reused a connection failed with "Can not write request body" or "Server disconnected"
    before any answer). Such a request is sent again once on a connection of its own, and from then on every request
    opens its own (`closes_connections`). An idle stream fails after idle_timeout_s; no redirect is followed."""

    def __init__(self, url: str, headers: dict[str, str], most: int, idle_timeout_s: float):
        self._args = (url, headers, most, idle_timeout_s)
        self.kept = self._session(force_close=False)
        self.fresh: aiohttp.ClientSession | None = None  # force_close: a connection per request

    def _session(self, *, force_close: bool) -> aiohttp.ClientSession:
        url, headers, most, idle_timeout_s = self._args
        return aiohttp.ClientSession(
            url,
            headers=headers,
            connector=aiohttp.TCPConnector(limit=most + 8, force_close=force_close),
            timeout=aiohttp.ClientTimeout(total=None, connect=30, sock_read=idle_timeout_s),
        )

    @property
    def closes_connections(self) -> bool:
        return self.fresh is not None

    def session(self, *, fresh: bool = False) -> aiohttp.ClientSession:
        if fresh and self.fresh is None:
            self.fresh = self._session(force_close=True)
        return self.fresh if self.fresh is not None else self.kept

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.kept.close()
        if self.fresh is not None:
            await self.fresh.close()


def _closed_before_answer(e: BaseException) -> bool:
    """The server closed the connection before answering (a kept-alive one it had given up), rather than refused a
    new one: the request never reached it, so sending it again measures the same thing."""
    return isinstance(e, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError) and not isinstance(e, aiohttp.ClientConnectorError)


async def _receive(
    session: aiohttp.ClientSession,
    path: str,
    body: dict[str, Any],
    start: float,
    got: Received,
    per_chunk: TokensPerChunk,
    idle_s: float | None = None,
) -> None:
    max_tokens = int(body["max_tokens"])
    max_chunks = MAX_CHUNKS_PER_TOKEN * max_tokens + 16
    async with session.post(path, data=orjson.dumps(body), headers=JSON, allow_redirects=False) as response:
        got.status = response.status
        if got.status != 200:
            raise BadStream(f"HTTP {got.status}: {await _error_body(response)}")
        reader = EventReader(idle_s=idle_s, now=time.monotonic())
        chunks = 0
        async for read in response.content.iter_any():
            now = time.monotonic()  # every event of one read came at once
            while read:
                if (framed := got.framed) is not None and not reader.pending:
                    texts, read = learnt_events(read, framed)  # whole events of the learnt chunk, read without JSON
                    if texts:
                        reader.last_event = now
                        chunks += len(texts)
                        if chunks > max_chunks:
                            raise BadStream(f"the stream went on past {max_chunks} chunks for max_tokens {max_tokens}")
                        if content := len(texts) - texts.count(b""):
                            got.counts += [None] * content
                            got.times += [round(now - start, 6)] * content
                            per_chunk.seen += content
                        if not read:
                            break
                # until a first content chunk is parsed (and the learnt chunk with it), an event at a time: the rest of
                # a read that brought the whole answer is then read the short way
                piece, read = _first_event(read) if not got.times and not reader.pending else (read, b"")
                events = reader.feed(piece, now)
                chunks += len(events)  # every event counts toward the bound, content or not
                if chunks > max_chunks:
                    raise BadStream(f"the stream went on past {max_chunks} chunks for max_tokens {max_tokens}")
                if events and take(events, round(now - start, 6), got, per_chunk):
                    break
            if got.done:
                break
        else:
            events = reader.end()
            chunks += len(events)
            take(events, round(time.monotonic() - start, 6), got, per_chunk)
    if not chunks:
        raise BadStream(f"the server answered {got.status} with {visible(response.content_type)}, not an event stream")
    if not got.times and not got.usage_tokens:
        raise BadStream("the stream ended without any token")
    if not got.done and got.finish is None:
        raise BadStream(f"the stream was cut off after {len(got.times)} chunks, without a finish reason")


def _first_event(read: bytes) -> tuple[bytes, bytes]:
    """A read cut after its first blank line: the end of an event wherever the read starts at one."""
    end = read.find(b"\n\n")
    return (read[: end + 2], read[end + 2 :]) if end >= 0 else (read, b"")


def _framing(e: aiohttp.ClientPayloadError | aiohttp.ClientResponseError) -> str:
    """What was wrong with the answer's framing, in its first line, without the status aiohttp's parser gives its own
    errors (a `400` for a server that said 200)."""
    cause = e.__cause__ or (e.args[1] if len(e.args) > 1 else None)
    message = getattr(e, "message", None) or getattr(cause, "message", None) or str(e)
    return str(message).split("\n", 1)[0].rstrip(":")


async def one_request(
    client: Client,
    path: str,
    body: dict[str, Any],
    c: int,
    index: int,
    level_t0: float,
    warmup: bool,
    settings: SweepSettings,
    per_chunk: TokensPerChunk,
) -> RequestRecord:
    max_tokens = int(body["max_tokens"])
    error: str | None = None
    retried = False
    while True:
        start = time.monotonic()
        got = Received()
        try:
            async with asyncio.timeout(settings.timeout_s):
                await _receive(client.session(fresh=retried), path, body, start, got, per_chunk, settings.idle_timeout_s)
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as e:
            if not retried and got.status is None and _closed_before_answer(e):
                retried = True  # once, on a connection of its own; and every request after it too
                continue
            error = f"connection closed mid-stream: {visible(str(e))}" if got.status is not None else visible(str(e)) or type(e).__name__
        except aiohttp.ServerTimeoutError as e:  # before TimeoutError, which it also is
            error = f"timeout: no data for {settings.idle_timeout_s:g} s ({type(e).__name__})"
        except TimeoutError:
            error = f"timeout: no end after {settings.timeout_s:g} s"
        except aiohttp.ClientPayloadError as e:
            error = f"the server's answer broke off (HTTP {got.status}): {visible(_framing(e))}"
        except aiohttp.ClientResponseError as e:  # the parser's own error, with a status of its own making
            status = f" (HTTP {got.status})" if got.status is not None else ""
            error = f"the server's answer broke off{status}: {visible(_framing(e))}"
        except (aiohttp.ClientError, OSError) as e:
            error = visible(str(e)) or type(e).__name__
        except (BadStream, SSEError) as e:
            error = str(e)
        break
    end = time.monotonic() - start
    times, counts, usage_tokens, finish = got.times, got.counts, got.usage_tokens, got.finish
    usage_missing = usage_tokens is None
    if usage_tokens is not None:
        total = usage_tokens
    elif finish == "length":  # counted another way, and the record says so
        total = max_tokens
        per_chunk.learn(max_tokens, len(times))
    else:
        total = round(len(times) * per_chunk.ratio)
    chunk_tokens = cast(list[int], counts)  # where none is None
    if times and (usage_missing or None in counts or sum(chunk_tokens) != total):
        chunk_tokens = spread(total, len(times))  # only a total is known: spread it over the chunks
    ok = error is None
    return RequestRecord(
        c=c,
        index=index,
        start=round(start - level_t0, 6),
        status=got.status,
        error=error,
        ttft=times[0] if times else None,
        e2e=end if ok else None,
        tokens=total if ok else 0,
        usage_missing=usage_missing and bool(times),
        chunks=by_read(times, chunk_tokens),
        warmup=warmup,
        finish_reason=finish,
        over_asked=ok and total > max_tokens,
        retried=retried,
        timings=got.timings if ok else None,
        prompt_tokens=got.prompt_tokens if ok else None,
    )

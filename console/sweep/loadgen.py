"""The load generator: its own process, never the UI's event loop.

    python -m console.sweep.loadgen --url URL --run-dir DIR [--resume | --repeat C,C]
    python -m console.sweep.loadgen --config PIVOT_TOML --host NAME --port PORT --run-dir DIR [...]

With --host it opens its own SSH connection and port forward to the server,
so that no byte of the load passes through the console's event loop.

Reads the run's settings from DIR/run.toml, then for each level keeps exactly
C streaming requests in flight until the level's requests are done. Every
event is one JSON line, printed for the caller and appended (flushed) to
DIR/events.jsonl as it happens, so a crash loses at most the requests in
flight. SIGUSR1: stop after the current level. SIGTERM/SIGINT: abort now,
keeping every finished request. The run is locked while this process writes it.

Everything the server sends is untrusted: a malformed chunk, an endless or
stalled stream, an unterminated line or an impossible token count fails that
one request with its reason; a level with too many failures is marked failed
(never averaged into a verdict), the sweep waits a bounded time for the server
to answer again and runs the level once more, or stops with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import signal
import sys
import time
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from console.remote import Connection, RemoteError
from console.sweep.metrics import FAILED_ERROR_RATE, RequestRecord, level_metrics, percentile
from console.sweep.runlock import RunLocked, run_lock
from console.sweep.settings import SweepSettings
from console.sweep.sse import SSEError, sse_data
from console.sweep.runfiles import EventLogFile
from console.sweep.store import completed_levels
from console.untrusted import visible

WORDS = "the quick brown fox jumps over a lazy dog while engines batch many tokens in each step".split()
SERVER_GAUGES = {  # Prometheus name -> our name
    "sglang:num_running_reqs": "running", "sglang:num_queue_reqs": "queued", "sglang:gen_throughput": "gen_tok_s",
    "sglang:spec_accept_length": "accept_length", "sglang:spec_num_steps": "spec_steps",
    "vllm:num_requests_running": "running", "vllm:num_requests_waiting": "queued",
}
MAX_CHUNKS_PER_TOKEN = 4  # a stream of more than 4 chunks per asked token (+16) is endless, not slow
MAX_REPORTED_TOKENS = 10**7  # a usage count beyond this is not a count
LAG_TICK_S = 0.01


class EventSink(EventLogFile):
    """Each event appended to the run and printed, as one JSON line, for whoever started this process."""

    def emit(self, event: dict[str, Any]) -> None:
        line = self.append({"t": round(time.time(), 4), **event})
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


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


def request_body(settings: SweepSettings, model: str, prompt: Any) -> tuple[str, dict[str, Any]]:
    common = {"model": model, "max_tokens": settings.max_tokens, "stream": True, "ignore_eos": True, "temperature": 0,
              "stream_options": {"include_usage": True, "continuous_usage_stats": True}, **settings.extra_body}
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

    def learn(self, tokens: int, chunks: int) -> None:
        self.tokens += tokens
        self.chunks += chunks

    @property
    def ratio(self) -> float:
        return self.tokens / self.chunks if self.chunks else 1.0


async def _error_body(response: httpx.Response) -> str:
    body = b""
    async for part in response.aiter_bytes():
        body += part
        if len(body) > 400:
            break
    return visible(body[:200])


async def one_request(client: httpx.AsyncClient, path: str, body: dict[str, Any], c: int, index: int, level_t0: float,
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
            async with client.stream("POST", path, json=body) as response:
                status = response.status_code
                if status != 200:
                    raise BadStream(f"HTTP {status}: {await _error_body(response)}")
                async for data in sse_data(response.aiter_bytes()):
                    if data.strip() == "[DONE]":
                        done = True
                        break
                    try:
                        parsed = json.loads(data)
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
                        elif new > 0 and counts and counts[-1] is not None:  # a usage-only chunk after the text
                            counts[-1] = counts[-1] + new
                    elif content:
                        counts.append(None)
                        times.append(now)
                    if len(times) > max_chunks:
                        raise BadStream(f"the stream went on past {max_chunks} chunks for max_tokens {max_tokens}")
        if not times and not usage_tokens:
            raise BadStream("the stream ended without any token")
        if not done and finish is None:
            raise BadStream(f"the stream was cut off after {len(times)} chunks, without a finish reason")
    except TimeoutError:
        error = f"timeout: no end after {settings.timeout_s:g} s"
    except httpx.TimeoutException as e:
        error = f"timeout: no data for {settings.idle_timeout_s:g} s ({type(e).__name__})"
    except httpx.RemoteProtocolError as e:
        error = f"connection closed mid-stream: {visible(str(e))}"
    except (httpx.HTTPError, OSError) as e:
        error = visible(str(e)) or type(e).__name__
    except (BadStream, SSEError) as e:
        error = str(e)
    end = time.monotonic() - start
    usage_missing = usage_tokens is None
    if usage_missing:  # counted another way, and the record says so
        if finish == "length":
            usage_tokens = max_tokens
            per_chunk.learn(max_tokens, len(times))
        else:
            usage_tokens = round(len(times) * per_chunk.ratio)
    chunk_tokens = [n or 0 for n in counts]
    if times and (usage_missing or any(n is None for n in counts) or sum(chunk_tokens) != usage_tokens):
        chunk_tokens = spread(usage_tokens, len(times))  # only a total is known: spread it over the chunks
    ok = error is None
    return RequestRecord(
        c=c, index=index, start=round(start - level_t0, 6), status=status, error=error,
        ttft=times[0] if times else None, e2e=end if ok else None, tokens=usage_tokens if ok else 0,
        usage_missing=usage_missing and bool(times), chunks=tuple((round(t, 6), n) for t, n in zip(times, chunk_tokens)),
        warmup=warmup, finish_reason=finish, over_asked=ok and usage_tokens > max_tokens,
    )


def server_gauges(text: str) -> dict[str, float]:
    """The server's own view from its Prometheus text: running, queued, generation throughput, speculation."""
    values: dict[str, float] = {}
    with contextlib.suppress(ValueError, TypeError):
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in SERVER_GAUGES:
                    values[SERVER_GAUGES[sample.name]] = float(sample.value)
    return values


async def scrape(client: httpx.AsyncClient, c: int, sink: EventSink, samples: list[dict[str, float]]) -> None:
    while True:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            response = await client.get("/metrics", timeout=5)
            if response.status_code == 200:
                values = server_gauges(response.text[:1 << 20])
                if values:
                    samples.append(values)
                    sink.emit({"type": "metrics", "c": c, **values})
        await asyncio.sleep(1.0)


async def watch_lag(lags: list[float]) -> None:
    """How late the load generator's own loop wakes up: a late loop stamps chunks late."""
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(LAG_TICK_S)
        lags.append(max(0.0, loop.time() - before - LAG_TICK_S))


def client_bound(cpu: float) -> str | None:
    """Why this level's throughput may be the client's limit, not the server's; None when the client kept up."""
    if cpu >= 0.9:
        return f"the load generator used {cpu:.0%} of a core: it, not the server, may be the limit"
    return None


def lagging(lag_p90: float | None, itl_p50: float | None, itl_mean: float | None) -> str | None:
    """Why this level's latencies cannot be trusted: chunks are stamped when the client's loop gets to them, so a
    loop that runs late by a good part of an inter-token gap bunches them and ITL collapses toward 0 ms, far
    below the requests' own pace (tokens over their decode time, which bunching does not change)."""
    if lag_p90 is not None and lag_p90 >= max(0.002, 0.25 * (itl_mean or 0)):
        against = f" against an ITL of {itl_mean * 1000:.1f} ms" if itl_mean else ""
        return f"the load generator's loop ran late (p90 {lag_p90 * 1000:.1f} ms{against})"
    if itl_p50 is not None and itl_mean and itl_p50 < 0.25 * itl_mean:
        return (f"chunks arrived in bursts (ITL p50 {itl_p50 * 1000:.1f} ms against {itl_mean * 1000:.1f} ms per token "
                "over each request)")
    return None


HostLoad = Callable[[], Awaitable[float | None]]


async def run_level(client: httpx.AsyncClient, settings: SweepSettings, model: str, c: int, sink: EventSink,
                    scrape_metrics: bool, per_chunk: TokensPerChunk, host_load: HostLoad | None,
                    repeat: bool = False) -> dict[str, Any]:
    total = settings.requests_for(c)
    pool = prompts(settings)
    sink.emit({"type": "level_started", "c": c, "requests": total, "warmup": settings.warmup, "repeat": repeat})
    level_t0 = time.monotonic()
    cpu0 = time.process_time()
    deadline = level_t0 + settings.duration_s if settings.duration_s else None
    next_index = 0
    errors = 0
    peak = in_flight = 0
    records: list[RequestRecord] = []
    server_samples: list[dict[str, float]] = []
    lags: list[float] = []
    give_up = max(2.0, FAILED_ERROR_RATE * total)  # past this many failures the level is failed: stop feeding it

    async def slot() -> None:
        nonlocal next_index, in_flight, peak, errors
        while errors <= give_up:
            if deadline is None and next_index >= total + settings.warmup:
                return
            if deadline is not None and time.monotonic() >= deadline:
                return
            index = next_index
            next_index += 1
            path, body = request_body(settings, model, pool[index % len(pool)])
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                record = await one_request(client, path, body, c, index, level_t0, index < settings.warmup, settings,
                                           per_chunk)
            finally:
                in_flight -= 1
            errors += not record.ok
            records.append(record)
            sink.emit({"type": "request", **record.to_dict()})

    helpers = [asyncio.create_task(watch_lag(lags))]
    if scrape_metrics:
        helpers.append(asyncio.create_task(scrape(client, c, sink, server_samples)))
    try:
        await asyncio.gather(*(slot() for _ in range(c)))
    finally:
        for helper in helpers:
            helper.cancel()
    wall = time.monotonic() - level_t0
    cpu = (time.process_time() - cpu0) / wall if wall > 0 else 0.0
    server = {k: sum(s[k] for s in server_samples if k in s) / max(1, sum(k in s for s in server_samples))
              for k in {k for s in server_samples for k in s}}
    over = sum(r.over_asked for r in records)
    failed = (f"the server reported more tokens than max_tokens asked in {over} request(s): not a measurement"
              if over else None)
    metrics = level_metrics(c, records, wall, server, failed=failed)
    lag_p90 = percentile(lags, 90)
    client = {"client_cpu": round(cpu, 3), "loop_lag_p50": percentile(lags, 50), "loop_lag_p90": lag_p90,
              "loop_lag_p99": percentile(lags, 99), "load_avg": os.getloadavg()[0],
              "client_bound": client_bound(cpu), "lagging": lagging(lag_p90, metrics.itl_p50, metrics.itl_mean)}
    if host_load is not None:
        client["host_load_avg"] = await host_load()
    sink.emit({"type": "level_done", "c": c, "peak_in_flight": peak, "repeat": repeat,
               **{k: v for k, v in vars(metrics).items() if k != "c"}, **client})
    sink.sync()
    return {**vars(metrics), **client}


async def server_facts(client: httpx.AsyncClient) -> dict[str, Any]:
    """What the server says of itself: model, limits, CUDA-graph batch sizes, speculation, current load."""
    facts: dict[str, Any] = {}
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        model = (await client.get("/v1/models", timeout=10)).json()["data"][0]["id"]
        if isinstance(model, str):
            facts["model"] = model
    for path in ("/server_info", "/get_server_info"):
        with contextlib.suppress(httpx.HTTPError, ValueError, TypeError, AttributeError):
            response = await client.get(path, timeout=10)
            if response.status_code == 200 and isinstance(info := response.json(), dict):
                facts.update({k: info[k] for k in ("max_running_requests", "speculative_algorithm", "speculative_num_steps",
                                                   "speculative_eagle_topk", "speculative_adaptive", "tp_size", "version")
                              if isinstance(info.get(k), (int, str, bool))})
                decode = ((info.get("cuda_graph_config") or {}).get("decode") or {})  # SGLang 0.5.23's resolved graphs
                if isinstance(decode.get("bs"), list) and all(isinstance(b, int) for b in decode["bs"]):
                    facts["cuda_graph_bs"] = sorted(decode["bs"])
                if isinstance(decode.get("max_bs"), int):
                    facts["cuda_graph_max_bs"] = decode["max_bs"]
                elif isinstance(info.get("cuda_graph_max_bs"), int):  # older releases
                    facts["cuda_graph_max_bs"] = info["cuda_graph_max_bs"]
                break
    with contextlib.suppress(httpx.HTTPError, ValueError):
        response = await client.get("/metrics", timeout=10)
        facts["metrics"] = response.status_code == 200
        if facts["metrics"]:
            gauges = server_gauges(response.text[:1 << 20])
            facts["busy"] = {k: int(gauges[k]) for k in ("running", "queued") if k in gauges}
    return facts


def warnings_for(settings: SweepSettings, facts: dict[str, Any]) -> list[str]:
    warnings = []
    for key, what, effect in (
            ("max_running_requests", "max_running_requests", "requests wait in its queue: the queue is measured too"),
            ("cuda_graph_max_bs", "largest CUDA-graph batch", "those batches decode without graphs, in slower steps")):
        limit = facts.get(key)
        if isinstance(limit, int):
            over = [c for c in settings.levels if c > limit]
            if over:
                which = f"level {over[0]} exceeds" if len(over) == 1 else f"levels {', '.join(map(str, over))} exceed"
                warnings.append(f"{which} the server's {what} ({limit}): {effect}")
    busy = facts.get("busy") or {}
    if busy.get("running") or busy.get("queued"):
        warnings.append(f"the server was already serving {busy.get('running', 0)} request(s) ({busy.get('queued', 0)} queued) "
                        "before the sweep: another client's load is in these numbers")
    return warnings


async def server_answers(client: httpx.AsyncClient, within_s: float) -> bool:
    """Whether the server answers /v1/models again within the bound (a link that reconnects, a server that recovers)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, OSError):
            if (await client.get("/v1/models", timeout=5)).status_code == 200:
                return True
        await asyncio.sleep(1.0)
    return False


async def sweep(url: str, run_dir: Path, settings: SweepSettings, *, resume: bool, repeat: list[int] | None = None,
                host_load: HostLoad | None = None) -> int:
    sink = EventSink(run_dir)
    done = completed_levels(run_dir) if resume else set()
    stop_after_level = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, stop_after_level.set)
    headers = {}
    if settings.api_key_env and os.environ.get(settings.api_key_env):
        headers["Authorization"] = f"Bearer {os.environ[settings.api_key_env]}"
    levels = repeat or list(settings.levels)
    limits = httpx.Limits(max_connections=max(levels) + 8, max_keepalive_connections=max(levels) + 8)
    timeout = httpx.Timeout(settings.idle_timeout_s, connect=30)
    per_chunk = TokensPerChunk()
    failed: str | None = None
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=timeout) as client:
        facts = await server_facts(client)
        model = settings.model or facts.get("model") or "default"
        sink.emit({"type": "sweep_started", "url": url, "model": model, "server": facts, "resumed": sorted(done),
                   "repeat": repeat or [], "warnings": warnings_for(settings, facts), "pid": os.getpid()})
        stopped = False
        for c in levels:
            if c in done:
                continue
            if stop_after_level.is_set():
                stopped = True
                break
            result = await run_level(client, settings, model, c, sink, bool(facts.get("metrics")), per_chunk, host_load,
                                     repeat=bool(repeat))
            if result["failed"]:
                answering = await server_answers(client, settings.server_wait_s)
                if answering:
                    sink.emit({"type": "level_retry", "c": c, "reason": result["failed"]})
                    result = await run_level(client, settings, model, c, sink, bool(facts.get("metrics")), per_chunk,
                                             host_load, repeat=bool(repeat))
                if result["failed"]:
                    why = "" if answering else f"; the server did not answer for {settings.server_wait_s:g} s"
                    failed = f"C={c}: {result['failed']}" + (f" ({result['first_error']})" if result["first_error"] else "") + why
                    break
        sink.emit({"type": "sweep_done", "aborted": False, "stopped": stopped, "failed": failed})
    sink.sync()
    return 3 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pivot-loadgen")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url")
    target.add_argument("--host")
    parser.add_argument("--config")
    parser.add_argument("--port", type=int)
    parser.add_argument("--run-dir", type=Path, required=True)
    again = parser.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true")
    again.add_argument("--repeat", type=lambda s: [int(c) for c in s.split(",")], help="measure these levels again")
    parser.add_argument("--requests", type=int, help="with --repeat: requests per level")
    args = parser.parse_args(argv)
    meta = tomllib.loads((args.run_dir / "run.toml").read_text(encoding="utf-8"))
    settings = SweepSettings.from_dict(meta.get("settings", {}))
    if args.requests:
        settings = dataclasses.replace(settings, requests=args.requests)

    async def runner() -> int:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        conn = None
        try:
            url, host_load = args.url, None
            if url is None:
                from console import config

                conn = Connection(config.load(args.config).host(args.host))
                await conn.up_now()
                url = (await conn.forward("127.0.0.1", args.port)).url
                host_load = _host_load(conn)
            return await sweep(url, args.run_dir, settings, resume=args.resume, repeat=args.repeat, host_load=host_load)
        except asyncio.CancelledError:
            EventSink(args.run_dir).emit({"type": "sweep_done", "aborted": True, "stopped": False})
            return 130
        finally:
            if conn is not None:
                await conn.close()

    try:
        with run_lock(args.run_dir):
            return asyncio.run(runner())
    except RunLocked as e:
        print(f"pivot-loadgen: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the disk filled, the run's directory went away: one line, not a traceback
        print(f"pivot-loadgen: cannot write the run: {e.strerror or e}", file=sys.stderr)
        return 1


def _host_load(conn: Connection) -> HostLoad:
    async def load() -> float | None:
        with contextlib.suppress(RemoteError, ValueError, IndexError):  # a figure beside the numbers, never a failure
            return float((await conn.run(["cat", "/proc/loadavg"], timeout=10)).stdout.split()[0])
        return None
    return load


if __name__ == "__main__":
    raise SystemExit(main())

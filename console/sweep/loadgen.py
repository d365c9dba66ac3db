"""The load generator: its own process, never the UI's event loop.

    python -m console.sweep.loadgen --url URL --run-dir DIR [--resume]
    python -m console.sweep.loadgen --config PIVOT_TOML --host NAME --port PORT --run-dir DIR [--resume]

With --host it opens its own SSH connection and port forward to the server,
so that no byte of the load passes through the console's event loop.

Reads the run's settings from DIR/run.toml, then for each level keeps exactly
C streaming requests in flight until the level's requests are done. Every
event is one JSON line, printed for the caller and appended (flushed) to
DIR/events.jsonl as it happens, so a crash loses at most the requests in
flight. SIGUSR1: stop after the current level. SIGTERM/SIGINT: abort now,
keeping every finished request.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse
from prometheus_client.parser import text_string_to_metric_families

from console.sweep.metrics import RequestRecord, level_metrics
from console.sweep.settings import SweepSettings
from console.sweep.store import EVENTS, completed_levels

WORDS = "the quick brown fox jumps over a lazy dog while engines batch many tokens in each step".split()
SERVER_GAUGES = {  # Prometheus name -> our name
    "sglang:num_running_reqs": "running", "sglang:num_queue_reqs": "queued", "sglang:gen_throughput": "gen_tok_s",
    "sglang:spec_accept_length": "accept_length", "sglang:spec_num_steps": "spec_steps",
    "vllm:num_requests_running": "running", "vllm:num_requests_waiting": "queued",
}


class EventSink:
    def __init__(self, run_dir: Path):
        self.file = open(run_dir / EVENTS, "a", encoding="utf-8")

    def emit(self, event: dict[str, Any]) -> None:
        line = json.dumps({"t": round(time.time(), 4), **event}, separators=(",", ":"))
        self.file.write(line + "\n")
        self.file.flush()
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def sync(self) -> None:
        os.fsync(self.file.fileno())


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
              "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    if settings.api == "chat":
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
        return "/v1/chat/completions", {**common, "messages": messages}
    return "/v1/completions", {**common, "prompt": prompt if isinstance(prompt, str) else json.dumps(prompt)}


async def one_request(client: httpx.AsyncClient, path: str, body: dict[str, Any], c: int, index: int, level_t0: float,
                      warmup: bool) -> RequestRecord:
    start = time.monotonic()
    chunks: list[tuple[float, int]] = []
    usage_tokens: int | None = None
    status: int | None = None
    error: str | None = None
    try:
        async with aconnect_sse(client, "POST", path, json=body) as source:
            status = source.response.status_code
            if status != 200:
                text = (await source.response.aread()).decode(errors="replace")[:200]
                raise RuntimeError(f"HTTP {status}: {text}")
            async for sse in source.aiter_sse():
                if sse.data.strip() == "[DONE]":
                    break
                try:
                    data = json.loads(sse.data)
                except ValueError:
                    raise RuntimeError(f"malformed SSE data: {sse.data[:80]!r}") from None
                now = time.monotonic() - start
                usage = data.get("usage")
                choices = data.get("choices") or []
                text = ""
                if choices:
                    choice = choices[0]
                    text = choice.get("text") or (choice.get("delta") or {}).get("content") or ""
                if usage and usage.get("completion_tokens") is not None:
                    new = int(usage["completion_tokens"]) - (usage_tokens or 0)
                    usage_tokens = int(usage["completion_tokens"])
                    if text:
                        chunks.append((now, max(new, 1)))
                    elif new > 0 and chunks:  # the final usage-only chunk: credit its tokens to the last chunk
                        t, n = chunks[-1]
                        chunks[-1] = (t, n + new)
                elif text:
                    chunks.append((now, 1))  # no usage: a chunk stands in for a token, flagged below
        if usage_tokens is None and not chunks:
            raise RuntimeError("the stream ended without any token")
    except (httpx.HTTPError, SSEError, RuntimeError, OSError) as e:
        error = str(e) or type(e).__name__
        if isinstance(e, httpx.TimeoutException):
            error = f"timeout: {type(e).__name__}"
        elif isinstance(e, httpx.RemoteProtocolError):
            error = f"connection closed mid-stream: {e}"
    end = time.monotonic() - start
    tokens = usage_tokens if usage_tokens is not None else sum(n for _, n in chunks)
    if error is None and body["max_tokens"] and tokens < body["max_tokens"]:
        error = f"stream ended after {tokens} of {body['max_tokens']} tokens"
    return RequestRecord(
        c=c, index=index, start=round(start - level_t0, 6), status=status, error=error,
        ttft=chunks[0][0] if chunks else None, e2e=end if error is None else None, tokens=tokens if error is None else 0,
        usage_missing=usage_tokens is None and bool(chunks), chunks=tuple((round(t, 6), n) for t, n in chunks),
        warmup=warmup,
    )


def server_gauges(text: str) -> dict[str, float]:
    """The server's own view from its Prometheus text: running, queued, generation throughput, speculation."""
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in SERVER_GAUGES:
                values[SERVER_GAUGES[sample.name]] = sample.value
    return values


async def scrape(client: httpx.AsyncClient, c: int, sink: EventSink, samples: list[dict[str, float]]) -> None:
    while True:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            response = await client.get("/metrics", timeout=5)
            if response.status_code == 200:
                values = server_gauges(response.text)
                if values:
                    samples.append(values)
                    sink.emit({"type": "metrics", "c": c, **values})
        await asyncio.sleep(1.0)


async def run_level(client: httpx.AsyncClient, settings: SweepSettings, model: str, c: int, sink: EventSink,
                    scrape_metrics: bool) -> dict[str, Any]:
    total = settings.requests_for(c)
    pool = prompts(settings)
    sink.emit({"type": "level_started", "c": c, "requests": total, "warmup": settings.warmup})
    level_t0 = time.monotonic()
    deadline = level_t0 + settings.duration_s if settings.duration_s else None
    next_index = 0
    in_flight = 0
    peak = 0
    records: list[RequestRecord] = []
    server_samples: list[dict[str, float]] = []

    async def slot() -> None:
        nonlocal next_index, in_flight, peak
        while True:
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
                record = await one_request(client, path, body, c, index, level_t0, warmup=index < settings.warmup)
            finally:
                in_flight -= 1
            records.append(record)
            sink.emit({"type": "request", **record.to_dict()})

    scraper = asyncio.create_task(scrape(client, c, sink, server_samples)) if scrape_metrics else None
    try:
        await asyncio.gather(*(slot() for _ in range(c)))
    finally:
        if scraper:
            scraper.cancel()
    wall = time.monotonic() - level_t0
    server = {k: sum(s[k] for s in server_samples if k in s) / max(1, sum(k in s for s in server_samples))
              for k in {k for s in server_samples for k in s}}
    metrics = level_metrics(c, records, wall, server)
    sink.emit({"type": "level_done", "c": c, "peak_in_flight": peak, **{k: v for k, v in vars(metrics).items() if k != "c"}})
    sink.sync()
    return vars(metrics)


async def server_facts(client: httpx.AsyncClient) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, IndexError):
        facts["model"] = (await client.get("/v1/models", timeout=10)).json()["data"][0]["id"]
    for path in ("/server_info", "/get_server_info"):
        with contextlib.suppress(httpx.HTTPError, ValueError):
            response = await client.get(path, timeout=10)
            if response.status_code == 200:
                info = response.json()
                facts.update({k: info.get(k) for k in ("max_running_requests", "cuda_graph_max_bs", "speculative_algorithm",
                                                        "tp_size", "version") if k in info})
                break
    with contextlib.suppress(httpx.HTTPError, ValueError):
        response = await client.get("/metrics", timeout=10)
        facts["metrics"] = response.status_code == 200
        if facts["metrics"]:
            gauges = server_gauges(response.text)
            facts["busy"] = {k: int(gauges[k]) for k in ("running", "queued") if k in gauges}
    return facts


def warnings_for(settings: SweepSettings, facts: dict[str, Any]) -> list[str]:
    warnings = []
    for key, what in (("max_running_requests", "max_running_requests"), ("cuda_graph_max_bs", "CUDA-graph batch size")):
        limit = facts.get(key)
        if isinstance(limit, int):
            over = [c for c in settings.levels if c > limit]
            if over:
                which = f"level {over[0]} exceeds" if len(over) == 1 else f"levels {', '.join(map(str, over))} exceed"
                warnings.append(f"{which} the server's {what} ({limit}): the queue is measured, not the engine")
    busy = facts.get("busy") or {}
    if busy.get("running") or busy.get("queued"):
        warnings.append(f"the server was already serving {busy.get('running', 0)} request(s) ({busy.get('queued', 0)} queued) "
                        "before the sweep: another client's load is in these numbers")
    return warnings


async def sweep(url: str, run_dir: Path, settings: SweepSettings, resume: bool) -> int:
    sink = EventSink(run_dir)
    done = completed_levels(run_dir) if resume else set()
    stop_after_level = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, stop_after_level.set)
    headers = {}
    if settings.api_key_env and os.environ.get(settings.api_key_env):
        headers["Authorization"] = f"Bearer {os.environ[settings.api_key_env]}"
    limits = httpx.Limits(max_connections=max(settings.levels) + 8, max_keepalive_connections=max(settings.levels) + 8)
    timeout = httpx.Timeout(settings.timeout_s, connect=30)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=timeout) as client:
        facts = await server_facts(client)
        model = settings.model or facts.get("model") or "default"
        sink.emit({"type": "sweep_started", "url": url, "model": model, "server": facts, "resumed": sorted(done),
                   "warnings": warnings_for(settings, facts), "pid": os.getpid()})
        stopped = False
        for c in settings.levels:
            if c in done:
                continue
            if stop_after_level.is_set():
                stopped = True
                break
            await run_level(client, settings, model, c, sink, bool(facts.get("metrics")))
        sink.emit({"type": "sweep_done", "aborted": False, "stopped": stopped})
    sink.sync()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pivot-loadgen")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url")
    target.add_argument("--host")
    parser.add_argument("--config")
    parser.add_argument("--port", type=int)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    meta = tomllib.loads((args.run_dir / "run.toml").read_text(encoding="utf-8"))
    settings = SweepSettings.from_dict(meta.get("settings", {}))
    task: asyncio.Task[int] | None = None

    async def runner() -> int:
        nonlocal task
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        conn = None
        try:
            url = args.url
            if url is None:
                from console import config
                from console.remote import Connection

                spec = config.load(args.config).host(args.host)
                conn = Connection(spec)
                await conn.up_now()
                url = (await conn.forward("127.0.0.1", args.port)).url
            return await sweep(url, args.run_dir, settings, args.resume)
        except asyncio.CancelledError:
            EventSink(args.run_dir).emit({"type": "sweep_done", "aborted": True, "stopped": False})
            return 130
        finally:
            if conn is not None:
                await conn.close()

    return asyncio.run(runner())


if __name__ == "__main__":
    raise SystemExit(main())

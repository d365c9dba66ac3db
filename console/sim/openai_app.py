"""The simulated server's HTTP face: the parts of SGLang's API that pivot and
load generators see (OpenAI completions and chat with SSE streaming, health,
model and server info, Prometheus metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from console.sim.engine import BatchScheduler, SimRequest

TRAFFIC_HEADER = "x-pivot-demo-traffic"  # console/sim/traffic.py's requests carry it
PAUSE_S = 30.0  # the demo's traffic stays paused this long after another client last read /metrics
VOCAB = (
    "the model streams tokens while the batch grows and each step costs a little more time so throughput rises then saturates "
    "near the limit of the engine speculation drafts several tokens that the target verifies in one pass"
).split()


@dataclass
class EngineLoop:
    """Runs scheduler steps in real time (divided by time_scale) and hands tokens to requests."""

    scheduler: BatchScheduler
    time_scale: float = 1.0
    on_change: Any = None  # called with (running, queued) after each step
    _queues: dict[SimRequest, asyncio.Queue[int | None]] = field(default_factory=dict)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _recent: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=4096))
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0

    async def run(self) -> None:
        clock = time.monotonic()  # when the current step ends, on an absolute schedule: no drift from late wake-ups
        while True:
            if self.scheduler.idle:
                if self.on_change:
                    self.on_change(0, 0)
                await self._wake.wait()
                self._wake.clear()
                clock = time.monotonic()
                continue
            result = self.scheduler.step()
            clock = max(clock + result.duration_s / self.time_scale, time.monotonic() - 0.05)
            await asyncio.sleep(max(0.0, clock - time.monotonic()))
            now = time.monotonic()
            step_tokens = 0
            for request, n in result.emitted:
                step_tokens += n
                if (q := self._queues.get(request)) is not None:
                    q.put_nowait(n)
            for request in result.finished:
                if (q := self._queues.get(request)) is not None:
                    q.put_nowait(None)
            self.generation_tokens_total += step_tokens
            self._recent.append((now, step_tokens))
            if self.on_change:
                self.on_change(len(self.scheduler.running), len(self.scheduler.waiting))

    async def generate(self, request: SimRequest) -> AsyncIterator[int]:
        """Yield the token count of each step that served this request."""
        queue: asyncio.Queue[int | None] = asyncio.Queue()
        self._queues[request] = queue
        self.prompt_tokens_total += request.prompt_tokens
        self.scheduler.submit(request)
        self._wake.set()
        try:
            while (n := await queue.get()) is not None:
                if n:
                    yield n
        finally:  # finished, or the client went away: free the slot either way
            self._queues.pop(request, None)
            self.scheduler.cancel(request)

    def end(self, request: SimRequest) -> None:
        """End a request now, as a client that went away would: its stream closes, its slot is free at once."""
        self.scheduler.cancel(request)
        if (q := self._queues.get(request)) is not None:
            q.put_nowait(None)

    def throughput(self, window_s: float = 5.0) -> float:
        """Output tokens per wall-clock second over the last window."""
        now = time.monotonic()
        tokens = sum(n for t, n in self._recent if now - t <= window_s)
        return tokens / window_s


def count_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)  # the usual four characters per token


def _prompt_tokens(body: dict[str, Any], chat: bool) -> int:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list")
        return sum(count_tokens(str(m.get("content", ""))) + 4 for m in messages if isinstance(m, dict))
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return count_tokens(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
        return count_tokens(prompt[0])
    raise ValueError("prompt must be a string, a list of strings or a list of token ids")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": status}, status)


class SimServer:
    """State shared by the routes: the engine, the resolved arguments, loading status.

    `pivot demo`'s own background traffic (console/sim/traffic.py) says so in a header. It makes way for anyone who
    measures the server: a read of /metrics by another client (a sweep's check that the server is idle, its scrapes
    while a level runs) ends the traffic's requests before it is answered, refuses new ones until PAUSE_S after the
    last such read, and says so in the log. A real server has no such traffic; nothing else changes."""

    def __init__(
        self,
        engine: EngineLoop,
        args: dict[str, Any],
        served_model_name: str,
        enable_metrics: bool,
        kind: str = "sglang",
        log: Callable[[str], None] = print,
    ):
        self.engine = engine
        self.log = log
        self.traffic: set[SimRequest] = set()  # the demo traffic's requests in flight
        self.traffic_paused_until = 0.0
        self.kind = kind  # whose metric names /metrics speaks
        self.args = args
        self.model = served_model_name
        self.enable_metrics = enable_metrics
        self.ready = False
        self.app = Starlette(
            routes=[
                Route("/ready", self.health),  # SGLang's: 503 until warmed up, then 200, without a generation
                Route("/health", self.health),
                Route("/health_generate", self.health),
                Route("/v1/models", self.models),
                Route("/model_info", self.model_info),
                Route("/get_model_info", self.model_info),
                Route("/server_info", self.server_info),
                Route("/get_server_info", self.server_info),
                Route("/metrics", self.metrics),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            ]
        )

    async def health(self, _request: Request) -> Response:
        return Response(status_code=200) if self.ready else Response("loading", status_code=503)

    async def models(self, _request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.model,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": self.args["model_path"],
                        "max_model_len": self.args["context_length"],
                    }
                ],
            }
        )

    async def model_info(self, _request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "model_path": self.args["model_path"],
                "tokenizer_path": self.args["model_path"],
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": "kimi_k2",
            }
        )

    async def server_info(self, _request: Request) -> JSONResponse:
        scheduler = self.engine.scheduler
        return JSONResponse(
            {
                **self.args,
                "max_running_requests": scheduler.max_running,
                "max_total_num_tokens": scheduler.max_running * 4096,
                "internal_states": [
                    {
                        "avg_spec_accept_length": scheduler.avg_accept_length if scheduler.spec else None,
                        "last_gen_throughput": self.engine.throughput(),
                    }
                ],
                "version": self.args.get("version", "0.5.23-pivot-sim"),
            }
        )

    def _make_way(self) -> None:
        now = time.monotonic()
        if now >= self.traffic_paused_until:
            self.log(
                f"pivot demo: its background traffic pauses while another client measures this server "
                f"(ending {len(self.traffic)} of its requests); it resumes {PAUSE_S:g} s after that client last "
                "reads /metrics"
            )
        self.traffic_paused_until = now + PAUSE_S
        for request in list(self.traffic):
            self.engine.end(request)
        self.traffic.clear()

    async def metrics(self, request: Request) -> Response:
        if not self.enable_metrics:
            return PlainTextResponse("Not Found", status_code=404)
        if request.headers.get(TRAFFIC_HEADER) is None:
            self._make_way()
        scheduler = self.engine.scheduler
        drafting = scheduler.spec is not None
        if self.kind == "vllm":  # vllm/v1/metrics/loggers.py, vllm/v1/spec_decode/metrics.py
            label = f'{{engine="0",model_name="{self.model}"}}'
            gauges: dict[str, tuple[str, float]] = {
                "vllm:num_requests_running": ("Number of requests in model execution batches.", len(scheduler.running)),
                "vllm:num_requests_waiting": ("Number of requests waiting to be processed.", len(scheduler.waiting)),
            }
            counters: dict[str, tuple[str, float]] = {
                "vllm:generation_tokens_total": ("Number of generation tokens processed.", self.engine.generation_tokens_total),
                **(
                    {
                        "vllm:spec_decode_num_drafts_total": ("Number of spec decoding drafts.", scheduler.spec_steps),
                        "vllm:spec_decode_num_draft_tokens_total": ("Number of draft tokens.", scheduler.drafted_tokens),
                        "vllm:spec_decode_num_accepted_tokens_total": ("Number of accepted tokens.", scheduler.accepted_drafts),
                    }
                    if drafting
                    else {}
                ),
            }
        else:  # sglang/srt/observability/metrics_collector.py
            label = f'{{model_name="{self.model}"}}'
            gauges = {
                "sglang:num_running_reqs": ("The number of running requests.", len(scheduler.running)),
                "sglang:num_queue_reqs": ("The number of requests in the waiting queue.", len(scheduler.waiting)),
                "sglang:gen_throughput": ("The generation throughput (token/s).", self.engine.throughput()),
                "sglang:spec_accept_length": (
                    "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
                    scheduler.gauge_accept_length,
                ),
                "sglang:spec_accept_rate": (
                    "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
                    scheduler.gauge_accept_rate,
                ),
                "sglang:spec_num_steps": ("Currently active speculative_num_steps.", scheduler.last_num_steps),
            }
            counters = {
                "sglang:prompt_tokens_total": ("Number of prefill tokens processed.", self.engine.prompt_tokens_total),
                "sglang:generation_tokens_total": ("Number of generation tokens processed.", self.engine.generation_tokens_total),
            }
        lines = []
        for kind, table in (("gauge", gauges), ("counter", counters)):
            for name, (help_text, value) in table.items():
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{label} {float(value)}"]
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: Request) -> Response:
        return await self._generate(request, chat=True)

    async def _generate(self, request: Request, *, chat: bool) -> Response:
        if not self.ready:
            return _error(503, "the server is still loading the model")
        try:
            body = json.loads(await request.body())
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            prompt_tokens = _prompt_tokens(body, chat)
            max_tokens = body.get("max_tokens", body.get("max_completion_tokens", 128))
            if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
                raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        except ValueError as e:
            return _error(400, str(e))
        sim = SimRequest(prompt_tokens, max_tokens, ignore_eos=bool(body.get("ignore_eos", False)))
        if request.headers.get(TRAFFIC_HEADER) is not None:
            if time.monotonic() < self.traffic_paused_until:
                return _error(503, "pivot demo's traffic is paused while another client measures this server")
            self.traffic.add(sim)
        completion = _Completion(self.model, chat, sim)
        if body.get("stream"):
            options = body.get("stream_options") or {}
            return StreamingResponse(
                self._sse(completion, bool(options.get("include_usage")), bool(options.get("continuous_usage_stats"))),
                media_type="text/event-stream",
            )
        text = []
        async for n in self.engine.generate(sim):
            text.append(completion.text(n))
        return JSONResponse(completion.full("".join(text)))

    async def _sse(self, c: _Completion, include_usage: bool, continuous: bool) -> AsyncIterator[str]:
        if c.chat:
            yield _event(c.chunk({"role": "assistant", "content": ""}, None, c.usage() if continuous else None))
        # each chunk is held back one step so that the last one carries finish_reason
        pending: tuple[str, dict[str, int]] | None = None
        try:
            async for n in self.engine.generate(c.sim):
                if pending is not None:
                    yield _event(c.chunk(pending[0], None, pending[1] if continuous else None))
                pending = (c.text(n), c.usage())
        finally:
            self.traffic.discard(c.sim)
        text, usage = pending or ("", c.usage())
        yield _event(c.chunk(text, c.finish_reason(), usage if continuous else None))
        if include_usage:
            yield _event({**c.envelope(), "choices": [], "usage": c.usage()})
        yield "data: [DONE]\n\n"


def _event(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


class _Completion:
    def __init__(self, model: str, chat: bool, sim: SimRequest):
        self.model, self.chat, self.sim = model, chat, sim
        self.id = uuid.uuid4().hex
        self.created = int(time.time())
        self.sent = 0

    def text(self, n: int) -> str:
        words = [VOCAB[(self.sent + i) % len(VOCAB)] for i in range(n)]
        self.sent += n
        return "".join(" " + w for w in words)

    def finish_reason(self) -> str:
        return "length" if self.sim.generated >= self.sim.max_tokens else "stop"

    def usage(self) -> dict[str, int]:
        p, g = self.sim.prompt_tokens, self.sent  # tokens sent so far, not those still to be sent
        return {"prompt_tokens": p, "completion_tokens": g, "total_tokens": p + g}

    def envelope(self) -> dict[str, Any]:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def chunk(self, content: dict[str, Any] | str, finish: str | None, usage: dict[str, int] | None) -> dict[str, Any]:
        if self.chat:
            delta = content if isinstance(content, dict) else {"role": None, "content": content}
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": None}
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": finish, "matched_stop": None}
        return {**self.envelope(), "choices": [choice], "usage": usage}

    def full(self, text: str) -> dict[str, Any]:
        finish = self.finish_reason()
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            kind = "text_completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model, "choices": [choice], "usage": self.usage()}


class OwnSignals(uvicorn.Server):
    """uvicorn, leaving SIGTERM and SIGINT to the simulated engine's own handling."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def dummy_health_app(host: str, port: int, log: Callable[[str], None]) -> None:
    """SGLang's rank above 0: /health, /ping and /health_generate answer 200 (launch_dummy_health_check_server,
    srt/utils/common.py); a port in use ends only this (there: a daemon thread), said in the log."""

    async def ok(_: Request) -> Response:
        return Response(status_code=200)

    app = Starlette(routes=[Route(path, ok) for path in ("/health", "/ping", "/health_generate")])
    server = OwnSignals(uvicorn.Config(app, host=host, port=port, log_level="error", access_log=False, lifespan="off"))
    log(f"Dummy health check server started in background thread at {host}:{port}")
    try:
        await server.serve()  # a port in use: uvicorn logs the error and exits (SystemExit, which ends SGLang's thread)
    except SystemExit:
        pass
    finally:
        log(f"Dummy health check server stopped at {host}:{port}")

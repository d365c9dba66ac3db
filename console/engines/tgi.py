"""Hugging Face's text-generation-inference, as read in huggingface/text-generation-inference (see
../shared/ENGINES.md). It has no ignore_eos over HTTP (the router sets ignore_eos_token false): requests may end early."""

from __future__ import annotations

from console.engines.base import Engine, register


@register
class TGI(Engine):
    kind = "tgi"
    title = "Hugging Face TGI"
    model_arg = "--model-id"
    health = ("/health",)
    ready_line = "Connected"
    metrics = "/metrics"
    source = (
        "huggingface/text-generation-inference: launcher/src/main.rs (--model-id), router/src/server.rs "
        "(/health, /metrics, 'Connected'), router/src/validation.rs (ignore_eos_token: false)"
    )

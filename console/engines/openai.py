"""Any OpenAI-compatible server: only what the OpenAI API itself promises is assumed."""

from __future__ import annotations

from console.engines.base import Engine, register


@register
class OpenAICompatible(Engine):
    kind = "openai"
    title = "any OpenAI-compatible server"
    model_arg = "--model"
    health = ("/v1/models",)
    source = "the OpenAI API: GET /v1/models, stream_options.include_usage; nothing else assumed"

"""What a server or another pivot said of itself, kept with a sweep's events and its run.toml (console/sweep/model.py
SweepStarted, RunMeta): read leniently, since it comes from elsewhere. Shipped to the host in the load generator's
zipapp: pydantic 2 only."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, ValidatorFunctionWrapHandler, model_validator

__all__ = ["ClientPlacement", "PromptSource", "ServerFacts"]


class _Reported(BaseModel):
    """What a server or another pivot said: a value not of its field's type drops that field, not the whole (a server
    that reports its version as a number, a run.toml an older pivot wrote)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="wrap")
    @classmethod
    def _drop_what_is_wrong(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(data)
        except ValidationError as e:
            if not isinstance(data, dict):
                raise
            wrong = {err["loc"][0] for err in e.errors() if err["loc"]}
            return handler({k: v for k, v in data.items() if k not in wrong})


class ServerFacts(_Reported):
    """What the server said of itself at a sweep's start (console/sweep/loadgen/server_view.py server_facts): its
    model, limits, CUDA-graph batch sizes (which the adaptive schedule follows) and speculation (SGLang's
    /server_info), whether it has /metrics, and what it was already serving."""

    model: str | None = None
    version: str | None = None
    max_running_requests: int | None = None
    tp_size: int | None = None
    speculative_algorithm: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_adaptive: bool | None = None
    cuda_graph_bs: list[int] | None = None
    cuda_graph_max_bs: int | None = None
    metrics: bool = False  # it serves /metrics
    busy: dict[str, int] | None = None  # running and queued requests when the sweep started (another client's load)


class ClientPlacement(_Reported):
    """Where the load generator ran and how its requests reached the server: "direct", "ssh-forward" from the
    console's machine to `host`, or "on-host" (on `host` itself). Recorded with the run: an SSH forward between client
    and server costs client CPU per token, bunches chunks and adds its round trip."""

    machine: str | None = None
    cpus: int | None = None
    path: str | None = None
    host: str | None = Field(default=None, validation_alias=AliasChoices("host", "forwarded_from"))  # (older runs' word)


class PromptSource(_Reported):
    """Where a sweep's prompts came from: a file, seeded prompts, or one of its own per request (how long, counted how)."""

    source: str | None = None
    input_tokens: int | None = None
    words: int | None = None
    counted_by: str | None = None
    tokens: int | None = None  # the server's own count of one prompt, where it has /tokenize
    size: int | None = None  # a prompt set's prompts
    lengths: str | None = None  # how long the answers ran, in words (fixed, drawn, the set's, natural ends)

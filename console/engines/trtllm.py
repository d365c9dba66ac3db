"""NVIDIA TensorRT-LLM's trtllm-serve, as read in NVIDIA/TensorRT-LLM (see ../shared/ENGINES.md).

Its /metrics is JSON iteration stats; Prometheus text is /prometheus/metrics, with return_perf_metrics. Its requests
forbid unknown fields (HTTP 400): pivot sends only fields its schema has. How it drafts is set in its YAML extra
options, which pivot does not read: its runs are not known to draft.

A draft-length schedule (the 1.3 line's main branch, as the code index holds it) is `speculative_config`'s
`draft_len_schedule`, `{batch: draft_len}`: `Drafter.get_draft_len_for_batch_size`
(`tensorrt_llm/_torch/speculative/drafter.py`) runs a batch at the entry of the largest key not above it, with no
padding; `DecodingBaseConfig.validate_draft_len_schedule_and_sort` (`tensorrt_llm/llmapi/llm_args.py`) wants key 1,
whose length equals `max_draft_len`, and no length above it. `max_concurrency` turns drafting off above that many
scheduled requests (`Drafter.should_use_spec_decode`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from console.engines.base import POSITIONAL, Engine, LengthSchedule, NoAdaptiveProfile, register


def draft_len_schedule(points: list[tuple[int, int]]) -> tuple[dict[int, int], int | None, list[str]]:
    """The schedule, max_concurrency (the last batch that drafts, where none drafts above it) and what had to give:
    TensorRT-LLM drafts its longest at batch 1, so a longer best length above it is cut to that."""
    first = points[0][1]
    if first == 0:
        raise NoAdaptiveProfile(
            "no schedule: TensorRT-LLM's draft_len_schedule drafts its longest at batch 1 (max_draft_len), and no "
            "drafting paid at the first level"
        )
    warnings = [
        f"at running batch {batch} the best length was {length}, above TensorRT-LLM's max_draft_len {first} (its length "
        f"at batch 1): it runs {first}"
        for batch, length in points
        if length > first
    ]
    schedule = {1: first}
    current = first
    for (before, _), (_, length) in itertools.pairwise(points):
        length = min(length, first)
        if length != current:
            schedule[before + 1] = length
            current = length
    drafting = [batch for batch, length in points if length]
    tail_off = points[-1][1] == 0
    return schedule, (drafting[-1] if tail_off and drafting else None), warnings


def draft_len_at(schedule: dict[int, int], max_concurrency: int | None, batch: int) -> int:
    """get_draft_len_for_batch_size, and no drafting above max_concurrency."""
    if max_concurrency is not None and batch > max_concurrency:
        return 0
    return schedule[max(k for k in schedule if k <= batch)]


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

    def length_schedule(self, points: list[tuple[int, int]], argv: Sequence[str], sizes: list[int] | None) -> LengthSchedule:
        schedule, most, warnings = draft_len_schedule(points)
        config: dict[str, object] = {"max_draft_len": schedule[1], "draft_len_schedule": schedule}
        if most is not None:
            config["max_concurrency"] = most
        entries = ", ".join(f"{k}: {v}" for k, v in schedule.items())
        text = (
            "# merge into the speculative_config of the server's --extra_llm_api_options YAML\n"
            f"speculative_config:\n  max_draft_len: {schedule[1]}\n  draft_len_schedule: {{{entries}}}\n"
            + (f"  max_concurrency: {most}\n" if most is not None else "")
        )
        routes = {batch: draft_len_at(schedule, most, batch) for batch, _ in points}
        return LengthSchedule(config, text, routes, tuple(warnings))

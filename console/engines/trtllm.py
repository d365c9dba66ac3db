"""NVIDIA TensorRT-LLM's trtllm-serve, as read in NVIDIA/TensorRT-LLM (see ../shared/ENGINES.md).

Its /metrics is JSON iteration stats; Prometheus text is /prometheus/metrics, with return_perf_metrics. Its requests
forbid unknown fields (HTTP 400): pivot sends only fields its schema has.

How it drafts is not in its command line: `--config` (alias `--extra_llm_api_options`, `tensorrt_llm/commands/serve.py`)
names a YAML file on the host, read with `yaml.safe_load`, whose `speculative_config` holds `decoding_type` and
`max_draft_len`. `pivot tune` reads that file from the host; elsewhere its runs are not known to draft.

A draft-length schedule is `speculative_config.draft_len_schedule`, `{batch: draft_len}`, as TensorRT-LLM reads it since
PR #10860 (merged 2026-02, "dynamic draft length on the one-model path"; all algorithms since #12262): a key is the
largest running batch its length serves (`get_draft_len_for_batch_size` in `tensorrt_llm/_torch/speculative/utils.py`:
the first key >= batch, by bisect_left), and above the largest key nothing is drafted. Its validator
(`DecodingBaseConfig.validate_draft_len_schedule_and_sort`, `tensorrt_llm/llmapi/llm_args.py`) wants the smallest key's
length to equal `max_draft_len` and no length above it; `max_concurrency` and `draft_len_schedule` may not both be set
(`validate_max_concurrency_and_draft_len_schedule_mutually_exclusive`; max_concurrency alone becomes
`{max_concurrency: max_draft_len}`). Before #10860 a key was the smallest batch of its length (`Drafter`, bisect_right)
and key 1 was required: pivot writes the newer form only."""

from __future__ import annotations

import bisect
import copy
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from console.engines.base import POSITIONAL, Drafting, Engine, FlagValue, LengthSchedule, NoAdaptiveProfile, register
from console.engines.flags import as_int, parse_flags

OPTIONS_FLAGS = ("config", "extra_llm_api_options")  # click's two spellings of one option (serve.py)
SCHEDULE_KEYS = ("draft_len_schedule", "max_concurrency")  # speculative_config's drafting by load


def draft_len_schedule(points: list[tuple[int, int]], most: int | None) -> tuple[dict[int, int], list[str]]:
    """The schedule of the best length at each measured running batch, and what had to give. Each length serves up to
    the last batch measured at it; the last drafting length up to `most` (the server's largest batch, where its
    command line says) when it is the last measured, since above the largest key TensorRT-LLM drafts nothing."""
    first = points[0][1]
    if first == 0:
        raise NoAdaptiveProfile(
            "no schedule: TensorRT-LLM's draft_len_schedule drafts its longest (max_draft_len) at its smallest batch, "
            "and no drafting paid at the first level"
        )
    warnings = [
        f"at running batch {batch} the best length was {length}, above TensorRT-LLM's max_draft_len {first} (its length "
        f"at its smallest batch): it runs {first}"
        for batch, length in points
        if length > first
    ]
    capped = [(batch, min(length, first)) for batch, length in points]
    schedule: dict[int, int] = {}
    for length, group in itertools.groupby(capped, key=lambda p: p[1]):
        schedule[list(group)[-1][0]] = length
    while schedule and schedule[max(schedule)] == 0:  # above the largest key nothing drafts: a trailing 0 is implicit
        del schedule[max(schedule)]
    last = max(schedule)
    if last == capped[-1][0]:
        if most is not None and most > last:
            schedule[most] = schedule.pop(last)
        else:
            warnings.append(f"above running batch {last} (the last measured) TensorRT-LLM drafts nothing")
    return schedule, warnings


def draft_len_at(schedule: dict[int, int], batch: int) -> int:
    """get_draft_len_for_batch_size: the length of the first key at or above the batch; 0 above them all."""
    keys = sorted(schedule)
    i = bisect.bisect_left(keys, batch)
    return schedule[keys[i]] if i < len(keys) else 0


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
    options_flags = OPTIONS_FLAGS
    source = (
        "NVIDIA/TensorRT-LLM: tensorrt_llm/commands/serve.py (click argument MODEL, --config/--extra_llm_api_options, "
        "--max_batch_size), serve/openai_server.py (/health, /metrics, /prometheus/metrics), serve/openai_protocol.py "
        "(extra='forbid', ignore_eos, StreamOptions include_usage and continuous_usage_stats), llmapi/llm_args.py "
        "(DecodingBaseConfig); uvicorn's own ready line"
    )

    def max_batch(self, argv: Sequence[str]) -> int | None:
        return as_int(parse_flags(argv).get("max_batch_size"))

    def drafting_in(self, options: Mapping[str, Any]) -> Drafting | None:
        spec = options.get("speculative_config")
        if not isinstance(spec, Mapping):
            return None
        steps = spec.get("max_draft_len", spec.get("num_nextn_predict_layers"))  # (MTP's older name for its length)
        known = isinstance(steps, int) and not isinstance(steps, bool)
        return Drafting(self.kind, str(spec.get("decoding_type", "?")), steps if known else None, dict(spec))

    def fixed_length(self, found: Drafting) -> bool:
        return not any(found.config.get(key) is not None for key in SCHEDULE_KEYS)

    def options_at_length(self, options: Mapping[str, Any], length: int) -> dict[str, Any]:
        changed = copy.deepcopy(dict(options))
        if length == 0:
            changed.pop("speculative_config", None)
            return changed
        spec = changed["speculative_config"]
        if spec.get("eagle_choices") is not None or spec.get("use_dynamic_tree"):
            raise NoAdaptiveProfile("its drafts are a tree (eagle_choices, use_dynamic_tree): a draft length is a chain's")
        if "num_nextn_predict_layers" in spec:  # MTP's older name: TensorRT-LLM takes the smaller of the two
            spec["num_nextn_predict_layers"] = length
        for key in SCHEDULE_KEYS:
            spec.pop(key, None)
        spec["max_draft_len"] = length
        if "max_total_draft_tokens" in spec:  # a linear tree: one token a layer
            spec["max_total_draft_tokens"] = length
        return changed

    def options_tuned(self, options: Mapping[str, Any], schedule: LengthSchedule) -> dict[str, Any]:
        assert schedule.config is not None
        tuned = self.options_at_length(options, int(schedule.config["max_draft_len"]))
        tuned["speculative_config"]["draft_len_schedule"] = dict(schedule.config["draft_len_schedule"])
        return tuned

    def length_schedule(self, points: list[tuple[int, int]], argv: Sequence[str], sizes: list[int] | None) -> LengthSchedule:
        schedule, warnings = draft_len_schedule(points, self.max_batch(argv))
        entries = ", ".join(f"{k}: {v}" for k, v in schedule.items())
        text = (
            "# the speculative_config of the server's --config YAML (keys: the largest running batch of each length)\n"
            f"speculative_config:\n  max_draft_len: {points[0][1]}\n  draft_len_schedule: {{{entries}}}\n"
        )
        routes = {batch: draft_len_at(schedule, batch) for batch, _ in points}
        return LengthSchedule({"max_draft_len": points[0][1], "draft_len_schedule": schedule}, text, routes, tuple(warnings))

    def tuned_flags(
        self, flags: Mapping[str, FlagValue], schedule: LengthSchedule, config_path: str | None
    ) -> tuple[dict[str, FlagValue], list[str]]:
        assert config_path is not None
        return {self.options_flag(flags): config_path}, []

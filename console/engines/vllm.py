"""vLLM, as read in its 0.33.0 wheel (see ../shared/ENGINES.md).

- It drafts when `--speculative-config` (`-sc`, a JSON string) names a method or a draft model, or `--spec-method` /
  `--spec-model` do (`vllm/engine/arg_utils.py`, `create_speculative_config`); `SpeculativeConfig.__post_init__`
  infers the method from the model when only the model is given.
- An adaptive schedule (`vllm/v1/spec_decode/dynamic/utils.py`) goes inside the `--speculative-config` JSON string:
  `"num_speculative_tokens_per_batch_size": [[1, B, k], [B + 1, N, 0]]`, inclusive ranges starting at 1; the
  scheduler looks the running batch up without padding. vllm/config/vllm.py drops it in the cases
  `dynamic_unsupported` names.
- Across nodes: `--nnodes`, `--node-rank`, `--master-addr`, `--master-port` with its mp backend (engine/arg_utils.py,
  config/parallel.py); a rank above 0 runs `--headless` (entrypoints/cli/serve.py run_headless: the workers, no API
  server).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from console.engines.base import (
    POSITIONAL,
    Drafting,
    Engine,
    FlagValue,
    LengthSchedule,
    Measured,
    NoAdaptiveProfile,
    Schedule,
    register,
)
from console.engines.flags import as_argv, as_int, parse_flags

DYNAMIC_METHODS = ("ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash")  # `_maybe_disable_dynamic_sd_for_v1`
DEFAULT_MAX_NUM_SEQS = 1024  # vLLM's default on an H100/H200 (`_set_default_max_num_seqs_and_batched_tokens_args`)


def speculative_config(flags: dict[str, str | bool]) -> dict[str, Any] | None:
    """The --speculative-config object (None when absent); raises ValueError when it is not a JSON object."""
    raw = flags.get("speculative-config", flags.get("sc"))
    if raw is None or raw is True:
        return None
    config = json.loads(str(raw))
    if not isinstance(config, dict):
        raise ValueError(f"--speculative-config must be a JSON object, got {raw!r}")
    return {k.replace("-", "_"): v for k, v in config.items()}


def dynamic_unsupported(argv: Sequence[str], config: dict[str, Any]) -> str | None:
    """Why vLLM would drop `num_speculative_tokens_per_batch_size` for this command line (vllm/config/vllm.py:
    `_maybe_disable_dynamic_sd_for_data_parallel`, `_maybe_disable_dynamic_sd_for_v1`)."""
    flags = parse_flags(argv)
    dp = as_int(flags.get("data-parallel-size", flags.get("dp"))) or 1
    if dp > 1:
        return f"data_parallel_size={dp} (dynamic drafting is off with data parallelism)"
    method = str(config.get("method") or "draft_model")
    if method not in DYNAMIC_METHODS:
        return f"method {method!r} has no dynamic drafting on Model Runner V1 (set VLLM_USE_V2_MODEL_RUNNER=1)"
    return None


def batch_schedule(drafting_up_to: int, tokens: int, max_num_seqs: int) -> list[list[int]]:
    return [[1, drafting_up_to, tokens], [drafting_up_to + 1, max(max_num_seqs, drafting_up_to + 1), 0]]


REPLACED_FLAGS = ("spec-method", "spec-model", "spec-tokens", "sc")  # what a written --speculative-config replaces
PLAIN_UNSET = ("speculative-config", *REPLACED_FLAGS)  # every flag that makes it draft


def replaced(flags: Mapping[str, FlagValue]) -> list[str]:
    """The profile's flags a --speculative-config written in full replaces: unset beside it."""
    return [f for f in REPLACED_FLAGS if f in flags]


def length_ranges(points: list[tuple[int, int]], max_num_seqs: int) -> list[list[int]]:
    """Inclusive ranges from batch 1, each to the batch before the next change of length, the last to max_num_seqs."""
    ranges: list[list[int]] = []
    start = 1
    for (batch, length), (_, following) in itertools.pairwise([*points, (0, -1)]):
        if following != length:
            ranges.append([start, batch, length])
            start = batch + 1
    ranges[-1][1] = max(max_num_seqs, ranges[-1][1])
    return ranges


def length_at(ranges: list[list[int]], batch: int, most: int) -> int:
    """The K vLLM runs a batch at (build_dynamic_sd_schedule_lookup): the range holding it, capped at
    num_speculative_tokens."""
    return min(most, next((k for lo, hi, k in ranges if lo <= batch <= hi), ranges[-1][2]))


@register
class VLLM(Engine):
    kind = "vllm"
    title = "vLLM"
    model_arg = POSITIONAL
    health = ("/health",)
    ready_line = "Starting vLLM server on"
    metrics = "/metrics"
    ignore_eos = True
    ends_early = False
    source = (
        "vllm 0.33.0: entrypoints/cli/serve.py (model_tag), entrypoints/launchers/api_server/entry.py "
        "(the ready line), entrypoints/openai (/health, /metrics)"
    )
    rank_flags = ("nnodes", "node-rank", "master-addr", "master-port", "headless")
    rank_shell = (
        'h=; [ "$SLURM_NODEID" = 0 ] || h=--headless; exec "$@" --nnodes "$PIVOT_NNODES" --node-rank "$SLURM_NODEID" '
        '--master-addr "$SLURM_LAUNCH_NODE_IPADDR" --master-port "$PIVOT_DIST_PORT" $h'
    )
    adaptive_flag = "--speculative-config"
    adaptive_cost = (
        " (vLLM runs a dynamic speculative schedule with PIECEWISE CUDA graphs instead of FULL_AND_PIECEWISE, "
        "reported at about 14 % single-stream, and reported to stall under concurrency at the schedule's "
        "threshold: vllm-project/vllm issues 48494 and 49548)"
    )

    def drafting(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Drafting | None:
        flags = parse_flags(argv)
        try:
            config = speculative_config(flags) or {}
        except ValueError:
            config = {}
        for flag, key in (("spec-method", "method"), ("spec-model", "model"), ("spec-tokens", "num_speculative_tokens")):
            if isinstance(flags.get(flag), str):
                config[key] = flags[flag]
        if not config.get("method") and not config.get("model"):
            return None
        return Drafting(self.kind, str(config.get("method") or "draft_model"), as_int(config.get("num_speculative_tokens")), config)

    def adaptive_warning(self, argv: Sequence[str]) -> str | None:
        try:
            config = speculative_config(parse_flags(argv)) or {}
        except ValueError as e:
            return f"--speculative-config: {e}"
        if config.get("num_speculative_tokens_per_batch_size") is None:
            return None
        reason = dynamic_unsupported(argv, config)
        return f"vLLM will drop num_speculative_tokens_per_batch_size: {reason}" if reason else None

    def node_flags(self, nnodes: int, rank: int, address: str, port: int) -> dict[str, FlagValue]:
        return {"nnodes": nnodes, "node-rank": rank, "master-addr": address, "master-port": port, "headless": rank > 0}

    def schedule(self, measured: Measured) -> Schedule:
        tokens = measured.found.config.get("num_speculative_tokens")
        if not isinstance(tokens, int) or tokens < 1:
            raise NoAdaptiveProfile(
                f"no adaptive profile: {measured.spec_name}'s --speculative-config has no num_speculative_tokens "
                "to keep below the crossover"
            )
        max_seqs = parse_flags(measured.argv).get("max-num-seqs")
        schedule = batch_schedule(
            measured.cut, tokens, int(max_seqs) if isinstance(max_seqs, str) and max_seqs.isdigit() else DEFAULT_MAX_NUM_SEQS
        )
        config = {**measured.found.config, "num_speculative_tokens_per_batch_size": schedule}
        reason = dynamic_unsupported(measured.argv, config)
        warnings = (f"vLLM will not switch drafting by batch size with {measured.spec_name}'s flags: {reason}",) if reason else ()
        return Schedule(measured.cut, measured.cut + 1, config, warnings)

    def adaptive_flags(
        self, profile_flags: Mapping[str, FlagValue], schedule: Schedule, config_path: str | None
    ) -> tuple[dict[str, FlagValue], list[str]]:
        return {"speculative-config": json.dumps(schedule.config)}, replaced(profile_flags)

    def max_batch(self, argv: Sequence[str]) -> int | None:
        return as_int(parse_flags(argv).get("max-num-seqs"))

    def length_flags(self, flags: Mapping[str, FlagValue], length: int) -> tuple[dict[str, FlagValue], list[str]]:
        if length == 0:
            return {}, self.plain_flags(flags)
        found = self.drafting(as_argv(flags))
        if found is None:
            raise NoAdaptiveProfile("its flags do not draft")
        config = {**found.config, "num_speculative_tokens": length}
        config.pop("num_speculative_tokens_per_batch_size", None)
        return {"speculative-config": json.dumps(config)}, replaced(flags)

    def plain_flags(self, flags: Mapping[str, FlagValue]) -> list[str]:
        return [f for f in PLAIN_UNSET if f in flags]

    def length_schedule(self, points: list[tuple[int, int]], argv: Sequence[str], sizes: list[int] | None) -> LengthSchedule:
        found = self.drafting(argv)
        if found is None:
            raise NoAdaptiveProfile("its flags do not draft")
        max_seqs = as_int(parse_flags(argv).get("max-num-seqs")) or DEFAULT_MAX_NUM_SEQS
        ranges = length_ranges(points, max_seqs)
        most = max(k for _, _, k in ranges)  # vLLM caps every K at num_speculative_tokens
        config = {**found.config, "num_speculative_tokens": most, "num_speculative_tokens_per_batch_size": ranges}
        reason = dynamic_unsupported(argv, config)
        warnings = (f"vLLM will not switch draft lengths by batch size with these flags: {reason}",) if reason else ()
        routes = {batch: length_at(ranges, batch, most) for batch, _ in points}
        return LengthSchedule(config, json.dumps(config) + "\n", routes, warnings)

    def tuned_flags(
        self, flags: Mapping[str, FlagValue], schedule: LengthSchedule, config_path: str | None
    ) -> tuple[dict[str, FlagValue], list[str]]:
        return {"speculative-config": json.dumps(schedule.config)}, replaced(flags)

"""SGLang, as read in its 0.5.23 wheel (see ../shared/ENGINES.md).

- It drafts when `--speculative-algorithm` is given (`sglang/srt/arg_groups/fields/spec.py`). Its CUDA-graph batch
  sizes, to which a running batch is padded before the adaptive tier lookup, come from
  `generate_decode_cuda_graph_batch_sizes` (`arg_groups/cuda_graph_hook.py`) with the GPU-memory default of the
  largest one from `_handle_gpu_memory_settings` (`arg_groups/memory_hook.py`). Adaptive mode is switched off, with a
  warning, by `adaptive_unsupported_reason` (`speculative/adaptive_spec_params.py`).
- An adaptive schedule (`speculative/adaptive_spec_params.py`) is a JSON file whose keys are batch sizes written as
  integer strings, each the lower bound of a tier: `{"1": {"candidate_steps": [3]}, "11": {"candidate_steps": [0]}}`.
  A running batch is first padded up to the next captured CUDA-graph batch size, then routed to the tier with the
  largest key not above it; so to draft at batch B and not above, the "off" tier's key is pad(B) + 1.
  `--speculative-num-steps` must be one of the candidate steps.
- Across nodes: `--nnodes`, `--node-rank`, `--dist-init-addr HOST:PORT` (srt/arg_groups/fields/parallel.py). A rank
  above 0 runs schedulers only (srt/entrypoints/engine.py, `node_rank >= 1`): no tokenizer, no API, but a dummy server
  answering /health on --host/--port (srt/utils/common.py launch_dummy_health_check_server, in a daemon thread: a port
  in use only ends that thread), and it ignores SIGTERM, waiting for rank 0's shutdown to reach it.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from console.engines.base import (
    Drafting,
    Engine,
    FlagValue,
    LengthSchedule,
    Measured,
    NoAdaptiveProfile,
    Schedule,
    register,
)
from console.engines.flags import as_int, list_flag, parse_flags

ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3")
DEFAULT_STEPS = 3  # `_auto_choose_speculative_params` (speculative_hook.py): 3 steps for most architectures


def adaptive_unsupported(argv: Sequence[str]) -> str | None:
    """Why SGLang would switch adaptive mode off for this command line (it warns and drafts statically).

    The checks of `adaptive_unsupported_reason` that the command line decides; the platform worker
    check depends on the hardware and is left to the server's own log."""
    flags = parse_flags(argv)
    algorithm = flags.get("speculative-algorithm")
    if not isinstance(algorithm, str) or algorithm.upper() not in ADAPTIVE_ALGORITHMS:
        return f"speculative_algorithm={algorithm if isinstance(algorithm, str) else None} (only EAGLE/EAGLE3 are supported)"
    topk = as_int(flags.get("speculative-eagle-topk"))
    if topk is not None and topk != 1:
        return f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    if flags.get("enable-dp-attention") is True or (as_int(flags.get("attn-dp-size")) or 1) > 1:
        return "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
    for flag in ("enable-multi-layer-eagle", "enable-two-batch-overlap", "enable-pdmux"):
        if flags.get(flag) is True:
            return f"{flag.replace('-', '_')}=True is not supported"
    return None


def default_max_bs(gpu_memory_mib: float | None, tp: int) -> int:
    """The largest decode CUDA-graph batch by GPU memory (`_handle_gpu_memory_settings`, memory_hook.py)."""
    if gpu_memory_mib is None:
        return 160
    gib = gpu_memory_mib / 1024
    if gib < 20:
        return 8
    if gib < 35:
        return 48 if tp < 4 else 160
    if gib < 60:
        return 32 if tp < 4 else 160
    if gib < 160:
        return 256 if tp < 4 else 512
    return 512


def capture_sizes(max_bs: int, *, speculative: bool, padding: bool = True) -> list[int]:
    """`generate_decode_cuda_graph_batch_sizes` (cuda_graph_hook.py), as 0.5.23 writes it."""
    if not padding:
        sizes = list(range(1, max_bs + 1))
    elif not speculative:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    else:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, max_bs + 1, 16)]
    sizes = [bs for bs in sizes if bs <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def decode_batch_sizes(argv: Sequence[str], gpu_memory_mib: float | None = None) -> list[int] | None:
    """The decode CUDA-graph batch sizes SGLang captures for this command line; None when decode graphs are off
    (then a batch is not padded). The server's own /server_info (`cuda_graph_config.decode.bs`) is better."""
    flags = parse_flags(argv)
    decode: dict[str, Any] = {}
    if isinstance(flags.get("cuda-graph-config"), str):
        try:
            decode = dict(json.loads(str(flags["cuda-graph-config"])).get("decode") or {})
        except (ValueError, AttributeError, TypeError):
            decode = {}
    backend = decode.get("backend") or flags.get("cuda-graph-backend-decode")
    if flags.get("disable-cuda-graph") is True or flags.get("disable-decode-cuda-graph") is True or backend == "disabled":
        return None
    if isinstance(decode.get("bs"), list):
        return sorted(int(b) for b in decode["bs"])
    listed = list_flag(argv, "cuda-graph-bs-decode")
    if listed:
        return sorted(listed)
    explicit = as_int(decode.get("max_bs")) or as_int(flags.get("cuda-graph-max-bs-decode"))
    max_bs = explicit or default_max_bs(gpu_memory_mib, as_int(flags.get("tp-size", flags.get("tp"))) or 1)
    running = as_int(flags.get("max-running-requests"))
    if explicit is None and running is not None and max_bs > running:
        max_bs = running
    return capture_sizes(
        max_bs, speculative=isinstance(flags.get("speculative-algorithm"), str), padding=flags.get("disable-cuda-graph-padding") is not True
    )


def pad(batch: int, sizes: list[int] | None) -> int:
    """SGLang's `_pad_to_cuda_graph_bs`: the next captured size, or the batch itself beyond them or without graphs."""
    if not sizes:
        return batch
    i = bisect.bisect_left(sizes, batch)
    return sizes[i] if i < len(sizes) else batch


def tiers(drafting_up_to: int, steps: int, sizes: list[int] | None) -> dict[str, Any]:
    return {"1": {"candidate_steps": [steps]}, str(pad(drafting_up_to, sizes) + 1): {"candidate_steps": [0]}}


def steps_at(config: dict[str, Any], batch: int, sizes: list[int] | None) -> int:
    """The draft steps SGLang routes a running batch to (`AdaptiveSpeculativeParams._route`), for the
    one-candidate tiers pivot writes."""
    keys = sorted(int(k) for k in config if k.isdigit())
    i = bisect.bisect_right(keys, pad(batch, sizes)) - 1
    return int(config[str(keys[max(0, i)])]["candidate_steps"][0])


def schedule_tiers(cut: int, measured: list[int], steps: int, sizes: list[int] | None) -> tuple[int, dict[str, Any]]:
    """The tiers that draft at every measured C up to the cut and at none above it, and the cut they keep: a lower
    one when SGLang pads the cut and the next measured level to the same captured size (its tiers cannot tell
    them apart). Raises NoAdaptiveProfile when no measured level can be kept apart that way."""
    for candidate in [c for c in measured if c <= cut][::-1]:
        config = tiers(candidate, steps, sizes)
        if all((steps_at(config, c, sizes) > 0) == (c <= candidate) for c in measured):
            return candidate, config
    raise NoAdaptiveProfile(
        "no adaptive profile: SGLang's CUDA-graph padding routes the levels where drafting helps and those where it costs to the same tier"
    )


def length_tiers(points: list[tuple[int, int]], sizes: list[int] | None) -> tuple[dict[str, Any], list[str]]:
    """One-candidate tiers giving each measured running batch its best length: a tier starts one above the padded
    size of the batch before a change. Two batches SGLang pads to the same captured size share the first's tier."""
    config: dict[str, Any] = {"1": {"candidate_steps": [points[0][1]]}}
    warnings = []
    current = points[0][1]
    for (before, _), (batch, length) in itertools.pairwise(points):
        if length == current:
            continue
        key = pad(before, sizes) + 1
        if pad(batch, sizes) < key:
            warnings.append(
                f"SGLang pads running batches {before} and {batch} to the same CUDA-graph batch size {pad(batch, sizes)}: "
                f"{batch} runs {current} draft steps, not {length}"
            )
            continue
        config[str(key)] = {"candidate_steps": [length]}
        current = length
    return config, warnings


@register
class SGLang(Engine):
    kind = "sglang"
    title = "SGLang"
    model_arg = "--model-path"
    # /ready is 200 once warmed up and not paused; /health makes the server generate a token at each poll (a request
    # in the batch every second of a sweep), so it is asked only of an SGLang without /ready
    health = ("/ready", "/health")
    ready_line = "The server is fired up and ready to roll!"
    metrics = "/metrics"
    ignore_eos = True
    ends_early = False
    source = (
        "sglang 0.5.23: srt/server_args.py (--model-path), srt/entrypoints/http_server.py (/health, "
        "/ready, /metrics with --enable-metrics, the ready line, /model_info), managers/tokenizer_manager.py (is_ready)"
    )
    rank_flags = ("nnodes", "node-rank", "dist-init-addr", "nccl-init-addr")
    every_rank_serves_http = True  # the dummy health server above rank 0
    rank_shell = (
        'a=$SLURM_LAUNCH_NODE_IPADDR; case $a in *:*) a="[$a]";; esac; '  # SGLang takes an IPv6 host in brackets
        'exec "$@" --nnodes "$PIVOT_NNODES" --node-rank "$SLURM_NODEID" --dist-init-addr "$a:$PIVOT_DIST_PORT"'
    )
    adaptive_file = True
    adaptive_flag = "--speculative-adaptive-config"

    def drafting(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Drafting | None:
        flags = parse_flags(argv)
        algorithm = flags.get("speculative-algorithm")
        if not isinstance(algorithm, str):
            return None
        return Drafting(self.kind, algorithm.upper(), as_int(flags.get("speculative-num-steps")))

    def adaptive_warning(self, argv: Sequence[str]) -> str | None:
        if parse_flags(argv).get("speculative-adaptive") is not True:
            return None
        reason = adaptive_unsupported(argv)
        return f"SGLang will switch adaptive speculation off: {reason}" if reason else None

    def node_flags(self, nnodes: int, rank: int, address: str, port: int) -> dict[str, FlagValue]:
        host = f"[{address}]" if ":" in address else address  # NetworkAddress.parse takes an IPv6 host in brackets
        return {"nnodes": nnodes, "node-rank": rank, "dist-init-addr": f"{host}:{port}"}

    async def served_model(self, argv: Sequence[str], get: Callable[[str], Awaitable[bytes]]) -> str | None:
        return str(json.loads(await get("/model_info"))["model_path"])

    def schedule(self, measured: Measured) -> Schedule:
        sizes = measured.batch_sizes or decode_batch_sizes(measured.argv, measured.gpu_memory_mib)
        kept, config = schedule_tiers(measured.cut, measured.levels, measured.found.steps or DEFAULT_STEPS, sizes)
        warnings = []
        if kept != measured.cut:
            warnings.append(
                f"SGLang pads C={measured.cut} and the next level to the same CUDA-graph batch size: drafting stops above C={kept} instead"
            )
        if reason := adaptive_unsupported(measured.argv):
            warnings.append(f"SGLang will not switch drafting by batch size with {measured.spec_name}'s flags: {reason}")
        return Schedule(kept, pad(kept, sizes) + 1, config, tuple(warnings))

    def adaptive_flags(
        self, profile_flags: Mapping[str, FlagValue], schedule: Schedule, config_path: str | None
    ) -> tuple[dict[str, FlagValue], list[str]]:
        flags: dict[str, FlagValue] = {"speculative-adaptive": True, "speculative-adaptive-config": config_path or ""}
        if "speculative-num-steps" not in profile_flags:  # SGLang wants it among the candidate steps
            flags["speculative-num-steps"] = schedule.config["1"]["candidate_steps"][0]
        return flags, []

    def max_batch(self, argv: Sequence[str]) -> int | None:
        return as_int(parse_flags(argv).get("max-running-requests"))

    def length_flags(self, flags: Mapping[str, FlagValue], length: int) -> tuple[dict[str, FlagValue], list[str]]:
        topk = as_int(flags.get("speculative-eagle-topk"))
        if topk not in (None, 1):
            raise NoAdaptiveProfile(f"a draft length is a chain of steps with speculative-eagle-topk = 1, not {topk}")
        if length == 0:
            return {}, self.plain_flags(flags)
        # with topk 1 SGLang verifies steps + 1 tokens (speculative_hook.py sets num_draft_tokens so, and refuses others)
        return {"speculative-num-steps": length, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": length + 1}, []

    def plain_flags(self, flags: Mapping[str, FlagValue]) -> list[str]:
        return [name for name in flags if name.startswith("speculative-")]

    def length_schedule(self, points: list[tuple[int, int]], argv: Sequence[str], sizes: list[int] | None) -> LengthSchedule:
        sizes = sizes or decode_batch_sizes(argv)
        config, warnings = length_tiers(points, sizes)
        if reason := adaptive_unsupported(argv):
            warnings.append(f"SGLang will not switch draft lengths by batch size with these flags: {reason}")
        routes = {batch: steps_at(config, batch, sizes) for batch, _ in points}
        text = "{\n" + ",\n".join(f" {json.dumps(key)}: {json.dumps(tier)}" for key, tier in config.items()) + "\n}\n"
        return LengthSchedule(config, text, routes, tuple(warnings))

    def tuned_flags(
        self, flags: Mapping[str, FlagValue], schedule: LengthSchedule, config_path: str | None
    ) -> tuple[dict[str, FlagValue], list[str]]:
        steps = max(s for tier in (schedule.config or {}).values() for s in tier["candidate_steps"])
        # --speculative-num-steps must be one of the candidate steps; SGLang sets num_draft_tokens to steps + 1
        return {
            "speculative-adaptive": True,
            "speculative-adaptive-config": config_path or "",
            "speculative-num-steps": steps,
            "speculative-eagle-topk": 1,
            "speculative-num-draft-tokens": steps + 1,
        }, []


def reported_drafting(algorithm: str) -> Drafting:
    """The drafting SGLang's /server_info reported (`speculative_algorithm`), where its command line did not say."""
    return Drafting(SGLang.kind, algorithm, None)

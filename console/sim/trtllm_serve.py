"""`python -m console.sim.trtllm_serve MODEL`: a simulated `trtllm-serve` (TensorRT-LLM's PyTorch backend), for
TensorRT-LLM profiles.

The options are `tensorrt_llm/commands/serve.py`'s own spellings, those a single-node server needs. How it drafts is in
the YAML file `--config` (or `--extra_llm_api_options`) names, read with `yaml.safe_load` as serve.py reads it: its
`speculative_config` is held to `DecodingBaseConfig`'s checks (`tensorrt_llm/llmapi/llm_args.py`: a known
`decoding_type`, `max_draft_len`, `draft_len_schedule` validated and sorted, `max_concurrency` exclusive with it and
otherwise translated into `{max_concurrency: max_draft_len}`), and a running batch drafts the schedule's length by
`get_draft_len_for_batch_size` (`tensorrt_llm/_torch/speculative/utils.py`, since PR #10860). A file TensorRT-LLM would
refuse makes this server refuse to start. The simulator drafts only the linear-chain types below, and does not serve
TensorRT-LLM's metrics (its /metrics is JSON iteration stats whose fields pivot has not read; /prometheus/metrics
answers 404 here). Serving is the SGLang simulator's engine with uvicorn's log lines.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from console.engines.trtllm import draft_len_at
from console.sim import state
from console.sim.engine import DraftPolicy
from console.sim.launch_server import LaunchError, _log, bind, refused_at_start, run_simulated

READY_LINE = "INFO:     Application startup complete."
DEFAULT_MAX_BATCH = 2048  # the simulator's running limit when --max_batch_size is not given
DEFAULT_MAX_SEQ_LEN = 32768  # the simulated model's context when --max_seq_len is not given
DRAFTING_TYPES = ("Eagle", "Eagle3", "MTP", "NGram", "DraftTarget")  # those drafting a chain of max_draft_len tokens
WITH_MODEL = ("Eagle", "Eagle3", "DraftTarget")  # those with a draft model (speculative_model or speculative_model_dir)


def validate_schedule(schedule: object, max_draft_len: int | None) -> dict[int, int]:
    """`validate_draft_len_schedule_and_sort`, with its messages: sorted by batch."""
    if not isinstance(schedule, Mapping) or not all(isinstance(k, int) and isinstance(v, int) for k, v in schedule.items()):
        raise ValueError("draft_len_schedule: a mapping of integer batch sizes to integer draft lengths")
    for batch_size, draft_len in schedule.items():
        if batch_size < 1:
            raise ValueError(f"draft_len_schedule: batch size threshold must be >= 1, got {batch_size}")
        if draft_len < 0:
            raise ValueError(f"draft_len_schedule: draft length must be >= 0, got {draft_len}")
    smallest = min(schedule)
    if max_draft_len is not None and schedule[smallest] != max_draft_len:
        raise ValueError(
            f"draft_len_schedule[{smallest}] must equal max_draft_len because it is the smallest batch-size key. "
            f"Got schedule[{smallest}]={schedule[smallest]}, but max_draft_len={max_draft_len}."
        )
    if max_draft_len is not None:
        for batch_size, draft_len in schedule.items():
            if draft_len > max_draft_len:
                raise ValueError(
                    "draft_len_schedule: all draft lengths must be <= max_draft_len. "
                    f"Got draft_len={draft_len} for batch_size={batch_size}, but max_draft_len={max_draft_len}."
                )
    return dict(sorted(schedule.items()))


class ScheduledDrafting:
    """A running batch drafts the schedule's length (none above its largest key); no schedule: max_draft_len."""

    def __init__(self, max_draft_len: int, schedule: dict[int, int] | None):
        self.max_draft_len, self.schedule = max_draft_len, schedule

    def steps_for(self, batch: int) -> int:
        return self.max_draft_len if self.schedule is None else draft_len_at(self.schedule, batch)

    def on_verify(self, correct_drafts_per_req: list[int], batch: int) -> None:
        pass


def draft_policy(options: Mapping[str, Any]) -> DraftPolicy | None:
    """The speculative_config's drafting, checked as DecodingBaseConfig checks it; None without one."""
    spec = options.get("speculative_config")
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ValueError("speculative_config: expected a mapping")
    decoding_type = spec.get("decoding_type")
    if decoding_type not in DRAFTING_TYPES:
        raise ValueError(f"Invalid decoding type: {decoding_type} (the simulator drafts {', '.join(DRAFTING_TYPES)})")
    length = spec.get("max_draft_len")
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise ValueError(f"speculative_config.max_draft_len: Input should be greater than or equal to 0, got {length!r}")
    model = spec.get("speculative_model", spec.get("speculative_model_dir"))
    if decoding_type in WITH_MODEL and not (isinstance(model, str) and Path(model).is_dir()):
        raise LaunchError(f"draft model path does not exist: {model}")
    schedule = spec.get("draft_len_schedule")
    most = spec.get("max_concurrency")
    if schedule is not None:
        schedule = validate_schedule(schedule, length)
    if most is not None:
        if isinstance(most, bool) or not isinstance(most, int) or most < 1:
            raise ValueError(f"speculative_config.max_concurrency: Input should be greater than 0, got {most!r}")
        if schedule is not None:
            raise ValueError(
                "max_concurrency and draft_len_schedule are mutually exclusive. Use max_concurrency for a simple "
                "speculation cutoff, or draft_len_schedule for dynamic draft-length control."
            )
        schedule = {most: length}
    return ScheduledDrafting(length, schedule)


def read_options(path: str | None) -> dict[str, Any]:
    """The YAML file, as serve.py reads it (`open` and `yaml.safe_load`: a path is taken as given, ~ included)."""
    if path is None:
        return {}
    with open(path) as f:
        options = yaml.safe_load(f)
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"{path}: the options must be a YAML mapping")
    return options


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trtllm-serve", description="Simulated TensorRT-LLM server (pivot demo host)")
    a = p.add_argument
    a("model")
    a("--host", default="localhost")
    a("--port", type=int, default=8000)
    a("--backend", choices=["pytorch", "tensorrt", "trt", "_autodeploy"], default="pytorch")
    a("--log_level", default="info")
    a("--max_batch_size", type=int)
    a("--max_num_tokens", type=int)
    a("--max_seq_len", type=int)
    a("--tensor_parallel_size", "--tp_size", type=int, default=1, dest="tp_size")
    a("--free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction", type=float, default=0.9, dest="mem_fraction_static")
    a("--trust_remote_code", action="store_true")
    a("--config", "--extra_llm_api_options", dest="options")
    a(
        "--time-scale",
        type=float,
        default=float(os.environ.get("PIVOT_SIM_TIME_SCALE", "1")),
        help="simulation only: run this many times faster than real time",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    args.model_path, args.served_model_name, args.enable_metrics = args.model, args.model, False
    args.nnodes, args.node_rank, args.random_seed = 1, 0, 0
    try:
        home = state.sim_home()
        gpus = state.read_gpus(home)
        if not Path(args.model_path).expanduser().is_dir():
            raise LaunchError(f"model path does not exist or is not a directory: {args.model_path}")
        if args.tp_size > gpus.count:
            raise LaunchError(f"tensor_parallel_size={args.tp_size} needs {args.tp_size} GPUs; this host has {gpus.count}")
        try:
            options = read_options(args.options)
            args.max_running_requests = args.max_batch_size or options.get("max_batch_size") or DEFAULT_MAX_BATCH
            policy = draft_policy(options)
        except (ValueError, OSError, yaml.YAMLError) as e:  # TensorRT-LLM lets these out of its start
            return refused_at_start(e)
        sock = bind(args.host, args.port)
    except (LaunchError, state.SimHomeMissing) as e:
        print(f"ERROR: {e}", file=sys.stderr, flush=True)
        return 1
    server_args = {
        **options,
        "model": args.model_path,
        "model_path": args.model_path,
        "backend": args.backend,
        "max_batch_size": args.max_running_requests,
        "context_length": args.max_seq_len or DEFAULT_MAX_SEQ_LEN,
    }
    _log(f"llm_args: {server_args}")
    return run_simulated(
        args,
        sock,
        gpus,
        home,
        policy,
        server_args,
        loading=["Loading model weights", "Creating KV cache manager", "Capturing CUDA graphs"],
        ready=["INFO:     Started server process", "INFO:     Waiting for application startup.", READY_LINE],
        engine="trtllm",
    )


if __name__ == "__main__":
    raise SystemExit(main())

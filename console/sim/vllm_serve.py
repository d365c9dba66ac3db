"""`python -m console.sim.vllm_serve serve MODEL`: a simulated `vllm serve` (vLLM 0.33.0), for vLLM profiles.

The flags are vLLM's own spellings (`vllm/engine/arg_utils.py`); the speculative config is one JSON string
(`--speculative-config`/`-sc`, parsed with `json.loads` as vLLM's parser does), whose batch-size schedule
`num_speculative_tokens_per_batch_size` is validated and looked up as vLLM does
(`vllm/v1/spec_decode/dynamic/utils.py`, ported below and held to vLLM's own code by the contract tests):
a schedule vLLM refuses makes this server refuse to start the same way. Serving is the SGLang simulator's
engine with vLLM's log lines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from console.engines.vllm import DYNAMIC_METHODS
from console.sim import state
from console.sim.engine import DraftPolicy, StaticDrafting
from console.sim.launch_server import LaunchError, _log, bind, refused_at_start, run_simulated

READY_LINE = "Starting vLLM server on http://{host}:{port}"
DEFAULT_MAX_NUM_SEQS = 1024  # vLLM 0.33's default for an API server on an H100/H200


def validate_schedule(schedule: object) -> list[tuple[int, int, int]]:
    """`validate_and_normalize_dynamic_sd_schedule`, vLLM 0.33.0, with its messages."""
    if schedule is None:
        raise ValueError("num_speculative_tokens_per_batch_size is required for dynamic speculative decoding.")
    if not isinstance(schedule, list):
        raise ValueError(
            "num_speculative_tokens_per_batch_size must be a non-empty list of (range_start, range_end, num_speculative_tokens) entries."
        )
    if not schedule:
        raise ValueError("num_speculative_tokens_per_batch_size must not be empty.")
    parsed = []
    for entry in schedule:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise ValueError(
                "Each num_speculative_tokens_per_batch_size entry must be a 3-item sequence: "
                "(range_start, range_end, num_speculative_tokens)."
            )
        start, end, k = int(entry[0]), int(entry[1]), int(entry[2])
        if start <= 0 or end <= 0:
            raise ValueError(f"Batch-size range ({start}, {end}) must be positive.")
        if start > end:
            raise ValueError(f"Batch-size range start must be <= end for ({start}, {end}, {k}).")
        if k < 0:
            raise ValueError("num_speculative_tokens_per_batch_size values must be >= 0.")
        parsed.append((start, end, k))
    parsed.sort(key=lambda e: e[0])
    previous_end = 0
    for start, end, _ in parsed:
        if start <= previous_end:
            raise ValueError("Batch-size ranges must be non-overlapping and sorted.")
        previous_end = end
    if parsed[0][0] != 1:
        raise ValueError("The first batch-size range must start at 1 so every runtime batch size has a defined schedule.")
    return parsed


def schedule_lookup(schedule: object, max_batch: int, max_tokens: int) -> list[int]:
    """`build_dynamic_sd_schedule_lookup`: K for every batch size 1..max_batch (gaps and the tail carry forward)."""
    parsed = validate_schedule(schedule)
    dense = [0] * (max_batch + 1)
    next_bs, last = 1, None
    for start, end, k in parsed:
        if start > next_bs and last is not None:
            for bs in range(next_bs, min(start, max_batch + 1)):
                dense[bs] = min(max_tokens, last)
        for bs in range(max(start, next_bs), min(end, max_batch) + 1):
            dense[bs] = min(max_tokens, k)
        next_bs, last = max(next_bs, end + 1), k
        if next_bs > max_batch:
            break
    for bs in range(next_bs, max_batch + 1):
        dense[bs] = min(max_tokens, last or 0)
    return dense


class ScheduledDrafting:
    """vLLM's dynamic drafting: K from the dense lookup by the number of scheduled requests."""

    def __init__(self, lookup: list[int]):
        self.lookup = lookup

    def steps_for(self, batch: int) -> int:
        return self.lookup[min(batch, len(self.lookup) - 1)]

    def on_verify(self, correct_drafts_per_req: list[int], batch: int) -> None:
        pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm", description="Simulated vLLM server (pivot demo host)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    a = s.add_argument
    a("model_tag")
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=8000)
    a("--served-model-name")
    a("--trust-remote-code", action="store_true")
    a("--tensor-parallel-size", "-tp", type=int, default=1, dest="tp_size")
    a("--data-parallel-size", "-dp", type=int, default=1)
    a("--gpu-memory-utilization", type=float, default=0.9, dest="mem_fraction_static")
    a("--max-num-seqs", type=int)
    a("--max-model-len", type=int)
    a("--seed", type=int, default=0, dest="random_seed")
    a("--speculative-config", "-sc", type=json.loads)
    a("--master-addr", default="127.0.0.1")
    a("--master-port", type=int, default=29501)
    a("--nnodes", "-n", type=int, default=1)
    a("--node-rank", "-r", type=int, default=0)
    a("--headless", action="store_true")
    a("--spec-method")
    a("--spec-model")
    a("--spec-tokens", type=int)
    a(
        "--time-scale",
        type=float,
        default=float(os.environ.get("PIVOT_SIM_TIME_SCALE", "1")),
        help="simulation only: run this many times faster than real time",
    )
    return p


def speculative_config(args: argparse.Namespace) -> dict[str, Any] | None:
    """`EngineArgs.create_speculative_config`: --spec-* flags folded into the JSON, never both for one key."""
    config = dict(args.speculative_config) if args.speculative_config is not None else None
    for flag, key, value in (
        ("--spec-method", "method", args.spec_method),
        ("--spec-model", "model", args.spec_model),
        ("--spec-tokens", "num_speculative_tokens", args.spec_tokens),
    ):
        if value is None:
            continue
        config = config or {}
        if key in config:
            raise ValueError(f"{flag} and --speculative-config['{key}'] are mutually exclusive")
        config[key] = value
    return None if config is None else {k.replace("-", "_"): v for k, v in config.items()}


def draft_policy(args: argparse.Namespace, config: dict[str, Any] | None, max_num_seqs: int) -> DraftPolicy | None:
    if not config or not (config.get("method") or config.get("model")):
        return None
    if config.get("model") and not Path(str(config["model"])).expanduser().is_dir():
        raise LaunchError(f"draft model path does not exist: {config['model']}")
    k = config.get("num_speculative_tokens")
    if not isinstance(k, int) or k < 1:
        raise ValueError("num_speculative_tokens must be provided with speculative model or method")
    schedule = config.get("num_speculative_tokens_per_batch_size")
    method = str(config.get("method") or "draft_model")
    if schedule is not None and (args.data_parallel_size > 1 or method not in DYNAMIC_METHODS):
        _log(f"WARNING Disabling num_speculative_tokens_per_batch_size and falling back to static num_speculative_tokens={k}.")
        schedule = None
    if schedule is None:
        return StaticDrafting(k)
    return ScheduledDrafting(schedule_lookup(schedule, max_num_seqs, k))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    args.model_path, args.enable_metrics = args.model_tag, True  # vLLM always serves /metrics
    max_num_seqs = args.max_num_seqs or DEFAULT_MAX_NUM_SEQS
    args.max_running_requests = max_num_seqs
    try:
        home = state.sim_home()
        gpus = state.read_gpus(home)
        if not Path(args.model_path).expanduser().is_dir():
            raise LaunchError(f"model path does not exist or is not a directory: {args.model_path}")
        per_node = args.tp_size // args.nnodes
        if per_node > gpus.count:
            raise LaunchError(f"tensor_parallel_size={args.tp_size} needs {per_node} GPUs on each node; this host has {gpus.count}")
        args.rendezvous = f"{args.master_addr}:{args.master_port}"
        try:
            multinode(args)
            config = speculative_config(args)
            policy = draft_policy(args, config, max_num_seqs)
        except ValueError as e:  # vLLM lets these out of its engine start
            return refused_at_start(e)
        sock = bind(args.host, args.port) if args.node_rank == 0 else None  # above 0: headless, no API server
    except (LaunchError, state.SimHomeMissing) as e:
        print(f"ERROR: {e}", file=sys.stderr, flush=True)
        return 1
    server_args = {
        "model": args.model_path,
        "served_model_name": args.served_model_name or args.model_path,
        "tensor_parallel_size": args.tp_size,
        "max_num_seqs": max_num_seqs,
        "speculative_config": config,
        "max_running_requests": max_num_seqs,
        "version": "0.33.0-pivot-sim",
    }
    _log(f"non-default args: {server_args}")
    return run_simulated(
        args,
        sock,
        gpus,
        home,
        policy,
        server_args,
        loading=[
            "Loading weights took 4.2 seconds",
            "Memory profiling takes 3.1 seconds",
            "Graph capturing finished in 5 secs",
            "init engine (profile, create kv cache, warmup model) took 12.3 seconds",
        ],
        ready=[READY_LINE],
        engine="vllm",
    )


def multinode(args: argparse.Namespace) -> None:
    """EngineArgs' checks of --nnodes and --node-rank (vllm/engine/arg_utils.py, 0.33.0), with its words (only TP is
    simulated: the world size is the TP size times the DP size)."""
    if args.nnodes <= 1:
        return
    world_size = args.data_parallel_size * args.tp_size
    if world_size % args.nnodes != 0:
        raise ValueError(
            f"Invalid data-parallel launch options: `--nnodes {args.nnodes}` must evenly divide the total "
            f"world size ({world_size}). Adjust `--nnodes`, `--data-parallel-size`, "
            "`--pipeline-parallel-size`, `--tensor-parallel-size`, or `--prefill-context-parallel-size`."
        )
    if not 0 <= args.node_rank < args.nnodes:
        raise ValueError(
            f"Invalid data-parallel launch options: `--node-rank` must be between 0 and {args.nnodes - 1}; "
            f"got `--node-rank {args.node_rank}`. Set it to this node's zero-based index."
        )


if __name__ == "__main__":
    raise SystemExit(main())

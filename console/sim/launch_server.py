"""`python -m console.sim.launch_server`: a simulated `python -m sglang.launch_server`.

It takes the SGLang flags the profiles use, fails as SGLang would on a bad
flag, a missing model or a port in use, starts one worker process per TP
rank, answers /health with 503 while "loading the weights", logs SGLang's
ready line, then serves the OpenAI API with the calibrated batching model.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import uvicorn

from console.engines.sglang import adaptive_unsupported, capture_sizes, default_max_bs
from console.sim import state
from console.sim.adaptive import AdaptiveParams, candidate_steps_of
from console.sim.calibration import DEFAULT
from console.sim.engine import BatchScheduler, DraftPolicy, StaticDrafting
from console.sim.openai_app import EngineLoop, OwnSignals, SimServer
from console.sim.ranks import Leader, run_follower

READY_LINE = "The server is fired up and ready to roll!"
DEFAULT_MAX_RUNNING = 256  # the simulated engine's running limit when --max-running-requests is not given


def build_parser() -> argparse.ArgumentParser:
    """SGLang 0.5.23's spelling of every flag the simulator takes (the contract tests check each against the
    release's own argument definitions); argparse's prefix matching is left on as SGLang leaves it, so
    `--tp` is `--tp-size` and `--cuda-graph-max-bs` is refused as ambiguous, as the real server does."""
    p = argparse.ArgumentParser(prog="launch_server", description="Simulated SGLang server (pivot demo host)")
    a = p.add_argument
    a("--model-path", "--model", required=True)
    a("--tokenizer-path")
    a("--served-model-name")
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--tp-size", "--tensor-parallel-size", type=int, default=1, dest="tp_size")
    a("--dp-size", "--data-parallel-size", type=int, default=1, dest="dp_size")
    a("--enable-dp-attention", action="store_true")
    a("--trust-remote-code", action="store_true")
    a("--context-length", type=int, default=131072)
    a("--mem-fraction-static", type=float, default=0.85)
    a("--max-running-requests", type=int)
    a("--cuda-graph-max-bs-decode", type=int)
    a("--cuda-graph-max-bs-prefill", type=int)
    a("--cuda-graph-bs-decode", type=int, nargs="+")
    a("--disable-cuda-graph", action="store_true")
    a("--disable-cuda-graph-padding", action="store_true")
    a("--disable-custom-all-reduce", action="store_true")
    a("--disable-radix-cache", action="store_true")
    a("--attention-backend", choices=["triton", "torch_native", "fa3", "fa4", "flashinfer", "flashmla", "trtllm_mla", "trtllm_mha"])
    a("--enable-flashinfer-allreduce-fusion", action="store_true")
    a("--flashinfer-allreduce-fusion-backend", choices=["auto", "trtllm", "mnnvl", "cutedsl"])
    a("--speculative-algorithm")
    a("--speculative-draft-model-path", "--speculative-draft-model")
    a("--speculative-num-steps", type=int)
    a("--speculative-eagle-topk", type=int)
    a("--speculative-num-draft-tokens", type=int)
    a("--speculative-adaptive", action="store_true")
    a("--speculative-adaptive-config")
    a("--enable-metrics", action="store_true")
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr")
    a("--log-level", default="info")
    a("--random-seed", type=int, default=0)
    a(
        "--time-scale",
        type=float,
        default=float(os.environ.get("PIVOT_SIM_TIME_SCALE", "1")),
        help="simulation only: run this many times faster than real time",
    )
    return p


class LaunchError(Exception):
    pass


def _log(message: str, rank: int | None = None) -> None:
    where = "" if rank is None else f" TP{rank}"
    sys.stdout.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}{where}] {message}\n")  # one write: the ranks share the log
    sys.stdout.flush()


SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")


def decode_graph_sizes(args: argparse.Namespace, gpus: state.GpuSpec) -> list[int] | None:
    """The decode CUDA-graph batch sizes SGLang would capture (None: graphs off, no padding)."""
    if args.disable_cuda_graph:
        return None
    if args.cuda_graph_bs_decode:
        return sorted(args.cuda_graph_bs_decode)
    max_bs = args.cuda_graph_max_bs_decode
    if max_bs is None:
        max_bs = default_max_bs(gpus.memory_mib, args.tp_size)
        if args.max_running_requests is not None:
            max_bs = min(max_bs, args.max_running_requests)
    return capture_sizes(max_bs, speculative=bool(args.speculative_algorithm), padding=not args.disable_cuda_graph_padding)


def draft_policy(args: argparse.Namespace, argv: list[str], graph_sizes: list[int] | None) -> DraftPolicy | None:
    """Speculation as SGLang 0.5.23 resolves it (speculative_hook.py): adaptive mode switched off with a warning
    where it is unsupported, its config refused with SGLang's own ValueError, the step count checked against it."""
    algorithm = args.speculative_algorithm
    if not algorithm:
        return None
    if algorithm.upper() not in SPEC_ALGORITHMS:
        raise ValueError(f"Unknown speculative algorithm name: {algorithm}")
    if not args.speculative_draft_model_path and algorithm.upper() not in ("NGRAM", "NEXTN"):
        raise LaunchError("--speculative-draft-model-path is required with --speculative-algorithm " + algorithm)
    if args.speculative_draft_model_path and not Path(args.speculative_draft_model_path).expanduser().is_dir():
        raise LaunchError(f"draft model path does not exist: {args.speculative_draft_model_path}")
    adaptive = args.speculative_adaptive
    if adaptive and (reason := adaptive_unsupported(argv)):
        _log(f"WARNING speculative_adaptive disabled: {reason}. Falling back to static speculative params.")
        adaptive = False
    steps = args.speculative_num_steps
    if not adaptive:
        return StaticDrafting(DEFAULT.default_num_steps if steps is None else steps)
    candidates = candidate_steps_of(args.speculative_adaptive_config)
    if steps is None:
        steps = candidates[len(candidates) // 2]
    if steps not in candidates:
        raise ValueError(
            f"--speculative-num-steps={steps} is not in the adaptive config candidate_steps {candidates}. Pass one of those values."
        )
    return AdaptiveParams(steps, args.speculative_adaptive_config, graph_sizes)


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        why = (e.strerror or str(e)).lower()
        raise LaunchError(f"[Errno {e.errno}] error while attempting to bind on address {(host, port)}: {why}") from None
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def start_workers(args: argparse.Namespace, gpus: state.GpuSpec) -> list[subprocess.Popen[bytes]]:
    """This node's share of the TP ranks (all of them on one node), one per GPU from GPU 0."""
    mib = int(gpus.memory_mib * args.mem_fraction_static)
    workers = []
    per_node = args.tp_size // args.nnodes
    for gpu in range(per_node):
        rank = args.node_rank * per_node + gpu
        argv = [
            sys.executable,
            "-m",
            "console.sim.worker",
            "--rank",
            str(rank),
            "--gpu",
            str(gpu),
            "--mib",
            str(mib),
            "--server-pid",
            str(os.getpid()),
        ]
        if rank == DEFAULT.zombie_rank:
            argv += ["--zombie-helper-mib", str(DEFAULT.zombie_mib)]
        workers.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL))
    return workers


SGLANG_LOADING = [
    "Load weight end. type=DeepseekV3ForCausalLM",
    "KV Cache is allocated.",
    "Capture cuda graph begin. This can take up to several minutes.",
    "Capture cuda graph end.",
]


async def serve(
    args: argparse.Namespace,
    sock: socket.socket,
    home: Path,
    policy: DraftPolicy | None,
    server_args: dict[str, Any],
    *,
    loading: list[str],
    ready: list[str],
    engine: str = "sglang",
) -> str:
    """Serve until a signal; returns the signal's name ("peer-lost" when another node's rank ended without rank 0's
    word). args: tp_size, host, port, served_model_name, model_path, enable_metrics, random_seed, time_scale,
    max_running_requests, nnodes and rendezvous, as the engine's own flags set them."""
    gpus = list(range(args.tp_size // args.nnodes))
    last_publish = [0.0, -1, -1]

    def publish(running: int, queued: int) -> None:
        now = time.monotonic()
        if (running, queued) != tuple(last_publish[1:]) and (now - last_publish[0] > 0.25 or running == 0):
            state.publish_server(home, gpus, running, queued)
            last_publish[:] = [now, running, queued]

    scheduler = BatchScheduler(DEFAULT, spec=policy, max_running=args.max_running_requests or DEFAULT_MAX_RUNNING, seed=args.random_seed)
    engine_loop = EngineLoop(scheduler, time_scale=args.time_scale, on_change=publish)
    sim = SimServer(engine_loop, server_args, args.served_model_name or args.model_path, args.enable_metrics, engine, log=_log)
    config = uvicorn.Config(sim.app, log_level="warning", access_log=False, lifespan="off")
    server = OwnSignals(config)  # we handle SIGTERM ourselves: see below
    received: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        server.should_exit = True

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    engine_task = asyncio.create_task(engine_loop.run())
    serve_task = asyncio.create_task(server.serve(sockets=[sock]))
    await asyncio.sleep(0)
    state.publish_server(home, gpus, 0, 0)
    leader = Leader(args.nnodes, _log)
    if args.nnodes > 1:
        _log(f"Init torch distributed begin. nnodes={args.nnodes}, waiting for the other nodes at {args.rendezvous}")
        await leader.listen(args.rendezvous)
        while not received and not leader.all_in.is_set() and not leader.lost.is_set():
            await asyncio.sleep(0.1)
        _log("Init torch distributed ends.")
    load_s = DEFAULT.load_seconds / args.time_scale
    for rank in range(len(gpus)):
        avail_gb = int(state.read_gpus(home).memory_mib / 1024)
        _log(f"Load weight begin. avail mem={avail_gb} GB", rank)
    for i, message in enumerate(loading):
        await _sleep_unless(load_s / len(loading), received)
        _log(f"TP0 {message}" if i < len(loading) - 1 else message)
    if not received and not leader.lost.is_set():
        sim.ready = True
        for line in ready:
            _log(line.format(host=args.host, port=args.port))
    while not received and not serve_task.done() and not leader.lost.is_set():
        await asyncio.sleep(0.1)
    if leader.lost.is_set() and not received:
        _log(
            f"Scheduler hit an exception: RuntimeError: the process group lost node_rank {leader.lost_rank} "
            "(its connection closed without a shutdown)"
        )
        received.append("peer-lost")
    else:
        leader.shutdown()
    server.should_exit = True
    await serve_task
    engine_task.cancel()
    return received[0] if received else "exit"


async def _sleep_unless(seconds: float, received: list[str]) -> None:
    end = time.monotonic() + seconds
    while not received and time.monotonic() < end:
        await asyncio.sleep(min(0.05, end - time.monotonic()))


def resolved_args(args: argparse.Namespace, policy: DraftPolicy | None, graph_sizes: list[int] | None) -> dict[str, Any]:
    """What /server_info reports: the arguments as resolution left them, SGLang 0.5.23's field names."""
    resolved = {
        k: v
        for k, v in vars(args).items()
        if k not in ("time_scale", "rendezvous", "cuda_graph_max_bs_decode", "cuda_graph_max_bs_prefill", "cuda_graph_bs_decode")
    }
    resolved["served_model_name"] = args.served_model_name or args.model_path
    resolved["tokenizer_path"] = args.tokenizer_path or args.model_path
    resolved["max_running_requests"] = args.max_running_requests or DEFAULT_MAX_RUNNING
    resolved["speculative_adaptive"] = isinstance(policy, AdaptiveParams)
    if isinstance(policy, StaticDrafting):
        resolved["speculative_num_steps"] = policy.num_steps
    decode: dict[str, Any] = {"backend": "disabled"} if graph_sizes is None else {"max_bs": graph_sizes[-1], "bs": graph_sizes}
    resolved["cuda_graph_config"] = {"decode": decode, "prefill": {}}
    return resolved


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    try:
        home = state.sim_home()
        gpus = state.read_gpus(home)
        if not Path(args.model_path).expanduser().is_dir():
            raise LaunchError(f"model path does not exist or is not a directory: {args.model_path}")
        if args.tp_size % args.nnodes:  # SGLang 0.5.23's own assertion: srt/arg_groups/validation_hook.py
            return refused_at_start(AssertionError("tp_size must be divisible by number of nodes"))
        if args.tp_size // args.nnodes > gpus.count:
            raise LaunchError(
                f"tp_size={args.tp_size} needs {args.tp_size // args.nnodes} GPUs on each of "
                f"{args.nnodes} node(s) but this host has {gpus.count}"
            )
        args.rendezvous = args.dist_init_addr or "127.0.0.1:0"  # no address: the other nodes never arrive
        graph_sizes = decode_graph_sizes(args, gpus)
        try:
            policy = draft_policy(args, argv, graph_sizes)
        except (ValueError, OSError) as e:  # SGLang lets these out of its argument resolution
            return refused_at_start(e)
        sock = bind(args.host, args.port) if args.node_rank == 0 else None  # a rank above 0 serves no API
    except (LaunchError, state.SimHomeMissing) as e:
        print(f"ERROR: {e}", file=sys.stderr, flush=True)
        return 1
    server_args = resolved_args(args, policy, graph_sizes)
    _log(f"server_args=ServerArgs({', '.join(f'{k}={v!r}' for k, v in server_args.items())})")
    return run_simulated(
        args,
        sock,
        gpus,
        home,
        policy,
        server_args,
        loading=SGLANG_LOADING,
        ready=["INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)", READY_LINE],
    )


def run_simulated(
    args: argparse.Namespace,
    sock: socket.socket | None,
    gpus: state.GpuSpec,
    home: Path,
    policy: DraftPolicy | None,
    server_args: dict[str, Any],
    *,
    loading: list[str],
    ready: list[str],
    engine: str = "sglang",
) -> int:
    """Workers, the server until a signal (a rank above 0: until rank 0 ends it), and a shutdown that leaves behind
    what a real engine's does."""
    workers = start_workers(args, gpus)
    if sock is None:
        reason = asyncio.run(
            run_follower(
                args.rendezvous,
                args.node_rank,
                engine=engine,
                host=args.host,
                port=args.port,
                ready_lines=loading[-1:],
                load_s=DEFAULT.load_seconds / args.time_scale,
                log=_log,
            )
        )
    else:
        reason = asyncio.run(serve(args, sock, home, policy, server_args, loading=loading, ready=ready, engine=engine))
    if reason in ("peer-lost", "leader-lost"):  # a failed collective: the process ends, its workers stay behind
        if reason == "leader-lost":
            _log("Scheduler hit an exception: RuntimeError: the process group lost node_rank 0")
        (home / "servers" / f"{os.getpid()}.json").unlink(missing_ok=True)
        return 1
    _log(f"Received {reason}, shutting down")
    # A stop that reaches only this process leaves some workers behind, as SGLang
    # sometimes does; a stop of the whole process group takes them all, as does rank 0's
    # shutdown of another node's rank (it reaches every scheduler).
    leaked = set(DEFAULT.leaked_on_term) if reason != "shutdown" else set()
    for rank, worker in enumerate(workers):
        if rank not in leaked:
            worker.terminate()
    for rank, worker in enumerate(workers):
        if rank not in leaked:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=5)
    (home / "servers" / f"{os.getpid()}.json").unlink(missing_ok=True)
    return 0


def refused_at_start(e: BaseException) -> int:
    """An engine that lets an exception out of its start: a traceback's last lines on stderr, exit status 1."""
    print(f'Traceback (most recent call last):\n  File "<engine start>", in <module>\n{type(e).__name__}: {e}', file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())

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
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

from console.sim import state
from console.sim.calibration import DEFAULT
from console.sim.engine import BatchScheduler, SpecConfig
from console.sim.openai_app import EngineLoop, SimServer

READY_LINE = "The server is fired up and ready to roll!"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launch_server", description="Simulated SGLang server (pivot demo host)")
    a = p.add_argument
    a("--model-path", "--model", required=True)
    a("--tokenizer-path")
    a("--served-model-name")
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--tp-size", "--tp", type=int, default=1, dest="tp_size")
    a("--dp-size", "--dp", type=int, default=1, dest="dp_size")
    a("--trust-remote-code", action="store_true")
    a("--context-length", type=int, default=131072)
    a("--mem-fraction-static", type=float, default=0.85)
    a("--max-running-requests", type=int, default=256)
    a("--cuda-graph-max-bs", type=int, default=160)
    a("--disable-cuda-graph", action="store_true")
    a("--disable-custom-all-reduce", action="store_true")
    a("--disable-radix-cache", action="store_true")
    a("--attention-backend", choices=["flashinfer", "fa3", "triton", "torch_native", "flashmla", "trtllm_mla"])
    a("--enable-flashinfer-allreduce-fusion", action="store_true")
    a("--speculative-algorithm", choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"])
    a("--speculative-draft-model-path")
    a("--speculative-num-steps", type=int)
    a("--speculative-eagle-topk", type=int)
    a("--speculative-num-draft-tokens", type=int)
    a("--speculative-adaptive", action="store_true")
    a("--speculative-adaptive-config")
    a("--enable-metrics", action="store_true")
    a("--log-level", default="info")
    a("--random-seed", type=int, default=0)
    a("--time-scale", type=float, default=float(os.environ.get("PIVOT_SIM_TIME_SCALE", "1")),
      help="simulation only: run this many times faster than real time")
    return p


class LaunchError(Exception):
    pass


def _log(message: str) -> None:
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {message}", flush=True)


def spec_config(args: argparse.Namespace) -> SpecConfig | None:
    if not args.speculative_algorithm:
        return None
    if not args.speculative_draft_model_path and args.speculative_algorithm != "NGRAM":
        raise LaunchError("--speculative-draft-model-path is required with --speculative-algorithm " + args.speculative_algorithm)
    if args.speculative_draft_model_path and not Path(args.speculative_draft_model_path).expanduser().is_dir():
        raise LaunchError(f"draft model path does not exist: {args.speculative_draft_model_path}")
    steps = DEFAULT.default_num_steps if args.speculative_num_steps is None else args.speculative_num_steps
    off_from: int | None = None
    if args.speculative_adaptive:
        off_from = DEFAULT.adaptive_off_batch
        if args.speculative_adaptive_config:
            off_from = _adaptive_off_batch(args.speculative_adaptive_config)
    return SpecConfig(num_steps=steps, adaptive=args.speculative_adaptive, off_from_batch=off_from)


def _adaptive_off_batch(path: str) -> int | None:
    """The running batch size from which the adaptive config turns drafting off.

    The config is what `pivot compare` writes: {"batch_size_tiers": [{"min_batch_size": N,
    "candidate_steps": [steps, ...]}, ...]}; a tier whose candidate steps are [0] stops drafting.
    """
    try:
        tiers = json.loads(Path(path).expanduser().read_text())["batch_size_tiers"]
        off = [int(t["min_batch_size"]) for t in tiers if list(t["candidate_steps"]) == [0]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise LaunchError(f"--speculative-adaptive-config {path}: {e}") from None
    return min(off) if off else None


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise LaunchError(f"[Errno {e.errno}] error while attempting to bind on address {(host, port)}: {e.strerror.lower()}") from None
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


def start_workers(args: argparse.Namespace, gpus: state.GpuSpec) -> list[subprocess.Popen[bytes]]:
    mib = int(gpus.memory_mib * args.mem_fraction_static)
    workers = []
    for rank in range(args.tp_size):
        argv = [sys.executable, "-m", "console.sim.worker", "--rank", str(rank), "--gpu", str(rank),
                "--mib", str(mib), "--server-pid", str(os.getpid())]
        if rank == DEFAULT.zombie_rank:
            argv += ["--zombie-helper-mib", str(DEFAULT.zombie_mib)]
        workers.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL))
    return workers


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # we handle SIGTERM ourselves: see serve()
        yield


async def serve(args: argparse.Namespace, sock: socket.socket, home: Path) -> str:
    """Serve until a signal; returns the signal's name."""
    gpus = list(range(args.tp_size))
    last_publish = [0.0, -1, -1]

    def publish(running: int, queued: int) -> None:
        now = time.monotonic()
        if (running, queued) != tuple(last_publish[1:]) and (now - last_publish[0] > 0.25 or running == 0):
            state.publish_server(home, gpus, running, queued)
            last_publish[:] = [now, running, queued]

    scheduler = BatchScheduler(DEFAULT, spec=spec_config(args), max_running=args.max_running_requests, seed=args.random_seed)
    engine = EngineLoop(scheduler, time_scale=args.time_scale, on_change=publish)
    sim = SimServer(engine, resolved_args(args), args.served_model_name or args.model_path, args.enable_metrics)
    config = uvicorn.Config(sim.app, log_level="warning", access_log=False, lifespan="off")
    server = _Server(config)
    received: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        server.should_exit = True

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    engine_task = asyncio.create_task(engine.run())
    serve_task = asyncio.create_task(server.serve(sockets=[sock]))
    await asyncio.sleep(0)
    state.publish_server(home, gpus, 0, 0)
    load_s = DEFAULT.load_seconds / args.time_scale
    for rank in range(args.tp_size):
        print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')} TP{rank}] Load weight begin. avail mem={int(state.read_gpus(home).memory_mib / 1024)} GB", flush=True)
    for fraction, message in ((0.6, "Load weight end. type=DeepseekV3ForCausalLM"), (0.8, "KV Cache is allocated."),
                              (0.9, "Capture cuda graph begin. This can take up to several minutes."), (1.0, "Capture cuda graph end.")):
        await _sleep_unless(load_s * 0.25, received)
        _log(f"TP0 {message}" if fraction < 1 else message)
    if not received:
        sim.ready = True
        _log(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
        _log(READY_LINE)
    while not received and not serve_task.done():
        await asyncio.sleep(0.1)
    server.should_exit = True
    await serve_task
    engine_task.cancel()
    return received[0] if received else "exit"


async def _sleep_unless(seconds: float, received: list[str]) -> None:
    end = time.monotonic() + seconds
    while not received and time.monotonic() < end:
        await asyncio.sleep(min(0.05, end - time.monotonic()))


def resolved_args(args: argparse.Namespace) -> dict[str, Any]:
    resolved = {k: v for k, v in vars(args).items() if k != "time_scale"}
    resolved["served_model_name"] = args.served_model_name or args.model_path
    resolved["tokenizer_path"] = args.tokenizer_path or args.model_path
    return resolved


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        home = state.sim_home()
        gpus = state.read_gpus(home)
        if not Path(args.model_path).expanduser().is_dir():
            raise LaunchError(f"model path does not exist or is not a directory: {args.model_path}")
        if args.tp_size > gpus.count:
            raise LaunchError(f"tp_size={args.tp_size} needs {args.tp_size} GPUs but this host has {gpus.count}")
        spec_config(args)
        sock = bind(args.host, args.port)
    except (LaunchError, state.SimHomeMissing) as e:
        print(f"ERROR: {e}", file=sys.stderr, flush=True)
        return 1
    _log(f"server_args=ServerArgs({', '.join(f'{k}={v!r}' for k, v in resolved_args(args).items())})")
    workers = start_workers(args, gpus)
    reason = asyncio.run(serve(args, sock, home))
    _log(f"Received {reason}, shutting down")
    # A stop that reaches only this process leaves some workers behind, as SGLang
    # sometimes does; a stop of the whole process group takes them all.
    leaked = set(DEFAULT.leaked_on_term)
    for rank, worker in enumerate(workers):
        if rank not in leaked:
            worker.terminate()
    for rank, worker in enumerate(workers):
        if rank not in leaked:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=5)
    (home / "servers" / f"{os.getpid()}.json").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

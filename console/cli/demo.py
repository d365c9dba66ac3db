"""`pivot demo`: a simulated GPU host on loopback, and the console on it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from console import config
from console.cli.console import open_console


def cmd_demo(args: argparse.Namespace) -> int:
    from console.sim.host import SimHost, serve_forever
    from console.sim.state import GpuSpec

    root = args.dir or Path(tempfile.mkdtemp(prefix="pivot-demo-"))
    if args.serve:
        host = SimHost(root, gpus=GpuSpec(count=args.gpus), time_scale=args.time_scale, subreaper=True)
        asyncio.run(serve_forever(host, initial_server=args.server, traffic=args.traffic))
        return 0
    # The host runs in its own process, as a remote host would: it adopts and reaps
    # the simulated server's orphans without touching the console's own children.
    argv = [sys.executable, "-m", "console", "demo", "--serve", "--dir", str(root), "--gpus", str(args.gpus),
            "--time-scale", str(args.time_scale), "--server", args.server, *([] if args.traffic else ["--no-traffic"])]
    # a closed terminal or tmux window must still end the host and remove its files
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log = open(root / "host.log", "w")
    host_proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
    try:
        lines = [host_proc.stdout.readline() for _ in range(2)] if host_proc.stdout else []
        config_line = next((line for line in lines if line.startswith("config: ")), None)
        if config_line is None:
            print(f"pivot: the simulated host did not start; see {root / 'host.log'}", file=sys.stderr)
            return 1
        cfg = config.load(config_line.removeprefix("config: ").strip())
        return open_console(cfg, "demo", args.theme, readonly=args.readonly)
    finally:
        host_proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            host_proc.wait(timeout=10)
        if host_proc.poll() is None:
            host_proc.kill()
        log.close()
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)

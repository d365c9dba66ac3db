"""`sample`: a line of GPUs and their processes per interval, until the console closes the channel."""

from __future__ import annotations

import argparse
import os
import select
import signal
import socket
import sys
import time

from .procs import boot_time, proc_details, server_info
from .sources import NoDriver, NvitopSource, SmiSource, pick_source
from .wire import emit


def collect(source: NvitopSource | SmiSource, btime: float, pidfile: str | None) -> dict:
    gpus, procs = source.sample()
    for p in procs:
        p.update(proc_details(p["pid"], btime))
    line = {"type": "sample", "t": round(time.time(), 3), "gpus": gpus, "procs": procs, "server": server_info(pidfile)}
    warnings = getattr(source, "warnings", None)
    if warnings:
        line["warnings"] = warnings[:8]
    return line


def console_gone(stdin: int | None, seconds: float) -> bool:
    """Wait up to `seconds`; True as soon as stdin (the channel to the console) reaches end of file."""
    if stdin is None:
        time.sleep(seconds)
        return False
    ready, _, _ = select.select([stdin], [], [], seconds)
    return bool(ready) and not os.read(stdin, 4096)  # the console never writes: what comes is the end


def run_sample(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # the console went away: end quietly
    try:
        stdin = sys.stdin.fileno() if not args.once else None
    except (AttributeError, OSError, ValueError):  # no stdin at all: nothing to watch
        stdin = None
    source = pick_source(args.source)
    emit(
        {
            "type": "hello",
            "source": source.name,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "interval": args.interval,
            "python": sys.version.split()[0],
        }
    )
    btime = boot_time()
    while True:
        started = time.monotonic()
        try:
            emit(collect(source, btime, args.server_pidfile))
        except NoDriver as e:
            emit({"type": "error", "kind": "no-driver", "message": str(e)})
        except Exception as e:  # report and keep sampling: a transient failure must not end the stream
            emit({"type": "error", "kind": "query-failed", "message": "%s: %s" % (type(e).__name__, e)})
        if args.once:
            return 0
        while (left := started + args.interval - time.monotonic()) > 0:
            if console_gone(stdin, left):
                return 0

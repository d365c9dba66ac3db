"""The load generator on the GPU host itself, next to the server: no SSH forward and no jump host between client and
server. Uploaded with what it needs as one zipapp (console/zipapp.py) and run with the host's python by
console/sweep/loadgen/__main__.py, which keeps the run and the events.

    python pivot_loadgen_HASH.pyz --port PORT
    python pivot_loadgen_HASH.pyz --fetch TOKEN --after SEQ

stdin: one JSON line (settings, prompts, headers, kind, done, repeat, the server's address, a spool token), then
`stop` for "after the current level", `abort` for now (as SIGTERM), `ack` once the console has the last event. stdout:
the events, one JSON line each, numbered (`seq`). Each is also appended to sweeps/TOKEN.jsonl in the workdir, the
spool: when stdin ends without `abort` (the link to the console was lost), the level in progress is measured to its
end, no other is begun, and the spool stays for the console to fetch (`--fetch`: its events after SEQ, then whether
the generator still runs) once the link is back. An acknowledged or aborted sweep removes its spool.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import gc
import os
import re
import signal
import sys
import time
from typing import IO

import orjson

from console.settings import level_name
from console.sweep.loadgen.generator import POWER_QUERY, client_placement, gpu_watts, gpus_here, sweep
from console.sweep.model import Event, HostOrder, LevelDone, LevelProgress, LevelStarted, Said, SweepDone, dumped

ORDER_LIMIT = 1 << 26  # the first line carries the prompts
SPOOLS = "sweeps"  # in the workdir, this process's cwd
SPOOL_TOKEN = re.compile(r"[0-9a-f]{32}")
SPOOL_DAYS = 14  # a spool nobody fetched (the console never came back) is removed by a later sweep after this
ACK_WAIT_S = 30.0


def spool_path(token: str) -> str:
    if not SPOOL_TOKEN.fullmatch(token):
        raise ValueError(f"not a spool token: {token!r}")
    return f"{SPOOLS}/{token}.jsonl"


class Spool:
    """The events, also in a file of the host's own, for a console whose link was lost. Locked (flock) while this
    process lives: whoever gets the lock knows the file is complete. Created exclusively, never through a symlink."""

    def __init__(self, token: str):
        os.makedirs(SPOOLS, mode=0o700, exist_ok=True)
        self.path = spool_path(token)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.file: IO[bytes] = os.fdopen(fd, "ab", buffering=0)
        _remove_stale_spools()

    def write(self, line: bytes) -> None:
        self.file.write(line)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def _remove_stale_spools() -> None:
    cutoff = time.time() - SPOOL_DAYS * 86400
    with contextlib.suppress(OSError), os.scandir(SPOOLS) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)


def fetch(token: str, after: int) -> int:
    """The spool's events after `after`, then {"type": "spool", "running": …}: whether its generator still runs (when
    it does not, every event it will ever write is above). {"type": "spool", "gone": true} when there is none."""
    out = sys.stdout.buffer
    try:
        fd = os.open(spool_path(token), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        out.write(orjson.dumps({"type": "spool", "gone": True}) + b"\n")
        return 0
    with os.fdopen(fd, "rb") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            running = False
        except BlockingIOError:
            running = True
        for line in f:
            if not line.endswith(b"\n"):
                break  # being written
            with contextlib.suppress(orjson.JSONDecodeError, TypeError, ValueError):
                if int(orjson.loads(line).get("seq", -1)) > after:
                    out.write(line)
    out.write(orjson.dumps({"type": "spool", "running": running}) + b"\n")
    return 0


class PipeSink:
    """Events to stdout without ever blocking the loop: a link to the console that stalls (a full SSH window) would
    otherwise stop this process mid-level and stamp every chunk late. What the link cannot take yet waits here, in
    memory (a level's events at most), and goes when it can."""

    def __init__(self, transport: asyncio.WriteTransport, spool: Spool):
        self.transport, self.spool, self.seq = transport, spool, 0
        self.orphaned: str | None = None  # why nobody reads the pipe any more
        self.level: str | None = None  # the level in progress, named (C=4, 2 req/s)

    def emit(self, event: Event) -> None:
        self.seq += 1
        if isinstance(event, LevelStarted | LevelDone):
            self.level = level_name(event.c, event.rate is not None) if isinstance(event, LevelStarted) else None
        elif isinstance(event, SweepDone) and self.orphaned and not event.failed:
            event = event.model_copy(update={"failed": self.orphaned})
        line = orjson.dumps({**dumped(event), "seq": self.seq}, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
        self.spool.write(line)
        self.show_line(line)

    def show(self, event: LevelProgress | Said) -> None:
        self.show_line(orjson.dumps(event.model_dump(), option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE))

    def show_line(self, line: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(line)

    def lost(self) -> None:
        then = (
            f" during {self.level}: the host measured that level to its end and began no other"
            if self.level
            else ": the host began no other level"
        )
        self.orphaned = f"the link to the console was lost{then}"

    def sync(self) -> None:
        """The run is kept on the console's side."""

    async def drained(self, within_s: float) -> None:
        deadline = asyncio.get_running_loop().time() + within_s
        busy = self.transport.get_write_buffer_size
        while busy() and not self.orphaned and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)  # (a pipe transport says when its buffer is low, not when it is empty)


async def run(port: int) -> int:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, task.cancel)
    stdin = asyncio.StreamReader(limit=ORDER_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    order = HostOrder.model_validate(orjson.loads(await stdin.readline()), strict=False)
    stop, acked, gone = asyncio.Event(), asyncio.Event(), asyncio.Event()
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    sink = PipeSink(transport, Spool(str(order.spool)))

    async def listen() -> None:
        while line := await stdin.readline():
            word = line.strip()
            if word == b"stop":
                stop.set()
            elif word == b"ack":
                acked.set()
            elif word == b"gone":  # the console saw the server's process end
                gone.set()
            elif word == b"abort":
                task.cancel()
                return
        if not acked.is_set():  # stdin ended unasked: the link was lost; keep what this level measures
            sink.lost()
            stop.set()

    listener = asyncio.create_task(listen())
    try:
        address = order.address or "127.0.0.1"  # a Slurm job's first node, seen from its login node
        host = f"[{address}]" if ":" in address else address
        status = await sweep(
            f"http://{host}:{port}",
            sink,
            order.settings,
            pool=order.prompts,
            answers=order.answers or None,
            headers=order.headers,
            done=set(order.done),
            repeat=order.repeat or None,
            top_up=order.top_up,
            sent=order.sent,
            stop_after_level=stop,
            server_gone=gone,
            kind=order.kind,
            nodes=order.nodes,
            placement=client_placement("on-host"),
            power=local_power if gpus_here(order.address, order.nodes) else None,
        )
        await sink.drained(float("inf"))
        ack = asyncio.ensure_future(acked.wait())
        await asyncio.wait({ack, listener}, timeout=ACK_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        ack.cancel()
        return status
    except asyncio.CancelledError:
        sink.emit(SweepDone(aborted=True))
        await sink.drained(5.0)
        return 130
    finally:
        listener.cancel()
        if acked.is_set() or not sink.orphaned:  # else the console fetches it when the link is back
            sink.spool.remove()


async def local_power() -> float | None:
    """This host's GPUs' power, from its nvidia-smi (None: none, or no reading)."""
    try:
        proc = await asyncio.create_subprocess_exec(*POWER_QUERY, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    except OSError:
        return None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 10)
    except (TimeoutError, asyncio.CancelledError) as e:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        if isinstance(e, asyncio.CancelledError):
            raise
        return None
    return gpu_watts(out.decode(errors="replace")) if proc.returncode == 0 else None


def main() -> int:
    parser = argparse.ArgumentParser(prog="pivot-loadgen-on-host")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--port", type=int)
    what.add_argument("--fetch", metavar="TOKEN")
    parser.add_argument("--after", type=int, default=0)
    args = parser.parse_args()
    if args.fetch is not None:
        return fetch(args.fetch, args.after)
    return asyncio.run(run(args.port))


if __name__ == "__main__":  # (run as __main__ by the zipapp)
    gc.freeze()  # start-up's imports (console/cli/__init__.py, run)
    raise SystemExit(main())

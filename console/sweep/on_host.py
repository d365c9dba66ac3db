"""The load generator on the GPU host itself, next to the server: no SSH forward and no jump host between client and
server. Uploaded with what it needs as one zipapp (console/zipapp.py) and run with the host's python by
console/sweep/loadgen.py, which keeps the run and the events.

    python pivot_loadgen_HASH.pyz --port PORT

stdin: one JSON line (settings, prompts, headers, kind, done, repeat, the server's address), then `stop` for "after the current level";
its end (the console's side went away) aborts, as SIGTERM does. stdout: the events, one JSON line each.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

import orjson

from console.sweep.generator import client_placement, sweep
from console.sweep.settings import SweepSettings

ORDER_LIMIT = 1 << 26  # the first line carries the prompts


class PipeSink:
    """Events to stdout without ever blocking the loop: a link to the console that stalls (a full SSH window) would
    otherwise stop this process mid-level and stamp every chunk late. What the link cannot take yet waits here, in
    memory (a level's events at most), and goes when it can."""

    def __init__(self, transport: asyncio.WriteTransport):
        self.transport = transport

    def emit(self, event: dict[str, Any]) -> None:
        if not self.transport.is_closing():
            self.transport.write(orjson.dumps(event, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE))

    show = emit

    def sync(self) -> None:
        """The run is kept on the console's side."""

    async def drained(self, within_s: float) -> None:
        deadline = asyncio.get_running_loop().time() + within_s
        while self.transport.get_write_buffer_size() and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)  # (a pipe transport says when its buffer is low, not when it is empty)


async def run(port: int) -> int:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, task.cancel)
    stdin = asyncio.StreamReader(limit=ORDER_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    order = orjson.loads(await stdin.readline())
    stop = asyncio.Event()

    async def listen() -> None:
        while line := await stdin.readline():
            if line.strip() == b"stop":
                stop.set()
        task.cancel()  # stdin ended: nobody is reading the events any more

    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    sink = PipeSink(transport)
    listener = asyncio.create_task(listen())
    try:
        address = str(order.get("address") or "127.0.0.1")  # a Slurm job's first node, seen from its login node
        host = f"[{address}]" if ":" in address else address
        status = await sweep(f"http://{host}:{port}", sink, SweepSettings.from_dict(order["settings"]),
                           pool=order["prompts"], headers=order["headers"], done=set(order["done"]),
                           repeat=order["repeat"] or None, stop_after_level=stop, kind=order.get("kind"),
                           nodes=order.get("nodes"),
                           placement=client_placement("on-host"))
        await sink.drained(float("inf"))
        return status
    except asyncio.CancelledError:
        sink.emit({"type": "sweep_done", "aborted": True, "stopped": False})
        await sink.drained(5.0)
        return 130
    finally:
        listener.cancel()


def main() -> int:
    parser = argparse.ArgumentParser(prog="pivot-loadgen-on-host")
    parser.add_argument("--port", type=int, required=True)
    return asyncio.run(run(parser.parse_args().port))


if __name__ == "__main__":
    raise SystemExit(main())

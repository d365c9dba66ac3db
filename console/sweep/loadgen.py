"""The load generator's process: never the UI's event loop.

    python -m console.sweep.loadgen --url URL --run-dir DIR [--resume | --repeat C,C]
    python -m console.sweep.loadgen --config PIVOT_TOML --host NAME --port PORT --run-dir DIR [...]

Reads the run's settings from DIR/run.toml. With --host it opens its own SSH connection, so that no byte of the load
passes through the console's event loop, and by the run's `client` setting either runs the load generator on the GPU
host itself ("host"; uploaded as a zipapp and run with the host's python, next to the server) and keeps what it sends,
or generates the load here through an SSH forward ("console"); "auto" is the host when its python can (3.11 or later
with aiohttp, orjson, pydantic 2 and prometheus_client, as SGLang's and vLLM's environments have), else here, saying
why. Every event is one JSON line, printed for the caller and appended (flushed) to DIR/events.jsonl as it happens,
so a crash loses at most the requests in flight. SIGUSR1: stop after the current level. SIGTERM/SIGINT: abort now,
keeping every finished request. The run is locked while this process writes it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import orjson

from console import config
from console.remote import Connection, RemoteError
from console.sweep.generator import HostLoad, client_placement, sweep
from console.sweep.requests import prompts
from console.sweep.runfiles import EventLogFile
from console.sweep.runlock import RunLocked, run_lock
from console.sweep.settings import SweepSettings
from console.sweep.store import RunError, completed_levels, open_run_dir
from console.untrusted import visible
from console.zipapp import checked, loadgen_zip, not_there

EVENT_TYPES = frozenset({"sweep_started", "level_started", "request", "progress", "metrics", "level_retry", "level_done",
                         "sweep_done"})  # what console/sweep/generator.py emits (a test holds them to it)


class EventSink(EventLogFile):
    """Each event appended to the run and printed, as one JSON line, for whoever started this process."""

    def emit(self, event: dict[str, Any]) -> None:
        line = self.append({"t": round(time.time(), 4), **event})
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()

    def show(self, event: dict[str, Any]) -> None:
        """Printed only, not kept with the run: news of a level in progress."""
        sys.stdout.buffer.write(orjson.dumps(event) + b"\n")
        sys.stdout.buffer.flush()


class NotOnHost(Exception):
    """The host's python cannot run the load generator: why."""


async def on_host(conn: Connection, spec: config.HostSpec, port: int, order: dict[str, Any], sink: EventSink,
                  stop_after_level: asyncio.Event) -> int:
    """The load generator run on the host (uploaded when its python cannot open it), its events kept here: each
    line is the host's word, taken only as a JSON object of a known type, with this machine's time."""
    name, data = loadgen_zip()
    argv = checked(f"agent/{name}", data, [spec.python, f"agent/{name}", "--port", str(port)])
    for attempt in (1, 2):
        stream = await conn.stream(argv, cwd=spec.workdir)
        stopper = asyncio.create_task(_stop_later(stream, stop_after_level))
        seen: dict[str, Any] | None = None
        try:
            stream.write(orjson.dumps(order).decode() + "\n")
            async for line in stream:
                with contextlib.suppress(orjson.JSONDecodeError):
                    event = orjson.loads(line)
                    if not isinstance(event, dict) or event.get("type") not in EVENT_TYPES | {"unsupported"}:
                        continue
                    if event["type"] == "unsupported":
                        if seen is None:
                            raise NotOnHost(visible(str(event.get("why"))))
                        continue
                    seen = event
                    if event["type"] == "progress":
                        sink.show(event)
                    else:
                        sink.emit({**event, "pid": os.getpid()} if event["type"] == "sweep_started" else event)
            status = await stream.finished()
            if seen is None and attempt == 1 and not_there(status, stream.stderr_tail):
                await conn.upload(data, f"{spec.workdir.rstrip('/')}/agent/{name}")
                continue
            if seen is None or seen["type"] != "sweep_done":
                why = "; ".join(stream.stderr_tail) or f"exit status {status}"
                raise RemoteError(conn.host, f"the load generator on the host ended before the sweep did: {why}")
            return 130 if seen.get("aborted") else 3 if seen.get("failed") else 0  # as a sweep here ends
        finally:
            stopper.cancel()
            await stream.stop()
    raise AssertionError("unreachable")


async def _stop_later(stream: Any, stop_after_level: asyncio.Event) -> None:
    await stop_after_level.wait()
    with contextlib.suppress(RemoteError):
        stream.write("stop\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pivot-loadgen")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url")
    target.add_argument("--host")
    parser.add_argument("--config")
    parser.add_argument("--port", type=int)
    parser.add_argument("--address", default="127.0.0.1", help="the server's address, from the host (a Slurm job's node)")
    parser.add_argument("--run-dir", type=Path, required=True)
    again = parser.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true")
    again.add_argument("--repeat", type=lambda s: [int(c) for c in s.split(",")], help="measure these levels again")
    parser.add_argument("--requests", type=int, help="with --repeat: requests per level")
    args = parser.parse_args(argv)
    meta = tomllib.loads((args.run_dir / "run.toml").read_text(encoding="utf-8"))
    settings = SweepSettings.from_dict(meta.get("settings", {}))
    if args.requests:
        settings = dataclasses.replace(settings, requests=args.requests)

    async def runner() -> int:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        stop_after_level = asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, stop_after_level.set)
        sink = EventSink(args.run_dir)
        headers = {}
        if settings.api_key_env and os.environ.get(settings.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[settings.api_key_env]}"
        done = completed_levels(args.run_dir) if args.resume else set()
        common: dict[str, Any] = {"pool": prompts(settings), "headers": headers, "done": done, "repeat": args.repeat,
                                  "stop_after_level": stop_after_level, "kind": meta.get("kind"), "nodes": meta.get("nodes")}
        conn = None
        try:
            if args.url is not None:
                return await sweep(args.url, sink, settings, placement=client_placement("direct"), **common)
            spec = config.load(args.config).host(args.host)
            conn = Connection(spec)
            await conn.up_now()
            warnings: list[str] = []
            if settings.client != "console":
                order = {"settings": settings.to_dict(), "prompts": common["pool"], "headers": headers,
                         "done": sorted(done), "repeat": args.repeat or [], "kind": meta.get("kind"),
                         "nodes": meta.get("nodes"), "address": args.address}
                try:
                    status = await on_host(conn, spec, args.port, order, sink, stop_after_level)
                    sink.sync()
                    return status
                except NotOnHost as e:
                    if settings.client == "host":
                        raise RemoteError(args.host, f"cannot run the load generator there: {e}") from None
                    warnings.append(f"the load generator ran here, through an SSH forward, not on {args.host}: {e}")
            url = (await conn.forward(args.address, args.port)).url
            return await sweep(url, sink, settings, placement=client_placement("ssh-forward", args.host),
                               host_load=_host_load(conn), warnings=warnings, **common)
        except asyncio.CancelledError:
            sink.emit({"type": "sweep_done", "aborted": True, "stopped": False})
            return 130
        finally:
            if conn is not None:
                await conn.close()

    try:
        with run_lock(args.run_dir):
            status = asyncio.run(runner())
            _finish(args.run_dir)
            return status
    except RunLocked as e:
        print(f"pivot-loadgen: {e}", file=sys.stderr)
        return 2
    except RemoteError as e:
        print(f"pivot-loadgen: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # the disk filled, the run's directory went away: one line, not a traceback
        print(f"pivot-loadgen: cannot write the run: {e.strerror or e}", file=sys.stderr)
        return 1


def _finish(run_dir: Path) -> None:
    """The run's tables, here: a long run's take a second of CPU, which the console's process (its UI) need not spend.
    When they cannot be written, whoever started this process writes them, or says why."""
    try:
        open_run_dir(run_dir).finish()
    except RunError as e:
        print(f"pivot-loadgen: {e}", file=sys.stderr)


def _host_load(conn: Connection) -> HostLoad:
    async def load() -> float | None:
        with contextlib.suppress(RemoteError, ValueError, IndexError):  # a figure beside the numbers, never a failure
            return float((await conn.run(["cat", "/proc/loadavg"], timeout=10)).stdout.split()[0])
        return None
    return load


if __name__ == "__main__":
    raise SystemExit(main())

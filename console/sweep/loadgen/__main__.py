"""The load generator's process: never the UI's event loop.

    python -m console.sweep.loadgen --url URL --run-dir DIR [--resume | --repeat C,C]
    python -m console.sweep.loadgen --config PIVOT_TOML --host NAME --port PORT --run-dir DIR [...]

Reads the run's settings from DIR/run.toml. With --host it opens its own SSH connection, so that no byte of the load
passes through the console's event loop, and by the run's `client` setting either runs the load generator on the GPU
host itself ("host"; uploaded as a zipapp and run with the host's python, next to the server) and keeps what it sends,
or generates the load here through an SSH forward ("console"); "auto" is the host when its python can (3.11 or later
with aiohttp, orjson, pydantic 2 and prometheus_client, as SGLang's and vLLM's environments have), else here, saying
why. Every event is one JSON line appended (flushed) to DIR/events.jsonl as it happens, so a crash loses at most the
requests in flight, and printed for the caller; finished requests are printed as news of how many, at most every
0.1 s (RequestsDone). SIGUSR1: stop after the current level. SIGTERM/SIGINT: abort now,
keeping every finished request. The run is locked while this process writes it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from console.remote.errors import RemoteError
from console.settings import SweepSettings
from console.sweep.loadgen.generator import POWER_QUERY, HostLoad, PowerMeter, client_placement, gpu_watts, gpus_here, sweep
from console.sweep.loadgen.requests import synthetic_pool
from console.sweep.model import Event, HostOrder, LevelProgress, Request, RequestsDone, Said, SweepDone, dumped
from console.sweep.prompt_sets import PromptSetError, answer_lengths, load
from console.sweep.runs.files import EventLogFile, pending_spool
from console.sweep.runs.lock import RunLocked, run_lock
from console.sweep.runs.store import RunError, completed_levels, lacking_levels, open_run_dir, prompts_sent, read_meta
from console.untrusted import visible

NEWS_S = 0.1  # finished requests are told their followers at most this often

if TYPE_CHECKING:  # SSH (asyncssh) and pivot.toml: for a sweep through the host only; a sweep of a URL starts without them
    from console import config
    from console.remote import Connection


class EventSink(EventLogFile):
    """Each event appended to the run and printed, as one JSON line, for whoever started this process; but a finished
    request is printed as news (RequestsDone) at most every NEWS_S, with the others of its level since the last."""

    def __init__(self, run_dir: Path):
        super().__init__(run_dir)
        self.c, self.n, self.tokens = 1, 0, 0  # requests of level c finished and not yet told
        self.told = 0.0  # when a line was last printed
        self.ended = False  # this sweep's end was emitted

    def emit(self, event: Event) -> None:
        line = self.append({"t": round(time.time(), 4), **dumped(event)})
        self.ended = self.ended or type(event) is SweepDone
        if type(event) is not Request:
            self._print(line)
            return
        if self.n and self.c != event.c:
            self.tell()
        self.c, self.n, self.tokens = event.c, self.n + 1, self.tokens + event.tokens
        if time.monotonic() - self.told >= NEWS_S:
            self.tell()

    def show(self, event: LevelProgress | Said) -> None:
        """Printed only, not kept with the run: news of a level in progress, the link to the host."""
        self._print(orjson.dumps(event.model_dump()) + b"\n")

    def tell(self) -> None:
        """The news of the requests finished and not yet told, now."""
        if self.n:
            self._print(b"")

    def _print(self, line: bytes) -> None:
        """The line, after the news of the requests finished before it."""
        if self.n:
            done = RequestsDone(c=self.c, n=self.n, tokens=self.tokens)
            line = orjson.dumps(done.model_dump(), option=orjson.OPT_APPEND_NEWLINE) + line
            self.n = self.tokens = 0
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
        self.told = time.monotonic()

    def keep(self, event: Event) -> None:
        """Kept with the run, not printed: the end of an earlier sweep of it, fetched from the host by a resume."""
        self.append({"t": round(time.time(), 4), **event.model_dump()})


class EarlierSweep:
    """The sink of a resume's fetch: the host's events of the sweep that lost its link are kept and shown, but that
    sweep's end is not this one's (its follower would say the sweep failed, then measure the rest)."""

    def __init__(self, sink: EventSink):
        self.sink = sink

    def emit(self, event: Event) -> None:
        (self.sink.keep if isinstance(event, SweepDone) else self.sink.emit)(event)

    def show(self, event: LevelProgress | Said) -> None:
        self.sink.show(event)

    def sync(self) -> None:
        self.sink.sync()


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
    try:
        meta = read_meta(args.run_dir)
    except RunError as e:
        print(f"pivot-loadgen: {e}", file=sys.stderr)
        return 2
    settings = SweepSettings.from_dict(meta.settings)
    if args.requests:
        settings = dataclasses.replace(settings, requests=args.requests)
    answers = None
    try:  # (the console read the set before it started this process: this fails only if the file changed since)
        if settings.prompts == "synthetic":
            pool = synthetic_pool(settings)
        else:
            prompt_set = load(settings.prompts, settings.turns)
            pool = list(prompt_set.prompts)
            answers = answer_lengths(prompt_set, settings.max_tokens) if settings.output_lengths == "set" else None
    except PromptSetError as e:
        print(f"pivot-loadgen: {e}", file=sys.stderr)
        return 2

    async def runner() -> int:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()

        def end() -> None:
            """Once: Ctrl-C reaches this process and its console's SIGTERM follows it; a second cancel would cut short
            the abort that keeps what the level measured (the host's last events, its spool removed)."""
            if not task.cancelling():
                task.cancel()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, end)
        stop_after_level, server_gone = asyncio.Event(), asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, stop_after_level.set)
        loop.add_signal_handler(signal.SIGUSR2, server_gone.set)  # the console saw the server's process end
        sink = EventSink(args.run_dir)
        headers = {}
        if settings.api_key_env and os.environ.get(settings.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[settings.api_key_env]}"
        common: dict[str, Any] = {
            "pool": pool,
            "answers": answers,
            "headers": headers,
            "repeat": args.repeat,
            "stop_after_level": stop_after_level,
            "server_gone": server_gone,
            "kind": meta.kind,
            "nodes": meta.nodes,
        }
        conn = None
        try:
            if args.url is not None:
                done = completed_levels(args.run_dir) if args.resume else set()
                common["top_up"] = lacking_levels(args.run_dir) if args.resume else {}
                common["sent"] = prompts_sent(args.run_dir) if args.resume or args.repeat else {}  # (a new run has none)
                return await sweep(args.url, sink, settings, placement=client_placement("direct"), done=done, **common)
            from console import config  # (a sweep of a URL reads no pivot.toml)
            from console.remote import Connection
            from console.sweep.loadgen.host_generator import HostGenerator, NotOnHost

            spec = config.load(args.config).host(args.host)
            conn = Connection(spec)
            await conn.up_now()
            if args.resume:
                await _fetch_pending(conn, spec, sink, args.run_dir)
            done = completed_levels(args.run_dir) if args.resume else set()
            common["top_up"] = lacking_levels(args.run_dir) if args.resume else {}
            common["sent"] = prompts_sent(args.run_dir) if args.resume or args.repeat else {}
            warnings: list[str] = []
            if settings.client != "console":
                order = HostOrder(
                    settings=settings,
                    prompts=common["pool"],
                    answers=answers or [],
                    headers=headers,
                    done=sorted(done),
                    repeat=args.repeat or [],
                    top_up=common["top_up"],
                    sent=common["sent"],
                    kind=meta.kind,
                    nodes=meta.nodes,
                    address=args.address,
                )
                try:
                    status = await HostGenerator(conn, spec, sink, args.run_dir).run(args.port, order, stop_after_level, server_gone)
                    sink.sync()
                    return status
                except NotOnHost as e:
                    if settings.client == "host":
                        raise RemoteError(args.host, f"cannot run the load generator there: {e}") from None
                    warnings.append(f"the load generator ran here, through an SSH forward, not on {args.host}: {e}")
            url = (await conn.forward(args.address, args.port)).url
            return await sweep(
                url,
                sink,
                settings,
                placement=client_placement("ssh-forward", args.host),
                host_load=_host_load(conn),
                warnings=warnings,
                done=done,
                power=_host_power(conn) if gpus_here(args.address, meta.nodes) else None,
                **common,
            )
        except asyncio.CancelledError:
            if pending_spool(args.run_dir) is None and not sink.ended:  # (the host's generator says its own end)
                sink.emit(SweepDone(aborted=True))
            else:  # the host's events go on where those kept here end, when fetched
                print(
                    f"pivot-loadgen: what the load generator on {args.host} measured waits there: `pivot sweep "
                    f"--resume {args.run_dir.name}` fetches it and measures the rest",
                    file=sys.stderr,
                )
            return 130
        finally:
            sink.tell()  # the news of requests finished since the last line, however this ends
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


async def _fetch_pending(conn: Connection, spec: config.HostSpec, sink: EventSink, run_dir: Path) -> None:
    """A sweep of this run whose link was lost left its last events on the host: they come first."""
    from console.sweep.loadgen.host_generator import HostGenerator, kept_of

    pending = pending_spool(run_dir)
    if pending is None:
        return
    if pending.get("host") != spec.name:
        raise RemoteError(
            spec.name,
            f"what the load generator on {visible(str(pending.get('host')))} measured for "
            "this run waits there: resume it on that host (pivot --host NAME sweep --resume)",
        )
    generator = HostGenerator(conn, spec, EarlierSweep(sink), run_dir)
    generator.seq, generator.base = kept_of(run_dir, pending), int(pending.get("base") or 0)
    sink.show(Said(type="link_back", message=f"fetching what the load generator on {spec.name} measured while no console followed it"))
    await generator.fetch_until_ended(pending["token"], 60.0)


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


def _host_power(conn: Connection) -> PowerMeter:
    async def power() -> float | None:
        with contextlib.suppress(RemoteError):  # a figure beside the numbers, never a failure
            result = await conn.run(list(POWER_QUERY), timeout=10)
            return gpu_watts(result.stdout) if result.exit_status == 0 else None
        return None

    return power


if __name__ == "__main__":
    gc.freeze()  # start-up's imports (console/cli/__init__.py, run)
    raise SystemExit(main())

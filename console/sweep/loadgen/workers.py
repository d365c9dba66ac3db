"""A level sent by several load generator processes, where one cannot carry it (`[sweep] workers`): each worker keeps
its share of the C slots busy with its share of the level's requests and sends each record as it finishes; the load
generator's own process adds them to the level's numbers and writes them, in the order they finish.

A worker is this module run by the same python from where `console` is (a directory, or the host's zipapp), started
once per sweep. One JSON line each way. stdin: the sweep (the server, its headers, the settings, the model, the
prompts), then each level's share; `stop`: begin no more requests of this level; the end of stdin (the load generator
aborted or died): end now. stdout: `ready`, then for each level every request's record, its progress each half
second, and its end (its CPU, its loop's lateness, its peak in flight)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson

import console
from console.settings import SweepSettings
from console.sweep.level_stats import Quantiles
from console.sweep.loadgen.feed import Feed, Share, requests_from, sender, watch_lag
from console.sweep.loadgen.requests import Client, TokensPerChunk, UniquePrompts
from console.sweep.metrics import RequestRecord

LINE_LIMIT = 1 << 26  # the sweep's line carries a prompt file's prompts; a record, every chunk of a long answer
PROGRESS_S = 0.5
CLOSE_WAIT_S = 5.0
STDERR_TAIL = 2000


class WorkerFailed(Exception):
    """A worker ended or broke its protocol mid-level: the level cannot be counted."""


def worker_argv() -> list[str]:
    """This python, importing console from where this process did (a zipapp on the host is a path like a directory)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(console.__file__)))
    code = f"import sys; sys.path.insert(0, {root!r}); from console.sweep.loadgen.workers import serve; serve()"
    return [sys.executable, "-c", code]


class _Worker:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.tail = b""
        assert proc.stderr is not None
        self._stderr = asyncio.create_task(self._keep_tail(proc.stderr))

    async def _keep_tail(self, stderr: asyncio.StreamReader) -> None:
        while chunk := await stderr.read(1 << 16):  # read always, or a chatty worker blocks on a full pipe
            self.tail = (self.tail + chunk)[-STDERR_TAIL:]

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(ConnectionError, RuntimeError):  # it ended: its reader says so
            self.proc.stdin.write(line)

    async def line(self) -> bytes:
        assert self.proc.stdout is not None
        line = await self.proc.stdout.readline()
        if not line:
            await self.proc.wait()
            await self._stderr
            last = self.tail.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {self.proc.returncode}"]
            raise WorkerFailed(f"a load generator worker (pid {self.proc.pid}) ended: {last[0][:200]}")
        return line

    async def end(self) -> None:
        """Its stdin closed (it ends), and after CLOSE_WAIT_S a SIGKILL: only this process, which this one started."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            async with asyncio.timeout(CLOSE_WAIT_S):
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self._stderr.cancel()


class Workers:
    """The sweep's worker processes, started as a level needs them and kept for the next."""

    def __init__(self, sweep: dict[str, Any]) -> None:
        self._sweep = orjson.dumps(sweep) + b"\n"
        self._workers: list[_Worker] = []
        self._levels = 0

    async def _start(self) -> _Worker:
        proc = await asyncio.create_subprocess_exec(
            *worker_argv(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
            start_new_session=True,  # the operator's Ctrl-C reaches the load generator, which ends its workers
        )
        worker = _Worker(proc)
        self._workers.append(worker)
        worker.send(self._sweep)
        if orjson.loads(await worker.line()) != {"ready": True}:
            raise WorkerFailed(f"a load generator worker (pid {proc.pid}) did not start")
        return worker

    async def start(self, n: int) -> None:
        """n workers, ready for a level."""
        try:
            while len(self._workers) < n:
                await self._start()
        except BaseException:
            await self.close()
            raise

    def level(
        self,
        n: int,
        c: int,
        total: int | None,
        deadline: float | None,
        level_t0: float,
        finished: Callable[[RequestRecord, dict[str, Any]], None],
        offset: int = 0,
    ) -> WorkerLevel:
        """Starts the level on n workers (started already); `WorkerLevel.wait()` for its end. total: the level's
        requests with its warm-up (None: until the deadline); offset: where in its prompts' order it begins."""
        self._levels += 1
        level = WorkerLevel(self, self._workers[:n], finished)
        for i, worker in enumerate(level.workers):
            share = {"first": i, "step": n, "end": total, "deadline": deadline, "offset": offset}
            worker.send(
                orjson.dumps({"c": c, "slots": c // n + (i < c % n), "level_t0": level_t0, "key": f"w{self._levels}", **share}) + b"\n"
            )
        return level

    async def close(self) -> None:
        workers, self._workers = self._workers, []
        await asyncio.gather(*(w.end() for w in workers))


class WorkerLevel:
    """A level in progress on some workers: what they have in flight and have streamed, their figures at its end."""

    def __init__(self, pool: Workers, workers: list[_Worker], finished: Callable[[RequestRecord, dict[str, Any]], None]) -> None:
        self.pool, self.workers, self._finished = pool, workers, finished
        self._progress = [(0, 0)] * len(workers)
        self.ends: list[dict[str, Any]] = []

    @property
    def in_flight(self) -> int:
        return sum(p[0] for p in self._progress)

    @property
    def streamed(self) -> int:
        return sum(p[1] for p in self._progress)

    def stop(self) -> None:
        for worker in self.workers:
            worker.send(b"stop\n")

    async def wait(self) -> None:
        """Until every worker ended its share. A worker that fails ends them all (the next level starts new ones)."""
        try:
            await asyncio.gather(*(self._read(i, w) for i, w in enumerate(self.workers)))
        except BaseException:  # a failed worker, a malformed line, the operator's abort
            await self.pool.close()
            raise

    async def _read(self, i: int, worker: _Worker) -> None:
        while True:
            try:
                message = orjson.loads(await worker.line())
            except orjson.JSONDecodeError:
                raise WorkerFailed(f"a load generator worker (pid {worker.proc.pid}) wrote a line that is not JSON") from None
            if (record := message.get("r")) is not None:
                self._finished(RequestRecord.from_dict(record), record)
            elif (progress := message.get("p")) is not None:
                self._progress[i] = tuple(progress)
            elif (end := message.get("end")) is not None:
                self.ends.append(end)
                return

    @property
    def peak(self) -> int:
        return sum(int(e["peak"]) for e in self.ends)

    @property
    def cpu(self) -> float:
        """The busiest worker's share of a core: the one that would be the client's limit."""
        return max(float(e["cpu"]) for e in self.ends)

    def lag(self, i: int) -> float | None:
        """The latest of the workers' loops at a percentile (0: p50, 1: p90, 2: p99)."""
        return max((e["lag"][i] for e in self.ends if e["lag"][i] is not None), default=None)


def serve() -> None:
    """The worker's process."""
    gc.freeze()  # start-up's imports (console/cli/__init__.py, run); serve() runs only as its process's entry
    with contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt, BrokenPipeError):
        asyncio.run(_serve())


def _say(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(orjson.dumps(message) + b"\n")
    sys.stdout.buffer.flush()


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    sweep = orjson.loads(await stdin.readline())
    settings = SweepSettings.from_dict(sweep["settings"])
    source: list[Any] | UniquePrompts = sweep["prompts"]
    if unique := sweep.get("unique"):
        source = UniquePrompts(unique["input_tokens"], unique["nonce"])
        source.words = unique["words"]
    orders: asyncio.Queue[bytes] = asyncio.Queue()
    feeds: list[Feed] = []
    main = asyncio.current_task()
    assert main is not None

    async def read_orders() -> None:
        while line := await stdin.readline():
            if line.strip() == b"stop":
                if feeds:  # (a stop follows the records of the level it stops: its feed is there)
                    feeds[-1].stop()
            else:
                orders.put_nowait(line)
        main.cancel()  # the load generator aborted, or is gone: its requests in flight are not wanted

    async with Client(sweep["url"], sweep["headers"], sweep["most"], settings.idle_timeout_s) as client:
        _say({"ready": True})
        reading = asyncio.create_task(read_orders())
        per_chunk = TokensPerChunk()
        try:
            while True:
                level = orjson.loads(await orders.get())
                feed = Feed(Share(level["first"], level["step"], level["end"], level["deadline"]))
                feeds[:] = [feed]
                asked = requests_from(source, settings, level["c"], level["key"], sweep.get("answers"), level.get("offset", 0))
                send = sender(client, settings, asked, sweep["model"], level["c"], level["level_t0"], per_chunk, sweep["ignore_eos"])
                await _share(feed, level["slots"], send, per_chunk)
        finally:
            reading.cancel()


async def _share(feed: Feed, slots: int, send: Any, per_chunk: TokensPerChunk) -> None:
    """One level's share, each record said as it finishes, then its end."""
    cpu0, t0, seen0 = time.process_time(), time.monotonic(), per_chunk.seen
    lags = Quantiles()

    async def progress() -> None:
        while True:
            await asyncio.sleep(PROGRESS_S)
            _say({"p": [feed.in_flight, round((per_chunk.seen - seen0) * per_chunk.ratio)]})

    helpers = [asyncio.create_task(progress()), asyncio.create_task(watch_lag(lags))]
    try:
        await feed.run(slots, send, lambda record: _say({"r": record.to_dict()}))
    finally:
        for helper in helpers:
            helper.cancel()
    wall = time.monotonic() - t0
    cpu = (time.process_time() - cpu0) / wall if wall > 0 else 0.0
    _say({"end": {"cpu": round(cpu, 3), "peak": feed.peak, "lag": [lags.percentile(q) for q in (50, 90, 99)]}})

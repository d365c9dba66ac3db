"""Starting the load generator in its own process and reading its events (the caller's side)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import orjson

from console import config
from console.gpu.samples import Sample
from console.gpu.telemetry import RemoteTelemetry
from console.remote.command import shell_line
from console.server.profiles import ProfileError, load_profiles
from console.server.state import ServerRecord, ServerState
from console.sweep.model import EventError, RunMeta, Said, Shown, decode_shown
from console.sweep.runs.store import Run, RunError
from console.untrusted import visible

if TYPE_CHECKING:
    from console.remote import Connection


class SweepProcess:
    """One load generator process writing into one run. stop(): after the level; abort(): now."""

    def __init__(self, run: Run, target: list[str], *, resume: bool = False, repeat: list[int] | None = None, requests: int | None = None):
        """target: ["--url", URL] or ["--config", PATH, "--host", NAME, "--port", PORT] (its own SSH forward).
        resume: run the levels not yet measured; repeat: measure these levels again (`requests` each), merged with
        what is there."""
        self.run, self.target, self.resume, self.repeat, self.requests = run, target, resume, repeat, requests
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr = ""

    async def events(self) -> AsyncIterator[Shown]:
        argv = [sys.executable, "-m", "console.sweep.loadgen", *self.target, "--run-dir", str(self.run.dir)]
        if self.resume:
            argv.append("--resume")
        if self.repeat:
            argv += ["--repeat", ",".join(map(str, self.repeat))]
        if self.requests:
            argv += ["--requests", str(self.requests)]
        self.proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=1 << 24,  # a level's event with its server's metrics and every figure is one long line
        )
        assert self.proc.stdout and self.proc.stderr
        stderr_task = asyncio.create_task(self.proc.stderr.read())
        finished = False
        try:
            while line := await self.proc.stdout.readline():
                try:
                    yield decode_shown(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue  # not an event: a line a library printed
                except EventError as e:  # kept out of the run by the load generator's own check; said, not fatal
                    yield Said(type="notice", message=f"an event the console cannot read ({e}): left out of the screen")
            status = await self.proc.wait()
            self.stderr = (await stderr_task).decode(errors="replace")
            if status not in (0, 3, 130):
                yield Said(type="failed", status=status, message=self._why(status))
            finished = True
            try:  # the load generator wrote the tables; else (it was killed, the disk was full) here, off the loop
                await asyncio.to_thread(self._tables)
            except RunError as e:
                yield Said(type="failed", message=str(e))
        finally:
            if self.proc.returncode is None:  # the caller went away: end the generator we started
                self.proc.send_signal(signal.SIGTERM)
                await self.proc.wait()
            if not finished:
                with contextlib.suppress(RunError):
                    self.run.finish()

    def _tables(self) -> None:
        """The run's tables and state: the load generator's own when it wrote them, else derived here."""
        if not self.run.reload():
            self.run.finish()

    def _why(self, status: int) -> str:
        if status < 0:
            try:
                name = signal.Signals(-status).name
            except ValueError:
                name = f"signal {-status}"
            return f"the load generator was killed by {name}"
        last = (self.stderr.strip().splitlines() or [f"it exited with status {status} and said nothing"])[-1]
        return visible(last)

    def stop(self) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGUSR1)

    def server_gone(self) -> None:
        """The console saw the server's process end: a failed level does not wait for it to answer again."""
        if self.proc and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGUSR2)

    def leave(self) -> None:
        """Ends this side at once, without an abort: a load generator on the GPU host measures the level in progress
        to its end into its spool, which a resume fetches (console/sweep/loadgen/host_generator.py)."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)

    def abort(self) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)


async def describe_server(conn: Connection, cfg: config.Config, host: str) -> tuple[RunMeta, str, int]:
    """What the run records about the server and host; and the server's address (from the host) and port."""
    spec = cfg.host(host)
    from console.server.slurm import lifecycle_of  # (the server's host: SSH, which a sweep of a URL does without)

    agent = RemoteTelemetry(conn, spec)
    lifecycle = lifecycle_of(conn, spec, agent, idle_threshold_mib=cfg.idle_threshold_mib, grace_s=cfg.kill_grace_s)
    try:
        status = await lifecycle.poll()
        address = lifecycle.server_address
    finally:
        await lifecycle.close()
    if status.state != ServerState.READY:
        raise RunError(f"the server on {host} is {status.describe()}: start a profile first (pivot server start P)")
    record = ServerRecord.parse((await conn.run(["cat", "server.json"], cwd=spec.workdir)).stdout)
    if record is None:
        raise RunError(f"the server on {host} has no readable server.json: start it with pivot")
    if record.rank > 0:  # a headless rank, or SGLang's dummy /health: no API to sweep
        raise RunError(
            f"{host} runs rank {record.rank} of {visible(record.profile)}: sweep it on {record.nodes[0]}, "
            "whose rank 0 serves its API (pivot --host " + record.nodes[0] + " sweep …)"
        )
    sample = await agent.sample_once()
    gpus = sample.gpus if isinstance(sample, Sample) else []
    meta = RunMeta(
        profile=status.profile or "?",
        kind=record.kind,
        argv=list(record.argv),
        command_line=shell_line(record.argv),
        host=host,
        gpu_count=len(gpus) if isinstance(sample, Sample) else None,  # (not sampled: unknown)
        gpu_names=sorted({g.name for g in gpus}),
        gpu_memory_mib=max((g.mem_total_mib for g in gpus if g.mem_total_mib), default=None),
        model=status.model,
        nodes=list(record.nodes) or None,
    )  # a server across nodes: its hosts, rank 0 first; GPUs: rank 0's
    meta.measured_from = await asyncio.to_thread(_measured_from, cfg, meta.profile)  # profile files: off the loop
    if record.job is not None:  # a Slurm job: its id, and where its first node is
        meta.slurm_job, meta.address = record.job, address
    return meta, address, record.port


def _measured_from(cfg: config.Config, name: str) -> list[str] | None:
    """Of an adaptive profile pivot wrote, the runs it came from (a profile that cannot be read here: None)."""
    with contextlib.suppress(ProfileError):
        return list(load_profiles(*cfg.profile_dirs).get(name).measured_from) or None
    return None


def identity_mismatch(ran: RunMeta, now: RunMeta) -> str | None:
    """How the running server differs from the one a run measured (profile, model, command line); None: the same."""
    if ran.profile != now.profile:
        return f"profile {visible(ran.profile)}, now {visible(now.profile)}"
    if ran.model is not None and now.model is not None and ran.model != now.model:
        return f"model {visible(ran.model)}, now {visible(now.model)}"
    if ran.argv is not None and now.argv is not None and ran.argv != now.argv:
        return "its command line differs"
    return None

"""Starting the load generator in its own process and reading its events (the caller's side)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

from console import config
from console.gpu.samples import Sample
from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from console.server.lifecycle import ServerLifecycle, ServerState
from console.sweep.store import Run, RunError


class SweepProcess:
    """One load generator process writing into one run. stop(): after the level; abort(): now."""

    def __init__(self, run: Run, target: list[str], *, resume: bool = False):
        """target: ["--url", URL] or ["--config", PATH, "--host", NAME, "--port", PORT] (its own SSH forward)."""
        self.run, self.target, self.resume = run, target, resume
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr = ""

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        argv = [sys.executable, "-m", "console.sweep.loadgen", *self.target, "--run-dir", str(self.run.dir)]
        if self.resume:
            argv.append("--resume")
        self.proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            limit=1 << 24,  # a request event with every chunk of a long answer is one long line
        )
        assert self.proc.stdout and self.proc.stderr
        stderr_task = asyncio.create_task(self.proc.stderr.read())
        try:
            while line := await self.proc.stdout.readline():
                try:
                    yield json.loads(line)
                except ValueError:
                    continue
            await self.proc.wait()
            self.stderr = (await stderr_task).decode(errors="replace")
            if self.proc.returncode not in (0, 130):
                yield {"type": "failed", "status": self.proc.returncode,
                       "message": (self.stderr.strip().splitlines() or ["no output"])[-1]}
        finally:
            if self.proc.returncode is None:  # the caller went away: end the generator we started
                self.proc.send_signal(signal.SIGTERM)
                await self.proc.wait()
            self.run.finish()

    def stop(self) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGUSR1)

    def abort(self) -> None:
        if self.proc and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)


async def describe_server(conn: Connection, cfg: config.Config, host: str) -> tuple[dict[str, Any], int]:
    """What the run records about the server and host; and the server's port."""
    spec = cfg.host(host)
    agent = RemoteTelemetry(conn, spec)
    lifecycle = ServerLifecycle(conn, spec, agent, idle_threshold_mib=cfg.idle_threshold_mib, grace_s=cfg.kill_grace_s)
    status = await lifecycle.poll()
    if status.state != ServerState.READY:
        raise RunError(f"the server on {host} is {status.describe()}: start a profile first (pivot server start P)")
    record = (await conn.run(["cat", "server.json"], cwd=spec.workdir)).stdout
    data = json.loads(record)
    sample = await agent.sample_once()
    gpus = [g.name for g in sample.gpus] if isinstance(sample, Sample) else []
    meta = {"profile": status.profile, "command_line": " ".join(data.get("argv", [])), "host": host,
            "gpu_count": len(gpus), "gpu_names": sorted(set(gpus)), "model": status.model}
    return meta, int(data["port"])

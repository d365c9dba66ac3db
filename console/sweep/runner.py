"""Starting the load generator in its own process and reading its events (the caller's side)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

from console.sweep.store import Run


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

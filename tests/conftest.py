from __future__ import annotations

import asyncio
import inspect
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from pathlib import Path
from typing import Any, TypeVar, overload

import pytest
from textual.app import App

from console import config
from console.sim.host import SimHost
from console.sim.state import GpuSpec

T = TypeVar("T")


@pytest.fixture
async def sim_host(tmp_path: Path) -> AsyncIterator[SimHost]:
    """The simulated host's SSH server, in this process (no process reaping: use sim_host_process for that)."""
    host = SimHost(tmp_path / "host", gpus=GpuSpec(count=8))
    await host.start()
    try:
        yield host
    finally:
        await host.close()


@pytest.fixture
def sim_config(sim_host: SimHost) -> config.Config:
    return config.load(sim_host.config_path)


class HostProcess:
    def __init__(self, root: Path, proc: subprocess.Popen[str], ssh: str, config_path: Path):
        self.root, self.proc, self.ssh, self.config_path = root, proc, ssh, config_path

    @property
    def config(self) -> config.Config:
        return config.load(self.config_path)


@pytest.fixture
def sim_host_process(tmp_path: Path) -> Iterator[HostProcess]:
    """`pivot demo --serve` in its own process: the host adopts and reaps orphans, as a real host's init does."""
    yield from host_process(tmp_path, 20)


@pytest.fixture
def sim_host_measured(tmp_path: Path) -> Iterator[HostProcess]:
    """The same in real time, for measurements: a faster clock makes scheduling jitter part of the result."""
    yield from host_process(tmp_path, 1)


def host_process(tmp_path: Path, time_scale: float, *, server: str = "none", hosts: int = 1) -> Generator[HostProcess, None, None]:
    """`pivot demo --serve` (of `hosts` hosts, each with `server` started) until the test ends."""
    root = tmp_path / "demo"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "console",
            "demo",
            "--serve",
            "--dir",
            str(root),
            "--server",
            server,
            "--time-scale",
            str(time_scale),
            "--hosts",
            str(hosts),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout
    ssh = proc.stdout.readline().strip()
    config_line = proc.stdout.readline().strip()
    assert ssh.startswith("ssh ") and config_line.startswith("config: "), proc.stderr.read() if proc.stderr else ""
    try:
        yield HostProcess(root, proc, ssh, Path(config_line.removeprefix("config: ")))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# After `p=PID` in a script run in the workdir: the server's record as pivot's start writes it beside the pid file (the
# pid and its start time: the agent takes the pid file's process for the server only when the record names it).
RECORD_BESIDE = 't=$(sed "s/.*) //" /proc/$p/stat | cut -d" " -f20); printf \'{"pid": %s, "start_ticks": %s}\' "$p" "$t" > server.json'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@overload
async def wait_for(predicate: Callable[[], Awaitable[T | None]], timeout: float = 10.0, interval: float = 0.05) -> T: ...
@overload
async def wait_for(predicate: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.05) -> T: ...
async def wait_for(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.05) -> object:
    """Poll until predicate() (sync or async) is truthy; return its value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(interval)


def wait_until(predicate: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.05, *, what: str = "") -> T:
    """wait_for's synchronous twin, for tests without an event loop: poll until predicate() is truthy; return its
    value. `what`: what it waits for, said when it does not come in time."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what or 'the condition'}")
        time.sleep(interval)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


SWEEP_READS = ("sweep-load", "sweep-overlays", "sweep-read", "sweep-compare")  # the Sweep pane's thread workers


async def compared(pilot) -> None:  # type: ignore[no-untyped-def]
    """After `c` (or anything that compares runs): the comparison read and computed in its thread, and shown."""
    await wait_for(lambda: not any(w.group == "sweep-compare" and not w.is_finished for w in pilot.app.workers))
    await pilot.pause()


async def settled(pilot) -> None:  # type: ignore[no-untyped-def]
    """The screen as it stays until something changes: the first sample shown, the campaign's last run read, and the
    Sweep pane's chart drawn at the size it has, nothing left to redraw."""
    from console.ui.widgets.gpu.processes import ProcessTable
    from console.ui.widgets.sweep.chart import SweepChart
    from console.ui.widgets.sweep.pane import SweepPane

    app = pilot.app
    pane, chart = app.query_one(SweepPane), app.query_one(SweepChart)

    def done() -> bool:
        if not getattr(app, "_rest_started", True):
            return False  # the first sample drawn, the campaign's last run not yet asked for (PivotApp._rest_of_screen)
        if any(w.group in SWEEP_READS and not w.is_finished for w in app.workers):
            return False  # the campaign's runs are still being read, or compared
        if app.query_one(ProcessTable).last_sample is None or pane.redraw_due:
            return False
        if not chart.display or not pane.display:
            return True
        return chart.size.height > 0

    for _ in range(2):  # twice, a pause apart: a layout still on its way would have undone the first
        await pilot.pause()
        await wait_for(done)


def toasts(app: App[Any]) -> list[str]:
    """Every line the notifications on screen show (each toast's title, then its message), as the operator reads them.
    Textual shows notifications only in an app run with `run_test(notifications=True)`."""
    return [line for toast in app.screen.query("Toast") for line in str(toast.render()).splitlines()]

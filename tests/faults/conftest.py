"""Fault tests: pivot against hostile hosts, broken links and bad input, on the simulated host and on OpenSSH."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widget import Widget

from console import config
from console.config import HostSpec
from console.sim.host import SimHost
from console.sim.state import GpuSpec, proc_start_ticks
from tests.test_openssh import SSHD, Sshd, sshd  # noqa: F401  (the OpenSSH fixture, shared)

# what a user on a shared host can put in a log line, an argv or a task: a window title, a cleared screen, an OSC 8 link
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"
HOSTILE_SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J"  # how it starts, written out (a narrow column cuts the rest)


@dataclass
class Host:
    """A host pivot reaches over SSH; both kinds are this machine, so the test can write into its workdir."""

    kind: str
    config_path: Path
    workdir: Path

    @property
    def config(self) -> config.Config:
        return config.load(self.config_path)

    @property
    def spec(self) -> HostSpec:  # (`config` here is the property above)
        return self.config.host()


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimHost]:
    host = SimHost(tmp_path / "host", gpus=GpuSpec(count=2))
    await host.start()
    try:
        yield host
    finally:
        await host.close()


def _openssh_host(sshd: Sshd, root: Path) -> Host:  # noqa: F811
    spec = sshd.spec
    workdir = root / "work"  # not made: pivot makes it on first contact, as on a new host
    root.mkdir(parents=True, exist_ok=True)
    path = root / "pivot.toml"
    path.write_text(
        f'default_host = "openssh"\ncampaign_dir = {json.dumps(str(root / "campaign"))}\n\n[hosts.openssh]\n'
        f'hostname = "127.0.0.1"\nport = {spec.port}\nuser = {json.dumps(spec.user)}\n'
        f"identity = {json.dumps(spec.identity)}\nknown_hosts = {json.dumps(spec.known_hosts)}\n"
        f"python = {json.dumps(sys.executable)}\nworkdir = {json.dumps(str(workdir))}\n"
    )
    return Host("openssh", path, workdir)


@pytest.fixture(params=["sim", "openssh"])
def host(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Host]:
    """The in-process simulated host, then OpenSSH's sshd (skipped where it is not installed; CI installs it)."""
    if request.param == "sim":
        sim_host: SimHost = request.getfixturevalue("sim")
        workdir = sim_host.home / ".pivot"
        yield Host("sim", sim_host.config_path, workdir)
    else:
        if SSHD is None:
            pytest.skip("OpenSSH sshd is not installed (CI installs openssh-server)")
        yield _openssh_host(request.getfixturevalue("sshd"), tmp_path / "openssh")


@dataclass
class FakeServer:
    """A server process pivot manages, as its record, pid file and log say, with a health endpoint that answers."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path


Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def serving(host: Host, answer: Answer, pidfile: str | None = None, **record: object) -> AsyncIterator[FakeServer]:
    """An HTTP server of the test's own (`answer`) on a loopback port, and a process that stands for it, written into
    the host's workdir as pivot writes a running server: its record (with `record`'s fields) and its pid file
    (`pidfile`'s text, else the pid)."""
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    host.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
    (host.workdir / "server.json").write_text(
        json.dumps(
            {
                "profile": "baseline",
                "argv": ["serve"],
                "pid": process.pid,
                "start_ticks": proc_start_ticks(process.pid),
                "started": time.time(),
                "host": "127.0.0.1",
                "port": port,
                "kind": "sglang",
                **record,
            }
        )
    )
    (host.workdir / "server.pid").write_text(f"{process.pid}\n" if pidfile is None else pidfile)
    try:
        yield FakeServer(process, port, host.workdir / "server.log")
    finally:
        process.kill()
        process.wait()
        server.close()


@pytest.fixture
async def managed_server(host: Host) -> AsyncIterator[FakeServer]:
    async def healthy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    async with serving(host, healthy) as server:
        server.log.write_bytes(b"The server is fired up and ready to roll!\n")
        yield server


async def pivot(config_path: Path, *args: str, stdin: bytes | None = None, timeout: float = 120) -> tuple[int, str, str]:
    """The `pivot` command in a process of its own, while this event loop keeps serving the in-process host."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "console",
        "--config",
        str(config_path),
        *args,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def run_pivot(
    config_path: Path, *args: str, stdin: str | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", "--config", str(config_path), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def rendered(widget: Widget) -> str:
    """The text a widget draws on the screen, line by line."""
    region = Region(0, 0, widget.size.width, widget.size.height)
    return "\n".join(strip.text for strip in widget.render_lines(region))


@pytest.fixture
def campaign_config(tmp_path: Path) -> Iterator[Path]:
    """A pivot.toml with only a campaign: for the task and event commands."""
    path = tmp_path / "pivot.toml"
    path.write_text('campaign_dir = "campaign"\n')
    yield path

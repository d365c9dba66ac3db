"""Item 17: a console killed abruptly leaves no telemetry agent behind on the host (the agent ends when its channel
does), on OpenSSH and on the simulated host, and the simulated host logs no traceback for it."""

from __future__ import annotations

import asyncio
import functools
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.faults.conftest import Host

CLIENT = Path(__file__).with_name("telemetry_client.py")


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie its parent has not reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


async def test_an_agent_ends_when_its_console_is_killed(host: Host, caplog: pytest.LogCaptureFixture) -> None:
    agents = []
    for _ in range(3):
        client = await asyncio.create_subprocess_exec(sys.executable, str(CLIENT), str(host.config_path), stdout=subprocess.PIPE)
        assert client.stdout is not None
        agent = int(await asyncio.wait_for(client.stdout.readline(), 60))
        assert not gone(agent)
        client.kill()  # SIGKILL: no channel close, no goodbye; the kernel closes its socket
        await client.wait()
        agents.append(agent)
    for agent in agents:
        await wait_for(functools.partial(gone, agent), timeout=30, interval=0.2)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors  # the simulated host read nothing for nobody (no 'feed_data after feed_eof')

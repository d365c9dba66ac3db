"""The console in a real terminal (tmux), for what only a terminal shows: what is left painted on it. Textual's own
test pilot composes every frame afresh, so a stale cell never shows there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import HostProcess, wait_for

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None and not os.environ.get("CI"), reason="tmux is not installed (CI installs it)")


@pytest.fixture
def terminal(sim_host_process: HostProcess, tmp_path: Path) -> Iterator[str]:
    """The console on the simulated host over SSH, in a detached tmux session of 80x24 on a tmux server of its own
    (its socket in tmp_path), ended with the test."""
    assert TMUX is not None, "tmux is not installed"
    socket, name = str(tmp_path / "tmux.sock"), f"pivot-{uuid.uuid4().hex[:8]}"
    command = f"{sys.executable} -m console --config {sim_host_process.config_path} --host demo"
    subprocess.run([TMUX, "-S", socket, "new-session", "-d", "-s", name, "-x", "80", "-y", "24", command], check=True, timeout=30)
    try:
        yield f"{socket}\0{name}"
    finally:
        subprocess.run([TMUX, "-S", socket, "kill-server"], timeout=30, check=False)


def screen(terminal: str) -> str:
    socket, name = terminal.split("\0")
    assert TMUX is not None
    return subprocess.run([TMUX, "-S", socket, "capture-pane", "-p", "-t", name], capture_output=True, text=True, timeout=30).stdout


def keys(terminal: str, *pressed: str) -> None:
    socket, name = terminal.split("\0")
    assert TMUX is not None
    subprocess.run([TMUX, "-S", socket, "send-keys", "-t", name, *pressed], check=True, timeout=30)


async def test_a_toast_that_expired_is_gone_from_the_terminal_over_a_pane_where_nothing_changes(terminal: str) -> None:
    await wait_for(lambda: "Sweep" in screen(terminal), timeout=60)
    keys(terminal, "4", "z")  # the zoomed Sweep pane with no run: nothing under the toast is drawn again
    await wait_for(lambda: "no sweep yet" in screen(terminal) and "GPUs" not in screen(terminal), timeout=30)
    keys(terminal, "c")
    await wait_for(lambda: "needed to compare" in screen(terminal), timeout=30)  # "two runs with completed levels are needed…"
    await wait_for(lambda: "needed to compare" not in screen(terminal), timeout=60)  # Textual's 5 s, and it is painted over
    keys(terminal, "q")

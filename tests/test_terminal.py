"""The console in a real terminal (tmux), for what only a terminal shows: what is left painted on it. Textual's own
test pilot composes every frame afresh, so a stale cell never shows there."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.conftest import HostProcess, wait_for

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None and not os.environ.get("CI"), reason="tmux is not installed (CI installs it)")


@pytest.fixture
def terminal(sim_host_process: HostProcess) -> Iterator[str]:
    """The console on the simulated host over SSH, in a detached tmux session of 80x24 on a tmux server of its own
    (named, not a socket path: a long temporary directory can exceed a socket path's limit), ended with the test.
    The window stays when the console ends, so that a crash is on the screen the failure prints."""
    assert TMUX is not None, "tmux is not installed"
    server = f"pivot-test-{uuid.uuid4().hex[:8]}"
    command = shlex.join([sys.executable, "-m", "console", "--config", str(sim_host_process.config_path), "--host", "demo"])
    subprocess.run([TMUX, "-L", server, "new-session", "-d", "-s", "console", "-x", "80", "-y", "24", command], check=True, timeout=30)
    subprocess.run([TMUX, "-L", server, "set-option", "-t", "console", "remain-on-exit", "on"], check=False, timeout=30)
    try:
        yield server
    finally:
        subprocess.run([TMUX, "-L", server, "kill-server"], timeout=30, check=False)


def screen(server: str) -> str:
    assert TMUX is not None
    return subprocess.run([TMUX, "-L", server, "capture-pane", "-p", "-t", "console"], capture_output=True, text=True, timeout=30).stdout


def keys(server: str, *pressed: str) -> None:
    assert TMUX is not None
    subprocess.run([TMUX, "-L", server, "send-keys", "-t", "console", *pressed], check=True, timeout=30)


async def shows(server: str, wanted: Callable[[str], bool], timeout: float) -> None:
    """Wait for the screen to read as wanted (a tmux capture each 0.2 s); the screen in the failure, if it never does."""
    try:
        await wait_for(lambda: wanted(screen(server)), timeout=timeout, interval=0.2)
    except AssertionError:
        raise AssertionError(f"the terminal never showed what was waited for; it shows:\n{screen(server)}") from None


async def test_a_toast_that_expired_is_gone_from_the_terminal_over_a_pane_where_nothing_changes(terminal: str) -> None:
    await shows(terminal, lambda text: "Sweep" in text, timeout=60)
    keys(terminal, "4", "z")  # the zoomed Sweep pane with no run: nothing under the toast is drawn again
    await shows(terminal, lambda text: "no sweep yet" in text and "GPUs" not in text, timeout=30)
    keys(terminal, "c")
    await shows(terminal, lambda text: "needed to compare" in text, timeout=30)  # "two runs with completed levels are needed…"
    await shows(terminal, lambda text: "needed to compare" not in text, timeout=60)  # Textual's 5 s, and it is painted over
    keys(terminal, "q")

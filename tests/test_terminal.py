"""The console in a real terminal (tmux), for what only a terminal shows: what is left painted on it. Textual's own
test pilot composes every frame afresh, so a stale cell never shows there."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from console.sweep.runs.store import list_runs
from tests.conftest import HostProcess, host_process, wait_for

TMUX = shutil.which("tmux")
pytestmark = [
    pytest.mark.slow,  # the console in tmux, on demo hosts
    pytest.mark.skipif(TMUX is None and not os.environ.get("CI"), reason="tmux is not installed (CI installs it)"),
]


def in_tmux(*command: str, status: Path | None = None) -> Iterator[str]:
    """`command` in a detached tmux session of 80x24 on a tmux server of its own (named, not a socket path: a long
    temporary directory can exceed a socket path's limit), ended with the test. The window stays when the command
    ends, so that a crash is on the screen the failure prints; its exit status is written to `status` (after a
    full-screen program, what the shell prints does not always reach tmux's capture)."""
    assert TMUX is not None, "tmux is not installed"
    server = f"pivot-test-{uuid.uuid4().hex[:8]}"
    line = shlex.join(command) + (f"; echo $? > {shlex.quote(str(status))}" if status else "")
    subprocess.run([TMUX, "-L", server, "new-session", "-d", "-s", "console", "-x", "80", "-y", "24", line], check=True, timeout=30)
    subprocess.run([TMUX, "-L", server, "set-option", "-t", "console", "remain-on-exit", "on"], check=False, timeout=30)
    try:
        yield server
    finally:
        subprocess.run([TMUX, "-L", server, "kill-server"], timeout=30, check=False)


async def exit_status(status: Path) -> int:
    await wait_for(lambda: status.exists() and status.read_text().strip(), timeout=120, interval=0.2)
    return int(status.read_text())


def pivot(host: HostProcess, *args: str) -> list[str]:
    return [sys.executable, "-m", "console", "--config", str(host.config_path), *args]


@pytest.fixture
def terminal(sim_host_process: HostProcess) -> Iterator[str]:
    """The console on the simulated host over SSH."""
    yield from in_tmux(*pivot(sim_host_process, "--host", "demo"))


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[HostProcess]:
    """The simulated host with the demo's baseline server running, at 20 times real time."""
    yield from host_process(tmp_path, 20, server="baseline")


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


async def test_keys_typed_behind_n_are_the_sweep_forms(terminal: str) -> None:
    """`n` and the levels typed at once: the form is up before they arrive, and they replace its default levels (a
    newcomer's "1,2,5" went to the console behind it, where 1 and 2 move the focus)."""
    await shows(terminal, lambda text: "Sweep" in text, timeout=60)
    keys(terminal, "4")
    await shows(terminal, lambda text: "n Sweep" in text or "Sweep ─" in text, timeout=30)
    keys(terminal, "n", "1", ",", "2", ",", "5")
    await shows(terminal, lambda text: "Levels         1,2,5 " in text, timeout=30)
    keys(terminal, "Escape")
    await shows(terminal, lambda text: "Levels" not in text, timeout=30)


def finished_requests(host: HostProcess, run: str) -> int:
    lines = (host.config.campaign_dir / "runs" / run / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    return sum(1 for e in events if e["type"] == "request" and not e.get("warmup") and not e.get("error") and not e.get("reference"))


def resumed_to_completion(host: HostProcess, run: str, kept: int) -> None:
    """`pivot sweep --resume` measures what is missing; every request kept before is still there, none measured twice."""
    done = subprocess.run(pivot(host, "sweep", "--resume", run), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (after,) = [r for r in list_runs(host.config.campaign_dir) if r.name == run]
    assert after.state == "complete" and finished_requests(host, run) >= kept


async def test_q_mid_sweep_asks_and_an_abort_keeps_every_finished_request(serving: HostProcess, tmp_path: Path) -> None:
    for server in in_tmux(*pivot(serving, "--host", "demo"), status=tmp_path / "status"):
        await shows(server, lambda text: "ready" in text, timeout=120)
        keys(server, "4", "n", "1,2,5")  # typed at once: the form is up before the levels arrive
        await shows(server, lambda text: "Levels         1,2,5 " in text, timeout=30)
        keys(server, "Enter")
        await shows(server, lambda text: "level 2 of 3" in text, timeout=180)
        keys(server, "q")
        await shows(server, lambda text: "A sweep is in progress" in text and "Abort now" in text, timeout=30)
        keys(server, "a")
        assert await exit_status(tmp_path / "status") == 0  # quit once the abort kept what finished
        (run,) = list_runs(serving.config.campaign_dir)
        levels = {lv.c: lv for lv in run.levels()}
        assert run.state == "partial" and levels[1].measured and not levels[1].lacking
        # the level in flight when `a` came (C=2, or C=5 where C=2 ended meanwhile) cut short, or not kept at all where
        # none of its requests had finished; every level before it whole
        assert [c for c, lv in levels.items() if lv.lacking] in ([], [max(levels)])
        kept = finished_requests(serving, run.name)
        assert kept >= 16  # C=1's, and whatever of C=2 finished
        resumed_to_completion(serving, run.name, kept)


async def test_ctrl_c_on_a_headless_sweep_says_what_was_kept_and_resumes(serving: HostProcess, tmp_path: Path) -> None:
    def ready() -> bool:
        return "ready" in subprocess.run(pivot(serving, "server", "status"), capture_output=True, text=True, timeout=60).stdout

    await wait_for(ready, timeout=120, interval=0.5)
    for server in in_tmux(*pivot(serving, "sweep", "--levels", "1,2", "--requests", "64"), status=tmp_path / "status"):

        def measuring() -> bool:  # C=1 under way, a request of it finished
            runs = list_runs(serving.config.campaign_dir)
            return any(finished_requests(serving, r.name) for r in runs if (r.dir / "events.jsonl").exists())

        await wait_for(measuring, timeout=180, interval=0.1)
        keys(server, "C-c")
        assert await exit_status(tmp_path / "status") == 130
        said = " ".join(screen(server).split())
        # the resume line names the demo's config, which pivot would not find by itself
        assert "interrupted:" in said and "pivot --config " in said and " sweep --resume " in said, said
        (run,) = list_runs(serving.config.campaign_dir)
        kept = finished_requests(serving, run.name)  # the host's last events taken, its spool removed (not left waiting)
        assert run.state == "partial" and f"interrupted: {kept} finished request(s) kept" in said, (run.state, said)
        resumed_to_completion(serving, run.name, finished_requests(serving, run.name))

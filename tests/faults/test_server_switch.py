"""Item 10: a switch to a profile whose preflight fails stops nothing (it used to stop the healthy server, then refuse
to start), and every stop, also the one inside a switch, is in the event log. From the CLI, the Server pane and the
runbook's switch step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from console import config
from console.events import EventLog
from console.server.state import ServerState
from tests.conftest import HostProcess, free_port, toasts, wait_for


@pytest.fixture
def switch_config(sim_host_process: HostProcess, tmp_path: Path) -> Path:
    """Profiles that share one port, as the shipped baseline and eagle3 do, and one whose model is missing."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    port = free_port()
    (profiles / "t-baseline.toml").write_text(f'extends = "demo-baseline"\nport = {port}\n')
    (profiles / "t-eagle3.toml").write_text(f'extends = "demo-eagle3"\nport = {port}\n')
    (profiles / "t-nomodel.toml").write_text(f'extends = "demo-eagle3"\nport = {port}\nmodel_path = "~/models/nope"\n')
    path = tmp_path / "pivot.toml"
    path.write_text(sim_host_process.config_path.read_text().replace("[hosts.demo]", f'profiles_dir = "{profiles}"\n\n[hosts.demo]'))
    return path


def stops(cfg: config.Config) -> list[dict]:
    return [e for e in EventLog(cfg.campaign_dir).read() if e["kind"] == "stop"]


def test_a_refused_switch_from_the_cli_leaves_the_server_running(switch_config: Path) -> None:
    def pivot(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "console", "--config", str(switch_config), *args], capture_output=True, text=True, timeout=300
        )

    cfg = config.load(switch_config)
    assert pivot("server", "start", "t-baseline").returncode == 0
    before = pivot("server", "status").stdout
    assert before.startswith("ready t-baseline (pid ")
    pid = before.split("(pid ")[1].split(")")[0]

    refused = pivot("server", "switch", "t-nomodel")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "FAIL model path: " in refused.stdout and "does not exist on the host" in refused.stdout
    assert "warn GPUs idle: " in refused.stdout and "warn port free: " in refused.stdout  # the stop would free them
    assert f"nothing was stopped: t-baseline (pid {pid}) still runs" in refused.stdout
    assert pivot("server", "status").stdout.startswith(f"ready t-baseline (pid {pid})") and stops(cfg) == []

    switched = pivot("server", "switch", "t-eagle3")
    assert switched.returncode == 0, switched.stdout + switched.stderr
    [stop] = stops(cfg)
    assert (stop["profile"], stop["pid"], stop["during"]) == ("t-baseline", int(pid), "switch to t-eagle3")
    assert pivot("server", "stop").returncode == 0
    assert [s["profile"] for s in stops(cfg)] == ["t-baseline", "t-eagle3"]


async def test_a_refused_switch_from_the_pane_and_the_runbook_leaves_the_server_running(switch_config: Path) -> None:
    from textual.widgets import OptionList

    from console.actions.campaign import ActionFailed, CampaignActions
    from console.session import Session
    from console.ui.app import PivotApp
    from console.ui.widgets.server.pane import ServerPane

    cfg = config.load(switch_config)
    app = PivotApp(Session(cfg, "demo", via="console"))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        pane = app.query_one(ServerPane)
        assert app.session.lifecycle is not None
        await app.session.lifecycle.start(cfg_profile(cfg, "t-baseline"))
        await wait_for(lambda: pane.status.state == ServerState.READY, timeout=60)
        pid = pane.status.pid
        await pilot.press("2")
        options = app.query_one("#profiles", OptionList)
        options.highlighted = [o.id for o in options.options].index("t-nomodel")
        await pilot.press("W", "y")
        await wait_for(lambda: any("nothing was stopped" in m for m in toasts(app)), timeout=60)
        assert "model path" in str(app.query_one("#preflight").render())

        actions = CampaignActions(app.session, confirm_kill=lambda q: _no())
        with pytest.raises(ActionFailed, match=r"nothing was stopped: t-baseline \(pid \d+\) still runs"):
            await actions.do_switch("t-nomodel")
        status = await app.session.lifecycle.poll()
        assert (status.state, status.profile, status.pid) == (ServerState.READY, "t-baseline", pid)
        assert stops(cfg) == []
        await app.session.lifecycle.stop()
        assert [s["pid"] for s in stops(cfg)] == [pid]


def cfg_profile(cfg: config.Config, name: str):  # type: ignore[no-untyped-def]
    from console.server.profiles import load_profiles

    return load_profiles(*cfg.profile_dirs).get(name)


async def _no() -> bool:
    return False


def test_a_stop_when_the_campaign_cannot_be_written_says_what_it_did(switch_config: Path) -> None:
    """`server stop` (or `kill --stray`) with a full campaign disk (issue 34, M3): the server was stopped and the only
    output was `pivot: No space left on device`. Now the stop is said, and the event that could not be written too."""

    def pivot(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "console", "--config", str(switch_config), *args], capture_output=True, text=True, timeout=300
        )

    cfg = config.load(switch_config)
    assert pivot("server", "start", "t-baseline").returncode == 0
    log = cfg.campaign_dir / "events.jsonl"
    log.unlink(missing_ok=True)
    log.symlink_to("/dev/full")  # every write: ENOSPC, as a full disk answers
    stopped = pivot("server", "stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "stopped" in stopped.stdout and "Traceback" not in stopped.stderr
    assert f"{log}: the stop event was not written (No space left on device); what it records happened" in stopped.stderr
    assert pivot("server", "status").stdout.startswith("stopped")


def test_a_stop_on_a_full_host_disk_says_so_and_leaves_no_temporary_file(switch_config: Path, tmp_path: Path) -> None:
    """`server stop` with the host's workdir full (issue 34, M2): the server was killed, then `the record was not marked
    stopped: another console acted on this host meanwhile`, and a 0-byte `server.json.tmp.N` was left per try. The
    workdir here is on a small tmpfs, filled once the server runs."""
    import contextlib
    import errno

    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(small)], capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        switch_config.write_text(switch_config.read_text().replace('workdir = "~/.pivot"', f'workdir = "{small}/w"'))

        def pivot(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "console", "--config", str(switch_config), *args], capture_output=True, text=True, timeout=300
            )

        assert pivot("server", "start", "t-baseline").returncode == 0
        with contextlib.suppress(OSError), open(small / "filler", "wb") as f:  # the disk full, as another job leaves it
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        with pytest.raises(OSError) as full:
            (small / "w" / "probe").write_bytes(b"x" * 65536)
        assert full.value.errno == errno.ENOSPC
        stopped = pivot("server", "stop")
        assert stopped.returncode != 0 and "Traceback" not in stopped.stderr
        assert "the server was stopped (pid " in stopped.stderr and "but its record could not be marked stopped: is " in stopped.stderr
        assert "another console" not in stopped.stderr, stopped.stderr
        assert not list((small / "w").glob("server.json.tmp.*"))
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)

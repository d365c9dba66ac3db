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
from tests.conftest import HostProcess, free_port, wait_for


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
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(ServerPane)
        assert app.session.lifecycle is not None
        await app.session.lifecycle.start(cfg_profile(cfg, "t-baseline"))
        await wait_for(lambda: pane.status.state == ServerState.READY, timeout=60)
        pid = pane.status.pid
        await pilot.press("2")
        options = app.query_one("#profiles", OptionList)
        options.highlighted = [o.id for o in options._options].index("t-nomodel")
        await pilot.press("W", "y")
        await wait_for(lambda: any("nothing was stopped" in n.message for n in app._notifications), timeout=60)
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

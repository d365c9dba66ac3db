"""Several hosts at once: `pivot demo --serve --hosts N` serves N simulated hosts, each with its own GPUs, and
`pivot gpus --all` looks at every one of them together, a host that does not answer said so beside the others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import host_process
from tests.faults.conftest import run_pivot

pytestmark = pytest.mark.slow  # a fleet of demo hosts


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Path]:
    """Three simulated hosts (8, 4 and 8 GPUs), the first serving demo-baseline: their one config."""
    served = host_process(tmp_path, 20, server="baseline", hosts=3)
    try:
        yield next(served).config_path
    finally:
        served.close()  # the hosts end with it


def test_gpus_all_looks_at_every_host_and_says_which_does_not_answer(fleet: Path) -> None:
    text = fleet.read_text()
    fleet.write_text(
        text.replace("[sweep]", '[hosts.gone]\nhostname = "127.0.0.1"\nport = 1\nrole = "gpu"\nconnect_timeout_s = 2\n\n[sweep]')
    )
    looked = run_pivot(fleet, "gpus", "--all", "--json")
    assert looked.returncode == 1, looked.stderr  # one host could not be looked at
    views = {v["host"]: v for v in map(json.loads, looked.stdout.splitlines())}
    assert list(views) == ["gpu01", "gpu02", "gpu03", "gone"]
    assert [views[h]["gpus"] for h in ("gpu01", "gpu02", "gpu03")] == [8, 4, 8]  # each host its own GPUs
    assert views["gone"]["state"] == "unreachable" and views["gone"]["problem"]
    assert all(views[h]["state"] == "up" and views[h]["rtt_ms"] is not None for h in ("gpu01", "gpu02", "gpu03"))
    assert views["gpu01"]["server"].startswith(("starting demo-baseline", "ready demo-baseline"))
    assert views["gpu02"]["server"] == "stopped" and views["gpu02"]["busy"] == 0
    table = run_pivot(fleet, "gpus", "--all")
    assert table.returncode == 1 and "gpu02" in table.stdout and "unreachable" in table.stdout


async def test_the_fleet_screen_follows_every_host_and_enter_opens_one(fleet: Path) -> None:
    from textual.widgets import DataTable

    from console import config
    from console.ui.fleet_app import FleetApp
    from tests.conftest import wait_for

    app = FleetApp(config.load(fleet))
    async with app.run_test(size=(120, 30)) as pilot:
        table = app.query_one(DataTable)

        def cell(host: str, column: str) -> str:
            return str(table.get_cell(host, column))

        await wait_for(lambda: all(cell(h, "GPUS BUSY") != "—" for h in ("gpu01", "gpu02", "gpu03")), timeout=60)
        await wait_for(lambda: cell("gpu02", "SERVER") == "stopped" and cell("gpu02", "LINK") == "up", timeout=60)
        assert cell("gpu02", "GPUS BUSY") == "0/4" and cell("gpu03", "GPUS BUSY") == "0/8"
        assert cell("gpu01", "SERVER").endswith("demo-baseline")
        await pilot.press("down", "enter")
    assert app.return_value == "gpu02"

    # back from gpu02 (issue 36): every line as it was, the cursor on gpu02, no line read `closed — — —` meanwhile
    back = FleetApp(config.load(fleet), remembered=app.remembered, cursor_host="gpu02")
    async with back.run_test(size=(120, 30)) as pilot:
        table = back.query_one(DataTable)
        assert table.cursor_row == 1
        assert [str(table.get_cell(h, "GPUS BUSY")) for h in ("gpu01", "gpu02", "gpu03")] == [
            str(c) for c in (app.remembered[h][3] for h in ("gpu01", "gpu02", "gpu03"))
        ]
        assert all(str(table.get_cell(h, "LINK")) == "up" for h in ("gpu01", "gpu02", "gpu03"))


async def test_k_on_the_fleet_kills_a_hosts_strays_after_the_same_confirmation(tmp_path: Path) -> None:
    """A server's main process ended behind the console's back leaves its workers stray; K on its line asks, as the
    GPU pane does, and kills them."""
    import os
    import signal

    from textual.widgets import DataTable

    from console import config
    from console.ui.fleet_app import FleetApp
    from console.ui.screens.confirm_kill import ConfirmKill
    from tests.conftest import wait_for

    served = host_process(tmp_path, 20, server="baseline", hosts=2)
    host = next(served)
    try:
        pidfile = host.root / "gpu01" / "home" / ".pivot" / "server.pid"
        await wait_for(pidfile.exists, timeout=30)
        app = FleetApp(config.load(host.config_path))
        async with app.run_test(size=(120, 30)) as pilot:
            table = app.query_one(DataTable)
            await wait_for(lambda: str(table.get_cell("gpu01", "GPUS BUSY")) not in ("—", "0/8"), timeout=60)
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
            await wait_for(lambda: str(table.get_cell("gpu01", "STRAY")) not in ("—", "0"), timeout=60)
            await pilot.press("K")
            await wait_for(lambda: isinstance(app.screen, ConfirmKill), timeout=10)
            screen = app.screen
            assert isinstance(screen, ConfirmKill) and screen.title_text.endswith("stray processes on gpu01?")
            await pilot.press("y")
            await wait_for(lambda: str(table.get_cell("gpu01", "STRAY")) == "0", timeout=60)
            await wait_for(lambda: str(table.get_cell("gpu01", "GPUS BUSY")) == "0/8", timeout=60)
    finally:
        served.close()

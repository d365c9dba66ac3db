"""The console over real SSH to the simulated host, driven with Textual's pilot."""

from __future__ import annotations

from console import config
from console.remote import ConnState
from console.sim.host import SimHost
from console.ui.app import PivotApp
from console.ui.widgets.host_status import HostStatus
from tests.conftest import wait_for


async def test_the_header_shows_the_connection_and_its_round_trip(sim_config: config.Config, sim_host: SimHost) -> None:
    app = PivotApp(sim_config, "demo")
    async with app.run_test(size=(80, 24)) as pilot:
        status = app.query_one(HostStatus)
        await wait_for(lambda: status.event is not None and status.event.state == ConnState.UP)
        await pilot.pause()
        assert "demo ● up" in str(status.render()) and " ms" in str(status.render())
        seen: list[ConnState] = []
        app.pool.get("demo").add_listener(lambda e: seen.append(e.state))
        sim_host.drop_clients()
        await wait_for(lambda: ConnState.DOWN in seen and seen[-1] == ConnState.UP, timeout=15)
        await pilot.pause()
        assert "demo ● up" in str(status.render())


async def test_panes_not_built_yet_say_so(sim_config: config.Config) -> None:
    app = PivotApp(sim_config, "demo")
    async with app.run_test(size=(200, 50)):
        for pane in ("#gpus", "#server", "#tasks", "#sweep"):
            assert "Not built yet." in str(app.query_one(pane).render())

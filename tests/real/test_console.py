"""The console against the same real llama-server (issue 20): the Server pane starts it and shows it ready with the
server's own log, a sweep started from the Sweep pane puts its levels on the chart, and the stop leaves nothing."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, OptionList

from console import config
from console.server.state import ServerState
from console.session import Session
from console.ui.app import PivotApp
from console.ui.widgets.server.log_view import LogView
from console.ui.widgets.server.pane import ServerPane
from console.ui.widgets.sweep.chart import SweepChart
from console.ui.widgets.sweep.form import SweepForm
from console.ui.widgets.sweep.pane import SweepPane
from tests.conftest import wait_for
from tests.real.conftest import RealHost, user_processes

pytestmark = pytest.mark.slow  # a real engine


async def test_the_console_starts_sweeps_and_stops_the_real_server(real_host: RealHost) -> None:
    app = PivotApp(Session(config.load(real_host.config), "cpu1", via="console"))
    async with app.run_test(size=(120, 40)) as pilot:
        server = app.query_one(ServerPane)
        await pilot.press("2")
        options = app.query_one("#profiles", OptionList)
        await wait_for(lambda: "ls-base" in [o.id for o in options.options], timeout=30)
        options.highlighted = [o.id for o in options.options].index("ls-base")
        await wait_for(lambda: server.status.state == ServerState.STOPPED, timeout=60)
        await pilot.press("S")
        await wait_for(lambda: server.status.state == ServerState.READY, timeout=120)
        log = app.query_one(LogView)
        await wait_for(lambda: any("model loaded" in line for line in log.lines_kept), timeout=30)  # its own log
        await pilot.press("4", "n")
        assert isinstance(app.screen, SweepForm)
        app.screen.query_one("#levels", Input).value = "1,2"
        app.screen.query_one("#max_tokens", Input).value = "16"
        await pilot.click("#start")
        pane = app.query_one(SweepPane)
        await wait_for(lambda: pane.handle is not None, timeout=30)
        await wait_for(lambda: pane.handle is None, timeout=600)
        assert [e.c for e in pane.levels] == [1, 2] and all(e.measured for e in pane.levels)
        assert app.query_one("#sweep-levels", DataTable).row_count == 2
        chart = app.query_one(SweepChart)
        assert [e.c for e in chart.data.levels] == [1, 2]  # its points on the chart
        assert app.session.lifecycle is not None
        await app.session.lifecycle.stop()
        await wait_for(lambda: server.status.state == ServerState.STOPPED, timeout=60)
    assert not [c for c in user_processes(real_host.user) if "llama-server" in c]

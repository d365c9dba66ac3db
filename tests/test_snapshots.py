"""SVG snapshots of the console with eight GPUs (pytest --snapshot-update to accept a change you meant)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import config
from console.session import Session
from console.ui.app import PivotApp
from console.ui.widgets.server.log_view import LogView
from tests.conftest import settled, wait_for
from tests.fake_telemetry import LOG, FakeLifecycle, FakeTelemetry


def make_app(tmp_path: Path) -> PivotApp:
    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign", simulated=True)  # the demo host's screens
    return PivotApp(Session(cfg, None, local=True, via="console", telemetry=FakeTelemetry(), lifecycle=FakeLifecycle()), theme="pivot-dark")


async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
    await settled(pilot)


class TestGpuPane:
    @pytest.mark.parametrize("size", [(80, 24), (200, 50)])
    def test_four_panes(self, snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=settle)

    @pytest.mark.parametrize("size", [(80, 24), (200, 50)])
    def test_zoomed(self, snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
        async def zoom(pilot) -> None:  # type: ignore[no-untyped-def]
            await settle(pilot)
            await pilot.press("z")
            await pilot.pause()

        assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=zoom)

    def test_kill_dialog(self, snap_compare, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
        async def ask(pilot) -> None:  # type: ignore[no-untyped-def]
            await settle(pilot)
            await pilot.press("K")
            await pilot.pause()

        assert snap_compare(make_app(tmp_path), terminal_size=(80, 24), run_before=ask)


class TestServerPane:
    @pytest.mark.parametrize("size", [(80, 24), (200, 50)])
    def test_zoomed(self, snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
        async def zoom(pilot) -> None:  # type: ignore[no-untyped-def]
            await settle(pilot)
            await pilot.press("2", "z")
            log = pilot.app.query_one(LogView)
            await wait_for(lambda: len(log.lines) >= len(LOG) and log.scroll_y == log.max_scroll_y)  # at its end, zoomed
            await settled(pilot)

        assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=zoom)


def app_with_runs(tmp_path: Path) -> PivotApp:
    from tests.fixtures_runs import BASELINE, EAGLE3, write_run

    campaign = tmp_path / "campaign"
    write_run(campaign, "base", "baseline", BASELINE, speculative=False)
    write_run(campaign, "spec", "eagle3", EAGLE3, speculative=True)
    return make_app(tmp_path)


class TestSweepPane:
    @pytest.mark.parametrize("size", [(80, 24), (200, 50)])
    def test_two_runs(self, snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
        async def zoom(pilot) -> None:  # type: ignore[no-untyped-def]
            await settle(pilot)
            await pilot.press("4", "z")
            await settled(pilot)

        assert snap_compare(app_with_runs(tmp_path), terminal_size=size, run_before=zoom)

    @pytest.mark.parametrize("size", [(80, 24), (200, 50)])
    def test_comparison(self, snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
        async def compare(pilot) -> None:  # type: ignore[no-untyped-def]
            await settle(pilot)
            await pilot.press("4", "z", "c")
            await settled(pilot)

        assert snap_compare(app_with_runs(tmp_path), terminal_size=size, run_before=compare)

    @pytest.mark.parametrize("size", [(80, 24), (200, 50)])
    def test_unzoomed(self, snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
        async def focus(pilot) -> None:  # type: ignore[no-untyped-def]
            await settle(pilot)
            await pilot.press("4")
            await settled(pilot)

        assert snap_compare(app_with_runs(tmp_path), terminal_size=size, run_before=focus)


async def test_the_chart_reads_upward_or_gives_way_to_a_line_of_numbers(tmp_path: Path) -> None:
    """As Textual renders it: where the pane leaves the chart too few rows (80x24, four panes), one line with the
    last level's numbers and the key for the chart; zoomed, a chart whose left axis grows upward."""
    from console.ui.widgets.sweep.chart import SweepChart

    app = app_with_runs(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settled(pilot)
        chart = app.query_one(SweepChart)
        line = str(chart.render())
        assert line.startswith("C=250: 354.0 tok/s, 1.4 per request") and line.endswith("z: the chart"), line
        await pilot.press("z")
        await settled(pilot)
        await wait_for(lambda: chart.size.height >= 10, timeout=10)
        await settled(pilot)
        for height in (24, 25, 27, 30, 36):
            if height != 24:
                await pilot.resize_terminal(80, height)
                await settled(pilot)
            rows = str(chart.render()).splitlines()
            labelled = [(i, float(row.split("┤")[0])) for i, row in enumerate(rows) if "┤" in row]
            ticks = [value for _, value in labelled]
            assert len(ticks) >= 3 and ticks == sorted(ticks, reverse=True), ticks  # the top row's value is the largest
            # each label on its row: the same value per row between any two (plotext's own ticks, spaced for more
            # rows than a short chart has, put 314.0 where the row stood for 360)
            (top_row, top), (bottom_row, bottom) = labelled[0], labelled[-1]
            per_row = (top - bottom) / (bottom_row - top_row)
            assert all(abs(value - (top - (i - top_row) * per_row)) <= 0.1 for i, value in labelled), (height, labelled)


class TestTasksPane:
    @pytest.mark.parametrize("size", [(80, 24), (200, 50)])
    def test_campaign_tasks(self, snap_compare, tmp_path: Path, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
        import json
        import time

        campaign = tmp_path / "campaign"
        campaign.mkdir()
        since = time.time() - 600  # "10 min" in progress, stable during the test
        tasks = [
            ("Kill current EAGLE-3 server and zombie processes", "high", "completed"),
            ("Start baseline server (no speculation) with flashinfer + fusion", "high", "in_progress"),
            ("Run parallel benchmark at C=1,2,5,10,30,70,100,250 on baseline", "high", "pending"),
            ("Compare EAGLE-3 vs baseline results and find crossover point", "medium", "pending"),
        ]
        (campaign / "tasks.json").write_text(
            json.dumps(
                {
                    "version": 1,
                    "tasks": [
                        {"id": f"t{i}", "content": c, "priority": p, "status": s, "history": [[since, s]]}
                        for i, (c, p, s) in enumerate(tasks)
                    ],
                }
            )
        )

        async def zoom(pilot) -> None:  # type: ignore[no-untyped-def]
            await settle(pilot)
            await pilot.press("3", "z")
            await pilot.pause()

        assert snap_compare(make_app(tmp_path), terminal_size=size, run_before=zoom)

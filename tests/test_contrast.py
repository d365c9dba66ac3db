"""The colours the console puts on the screen, read from what Textual renders (tests/rendered.py), for every shipped
theme, as started and after the theme changed at runtime: every text pivot draws reaches WCAG's 3:1 against the
background it is drawn on, and pivot-16 sends nothing but the terminal's own 16 colours.

pivot-16 is measured with the palette Textual itself shows ANSI colours with: MONOKAI, the dark one, as pivot-16 says
`dark = true` (a light terminal would show it with ALABASTER)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from console import config
from console.session import Session
from console.ui.app import PivotApp
from console.ui.widgets.gpu.pane import GpuPane
from console.ui.widgets.sweep.pane import SweepPane
from console.ui.widgets.sweep.progress import LiveLevel
from tests.conftest import settled
from tests.fake_telemetry import FakeLifecycle, FakeTelemetry
from tests.fixtures_runs import BASELINE, EAGLE3, write_run
from tests.rendered import Cells, cells, contrast, is_16_colour, shown

THEMES = ("pivot-dark", "pivot-light", "pivot-16")
LEAST = 3.0  # WCAG 2: large text, and what must be told from its background (borders, a chart's marks)
SIZES = [(80, 24), (200, 50)]


def themed_app(tmp_path: Path, theme: str) -> PivotApp:
    """Three runs: the newest on screen, the two before it overlaid, the comparison of the last two (the
    baseline and EAGLE-3, 3 % faster than the baseline at C = 1 in total, across the margin's edge: ratios that
    favour A, B, and neither)."""
    campaign = tmp_path / "campaign"
    write_run(campaign, "1-older", "baseline", {c: (t * 0.9, p * 0.95) for c, (t, p) in BASELINE.items()}, speculative=False)
    write_run(campaign, "2-base", "baseline", BASELINE, speculative=False)
    write_run(campaign, "3-spec", "eagle3", {**EAGLE3, 1: (87.0, 110.0)}, speculative=True)
    cfg = config.Config(path=None, hosts={}, campaign_dir=campaign)
    return PivotApp(Session(cfg, None, local=True, via="console", telemetry=FakeTelemetry(), lifecycle=FakeLifecycle()), theme=theme)


async def stage(pilot) -> None:  # type: ignore[no-untyped-def]
    """Everything pivot colours on screen at once: a warning and an error line, a client-bound level and a level in
    progress on the chart, then the Sweep pane zoomed with the comparison."""
    app = pilot.app
    await settled(pilot)
    app.query_one(GpuPane).say("kill failed: pid 2004 is still there", "error")  # the server log has both kinds too
    pane = app.query_one(SweepPane)
    pane.warnings = ["C = 250 exceeds the server's max_running_requests (128)"]
    pane.levels[3] = pane.levels[3].model_copy(update={"client_bound": "the client's CPU at 97 %"})
    pane.data.live = LiveLevel(c=500, tokens=6000, started=time.monotonic() - 2.0, done=3, requests=8)
    pane.changed()
    await pilot.press("4", "z", "c")
    await settled(pilot)


async def views(pilot) -> AsyncIterator[tuple[str, list[Cells]]]:  # type: ignore[no-untyped-def]
    """From the staged Sweep pane: it, with its chart again (a comparison in a pane under 40 rows takes the chart's
    room), the four panes (the Sweep pane focused), and the sweep form; back to it."""
    yield "the Sweep pane zoomed with the comparison", list(cells(pilot.app))
    await pilot.press("c")
    await settled(pilot)
    yield "the Sweep pane zoomed with its chart", list(cells(pilot.app))
    await pilot.press("z")
    await settled(pilot)
    yield "the four panes", list(cells(pilot.app))
    await pilot.press("n")
    await settled(pilot)
    yield "the sweep form", list(cells(pilot.app))
    await pilot.press("escape", "z", "c")
    await settled(pilot)


async def switch(pilot, theme: str) -> None:  # type: ignore[no-untyped-def]
    pilot.app.theme = theme
    await pilot.pause()  # the CSS refreshed, then the theme_changed_signal: the chart draws in the new colours
    await settled(pilot)


def braille(run: Cells) -> bool:
    return any("\u2800" < ch <= "\u28ff" for ch in run.text)


Expected = dict[str, Callable[[Cells], bool]]
# what each theme state must show, so that a scene that lost a part cannot pass by measuring less: at 80x24
EVERYWHERE: Expected = {
    "focused pane border": lambda r: r.widget == "SweepPane#sweep" and "╭" in r.text,
    "unfocused pane border": lambda r: r.widget in ("GpuPane#gpus", "ServerPane#server", "TasksPane#tasks") and "╭" in r.text,
    "chart title": lambda r: r.widget == "SweepChart#sweep-chart" and "by concurrency" in r.text,
    "chart ticks": lambda r: r.widget == "SweepChart#sweep-chart" and "┤" in r.text,
    "this run's curve": lambda r: r.widget == "SweepChart#sweep-chart" and braille(r),
    "sweep warning": lambda r: r.widget.endswith("#sweep-progress") and "⚠" in r.text,
    "recommendation": lambda r: r.widget.endswith("#sweep-compare-text") and "recommendation" in r.text,
    "GPU pane error line": lambda r: r.widget.endswith("#gpu-status") and "kill failed" in r.text,
    "sweep form": lambda r: r.widget.endswith("#levels"),  # the levels field (an Input)
}
SHORT: Expected = {  # a chart too short for its legend has it under it, in the series' colours
    **EVERYWHERE,
    **{
        f"legend: {marker}": (lambda m: lambda r: r.widget.endswith("#sweep-progress") and r.text.startswith(m))(marker)
        for marker in ("•", "+", "⣿", "?", "x", "●")
    },
}
TALL: Expected = {  # and at 200x50: each series in the chart, the comparison's table, the server log, the processes
    **EVERYWHERE,
    "earlier run 1": lambda r: r.widget == "SweepChart#sweep-chart" and "•" in r.text,
    "earlier run 2": lambda r: r.widget == "SweepChart#sweep-chart" and "+" in r.text,
    "second series": lambda r: r.widget == "SweepChart#sweep-chart" and "xxx" in r.text,
    "client-bound level": lambda r: r.widget == "SweepChart#sweep-chart" and "?" in r.text,
    "level in progress": lambda r: r.widget == "SweepChart#sweep-chart" and "●" in r.text,
    "B/A ratio, B leads": lambda r: r.widget.endswith("#sweep-compare-text") and "±" in r.text and r.text.strip().endswith("B"),
    "B/A ratio, A leads": lambda r: r.widget.endswith("#sweep-compare-text") and "±" in r.text and r.text.strip().endswith("A"),
    "B/A ratio, undecided": lambda r: r.widget.endswith("#sweep-compare-text") and "±" in r.text and r.text.strip().endswith("?"),
    "server log warning": lambda r: r.widget == "LogView#server-log" and "WARNING" in r.text,
    "server log error": lambda r: r.widget == "LogView#server-log" and "ERROR" in r.text,
    "GPU pane error line": lambda r: r.widget.endswith("#gpu-status") and "kill failed" in r.text,
    "process flags": lambda r: r.widget == "ProcessTable#gpu-procs" and "zombie" in r.text,
    "sweep form": lambda r: r.widget.endswith("#levels"),  # the levels field (an Input)
}


def measured(run: Cells) -> bool:
    """Every text on screen but the faded screen behind a dialog and Textual's own scrollbars and footer separators
    (shapes that mark a place, not text)."""
    return not run.behind and run.widget != "ScrollBar" and not (run.widget == "FooterKey" and run.text.strip() == "▏")


async def measure(pilot, theme: str, failures: list[str]) -> None:  # type: ignore[no-untyped-def]
    terminal = pilot.app.ansi_theme
    expected = TALL if pilot.app.size.height >= 50 else SHORT
    seen: set[str] = set()
    async for view, runs in views(pilot):
        for run in filter(measured, runs):
            seen |= {name for name, shows in expected.items() if shows(run)}
            fg, bg = shown(run, terminal)
            if (ratio := contrast(fg, bg)) < LEAST:
                failures.append(f"{theme}, {view}: {run}: {fg} on {bg} is {ratio:.2f}:1")
    failures.extend(f"{theme}: no {name} on screen to measure" for name in expected if name not in seen)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "200x50"])
@pytest.mark.parametrize("start", THEMES)
async def test_every_text_reaches_3_to_1_as_started_and_after_a_switch(tmp_path: Path, start: str, size: tuple[int, int]) -> None:
    """Started on a theme, then switched to each other one in turn and back: every theme measured as started, and
    after a switch from each other theme (over the three starts)."""
    chain = [start, *(t for t in THEMES if t != start), start]
    failures: list[str] = []
    async with themed_app(tmp_path, start).run_test(size=size) as pilot:
        await stage(pilot)
        for i, theme in enumerate(chain):
            if i:
                await switch(pilot, theme)
            await measure(pilot, f"{theme} after a switch from {chain[i - 1]}" if i else f"{theme} as started", failures)
    assert not failures, "\n".join(dict.fromkeys(failures))


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "200x50"])
async def test_pivot_16_sends_only_the_16_ansi_colours(tmp_path: Path, size: tuple[int, int]) -> None:
    """As started on pivot-16, and after a switch to it from each truecolor theme: every foreground and background
    of every segment Textual renders is the terminal's default or one of its 16 colours (no 256-colour index, no
    RGB), the chart included."""
    failures: list[str] = []
    async with themed_app(tmp_path, "pivot-16").run_test(size=size) as pilot:
        await stage(pilot)
        for i, theme in enumerate(["pivot-16", "pivot-dark", "pivot-16", "pivot-light", "pivot-16"]):
            if i:
                await switch(pilot, theme)
            if theme != "pivot-16":
                continue
            async for view, runs in views(pilot):
                failures.extend(
                    f"after {i // 2} switch(es), {view}: {run}: {run.fg!r} on {run.bg!r}"
                    for run in runs
                    if not (is_16_colour(run.fg) and is_16_colour(run.bg))
                )
    assert not failures, "\n".join(dict.fromkeys(failures))

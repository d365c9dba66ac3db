"""Theme files: checked against their schema, reported in one line, never an exception at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import config
from console.session import Session
from console.ui import themes
from console.ui.app import PivotApp
from console.ui.themes import DEFAULT_THEME, load_themes
from tests.conftest import settled, toasts
from tests.fake_telemetry import FakeTelemetry


def canned_app(tmp_path: Path, theme: str | None = None) -> PivotApp:
    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    return PivotApp(Session(cfg, None, local=True, via="console", telemetry=FakeTelemetry()), theme=theme)


def test_the_shipped_themes_load() -> None:
    loaded, errors = load_themes([config.shipped("themes")])
    assert {t.name for t in loaded} == {"pivot-dark", "pivot-light", "pivot-16"} and errors == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('name = "x"\nprimary = "not a colour"\n', "primary: expected a colour (a name, #rrggbb, rgb(r,g,b), ansi_…), got 'not a colour'"),
        ('name = "x"\nprimary = "#fff"\nprimery = "#000"\n', "primery: unknown key (known: name, primary, secondary, "),
        ('primary = "#fff"\n', "name: missing"),
        ('name = "x"\nprimary = "#fff"\ndark = "yes"\n', "dark: expected a boolean, got 'yes'"),
        ('name = "x"\nprimary = "#fff"\n[variables]\ngpu-stray = "loud"\n', "variables: gpu-stray: expected a colour"),
        ('name = "x"\nprimary = "#fff"\n[variables]\nchart-2 = "loud"\n', "variables: chart-2: expected a colour (a name, #rrggbb"),
        ('name = "x\n', "not valid TOML"),
    ],
)
def test_a_broken_theme_file_is_one_line_naming_it(text: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(text)
    loaded, errors = load_themes([tmp_path, config.shipped("themes")])
    assert "x" not in {t.name for t in loaded} and len(errors) == 1
    assert errors[0].startswith(f"{tmp_path / 'x.toml'}: {message}") and "\n" not in errors[0]


def test_a_missing_default_theme_has_a_stand_in(tmp_path: Path) -> None:
    loaded, errors = load_themes([tmp_path])
    assert [t.name for t in loaded] == [DEFAULT_THEME]
    assert errors == [f"no usable {DEFAULT_THEME}.toml in {config.shipped('themes')}: Textual's textual-dark stands in for it"]


async def test_the_console_starts_on_the_default_theme_whatever_the_files_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "themes"
    user.mkdir()
    (user / "pivot-dark.toml").write_text('name = "pivot-dark"\nprimary = "#12"\n')  # broken, over the shipped one
    (user / "mine.toml").write_text('name = "mine"\nprimary = "#ff00ff"\nbackground = 7\n')
    monkeypatch.setattr(themes, "theme_dirs", lambda: [user])  # and no shipped themes at all
    app = canned_app(tmp_path, theme="mine")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.pause()
        assert app.theme == DEFAULT_THEME
        said = toasts(app)
        assert any(m.startswith(f"{user / 'pivot-dark.toml'}: primary: expected a colour") for m in said)
        assert any(m.startswith(f"{user / 'mine.toml'}: background: expected a string, got 7") for m in said)
        assert any("textual-dark stands in" in m for m in said)
        assert "unknown theme 'mine'; using pivot-dark" in said


def test_a_theme_without_pivots_colours_gets_its_own() -> None:
    """Textual's themes (and a user's that sets none of pivot's variables): the chart in the theme's own colours, the
    unfocused borders halfway between its background and its text (an ANSI theme's: its text colour, and every
    colour of pivot's an ANSI one)."""
    from textual.theme import BUILTIN_THEMES

    for name in ("textual-light", "nord", "ansi-dark"):
        own = BUILTIN_THEMES[name].to_color_system().generate()
        derived = themes.variable_defaults(BUILTIN_THEMES[name])
        assert (derived["chart-run"], derived["chart-1"], derived["chart-live"]) == (own["foreground"], own["accent"], own["error"])
        if BUILTIN_THEMES[name].ansi:
            assert derived["pane-border"] == own["foreground"] and all(v.startswith("ansi_") for v in derived.values())
        else:
            assert derived["pane-border"] not in (own["background"], own["foreground"])


async def test_a_users_theme_file_colours_the_chart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fixtures_runs import BASELINE, EAGLE3, write_run
    from tests.rendered import cells

    user = tmp_path / "themes"
    user.mkdir()
    (user / "mine.toml").write_text(
        'name = "mine"\nprimary = "#5f87d7"\nbackground = "#000000"\n'
        '[variables]\nchart-run = "#ff00ff"\nchart-1 = "#00ff00"\nchart-axes = "#ffff00"\n'
    )
    monkeypatch.setattr(themes, "theme_dirs", lambda: [config.shipped("themes"), user])
    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path / "campaign", "spec", "eagle3", EAGLE3, speculative=True)
    app = canned_app(tmp_path, theme="mine")
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("4", "z")
        await settled(pilot)
        chart = {
            (run.text.strip()[:1], run.fg.triplet)
            for run in cells(app)
            if run.widget == "SweepChart#sweep-chart" and run.fg is not None and run.fg.triplet is not None
        }
        assert ("⣀", (255, 0, 255)) in chart and ("•", (0, 255, 0)) in chart and ("┌", (255, 255, 0)) in chart

"""Theme files: checked against their schema, reported in one line, never an exception at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import config
from console.session import Session
from console.ui import themes
from console.ui.app import PivotApp
from console.ui.themes import DEFAULT_THEME, load_themes
from tests.fake_telemetry import FakeTelemetry


def canned_app(tmp_path: Path, theme: str | None = None) -> PivotApp:
    cfg = config.Config(path=None, hosts={}, campaign_dir=tmp_path / "campaign")
    return PivotApp(Session(cfg, None, local=True, via="console", telemetry=FakeTelemetry()), theme=theme)


def test_the_shipped_themes_load() -> None:
    loaded, errors = load_themes([config.shipped("themes")])
    assert {t.name for t in loaded} == {"pivot-dark", "pivot-light", "pivot-16"} and errors == []


@pytest.mark.parametrize(("text", "message"), [
    ('name = "x"\nprimary = "not a colour"\n', "primary: expected a colour (a name, #rrggbb, rgb(r,g,b), ansi_…), got 'not a colour'"),
    ('name = "x"\nprimary = "#fff"\nprimery = "#000"\n', "primery: unknown key (known: name, primary, secondary, "),
    ('primary = "#fff"\n', "name: missing"),
    ('name = "x"\nprimary = "#fff"\ndark = "yes"\n', "dark: expected a boolean, got 'yes'"),
    ('name = "x"\nprimary = "#fff"\n[variables]\ngpu-stray = "loud"\n', "variables: gpu-mem-high, gpu-stray, gpu-zombie must be colours"),
    ('name = "x\n', "not valid TOML"),
])
def test_a_broken_theme_file_is_one_line_naming_it(text: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(text)
    loaded, errors = load_themes([tmp_path, config.shipped("themes")])
    assert "x" not in {t.name for t in loaded} and len(errors) == 1
    assert errors[0].startswith(f"{tmp_path / 'x.toml'}: {message}") and "\n" not in errors[0]


def test_a_missing_default_theme_has_a_stand_in(tmp_path: Path) -> None:
    loaded, errors = load_themes([tmp_path])
    assert [t.name for t in loaded] == [DEFAULT_THEME]
    assert errors == [f"no usable {DEFAULT_THEME}.toml in {config.shipped('themes')}: Textual's textual-dark stands in for it"]


async def test_the_console_starts_on_the_default_theme_whatever_the_files_say(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "themes"
    user.mkdir()
    (user / "pivot-dark.toml").write_text('name = "pivot-dark"\nprimary = "#12"\n')  # broken, over the shipped one
    (user / "mine.toml").write_text('name = "mine"\nprimary = "#ff00ff"\nbackground = 7\n')
    monkeypatch.setattr(themes, "theme_dirs", lambda: [user])  # and no shipped themes at all
    app = canned_app(tmp_path, theme="mine")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == DEFAULT_THEME
        said = [str(n.message) for n in app._notifications]
        assert any(m.startswith(f"{user / 'pivot-dark.toml'}: primary: expected a colour") for m in said)
        assert any(m.startswith(f"{user / 'mine.toml'}: background: expected a string, got 7") for m in said)
        assert any("textual-dark stands in" in m for m in said)
        assert "unknown theme 'mine'; using pivot-dark" in said

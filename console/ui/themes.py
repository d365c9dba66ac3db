"""Themes from TOML files: the shipped ones (console.themes, the repository's themes/) and the user's
~/.config/pivot/themes/.

Textual has no theme-file loader: each file is checked against ThemeFile, then becomes Theme(**data). A broken
file is reported in one line and never half-applied. The default theme is always there: when its file is missing
or broken, Textual's own dark theme stands in under its name, and that is reported too.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Annotated

from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

from console.config import Bool, Invalid, Number, Str, Table, expect, must, shipped, user_config_dir, validate

DEFAULT_THEME = "pivot-dark"
STAND_IN = "textual-dark"  # Textual's, for a default theme whose file is missing or broken
# app-specific colours, with defaults so that Textual's built-in themes work too
VARIABLE_DEFAULTS = {"gpu-mem-high": "#ff8700", "gpu-stray": "#d7af00", "gpu-zombie": "#ff5f87"}


def _is_colour(value: str) -> bool:
    try:
        Color.parse(value)
    except ColorParseError:
        return False
    return True


Colour = Annotated[Str, must(_is_colour, "expected a colour (a name, #rrggbb, rgb(r,g,b), ansi_…), got {value}")]
Variables = Annotated[
    dict[str, Str], expect("a table of strings"),
    must(lambda v: all(_is_colour(v[k]) for k in VARIABLE_DEFAULTS if k in v),
         f"{', '.join(VARIABLE_DEFAULTS)} must be colours, got {{value}}"),
]


class ThemeFile(Table):
    """The fields of Textual's Theme."""

    name: Str
    primary: Colour
    secondary: Colour | None = None
    warning: Colour | None = None
    error: Colour | None = None
    success: Colour | None = None
    accent: Colour | None = None
    foreground: Colour | None = None
    background: Colour | None = None
    surface: Colour | None = None
    panel: Colour | None = None
    boost: Colour | None = None
    dark: Bool = True
    luminosity_spread: Number = 0.15
    text_alpha: Number = 0.95
    variables: Variables = {}
    ansi: Bool = False


def theme_dirs() -> list[Path]:
    return [shipped("themes"), user_config_dir() / "themes"]


def _theme(path: Path) -> Theme:
    try:
        data = validate(ThemeFile, tomllib.loads(path.read_text(encoding="utf-8")))
        theme = Theme(**data.model_dump(exclude_unset=True))
        theme.to_color_system()  # what Textual derives from it, now rather than on first use
    except Invalid as e:
        raise ValueError(f"{path}: {e}") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None
    except (ValueError, TypeError) as e:  # what Textual refuses beyond the schema (ColorParseError is a ValueError)
        raise ValueError(f"{path}: {e}") from None
    return theme


def load_themes(dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    """The themes of every *.toml (a later one of the same name wins), and one line per file that is not one."""
    themes: list[Theme] = []
    errors: list[str] = []
    for directory in dirs or theme_dirs():
        for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
            try:
                themes.append(_theme(path))
            except ValueError as e:
                errors.append(str(e))
    if all(t.name != DEFAULT_THEME for t in themes):
        themes.append(dataclasses.replace(BUILTIN_THEMES[STAND_IN], name=DEFAULT_THEME))
        errors.append(f"no usable {DEFAULT_THEME}.toml in {shipped('themes')}: Textual's {STAND_IN} stands in for it")
    return themes, errors

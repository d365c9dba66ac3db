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

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError
from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

from console.config import shipped, user_config_dir
from console.schema import Bool, Invalid, Number, Str, Table, expect, must, validate

DEFAULT_THEME = "pivot-dark"
STAND_IN = "textual-dark"  # Textual's, for a default theme whose file is missing or broken
# app-specific colours, with defaults so that Textual's built-in themes work too
VARIABLE_DEFAULTS = {"gpu-mem-high": "#ff8700", "gpu-stray": "#d7af00", "gpu-zombie": "#ff5f87"}
ANSI_DEFAULTS = {"gpu-mem-high": "ansi_bright_red", "gpu-stray": "ansi_yellow", "gpu-zombie": "ansi_magenta"}  # ansi = true
# pivot's colours that a theme may set, and the colour of the theme's own each one is when it does not: the
# unfocused panes' borders, and the Sweep pane's chart (the run on screen, earlier runs oldest first, the second
# series on the right axis, the level in progress and client-bound points, the frame with its ticks and title)
DERIVED_VARIABLES = {
    "pane-border": "foreground 50%",
    "chart-run": "foreground",
    "chart-1": "accent",
    "chart-2": "secondary",
    "chart-3": "primary",
    "chart-4": "success",
    "chart-second": "warning",
    "chart-live": "error",
    "chart-axes": "foreground",
}
COLOUR_VARIABLES = [*VARIABLE_DEFAULTS, *DERIVED_VARIABLES]


def _is_colour(value: str) -> bool:
    try:
        Color.parse(value)
    except ColorParseError:
        return False
    return True


COLOUR_PROBLEM = "expected a colour (a name, #rrggbb, rgb(r,g,b), ansi_…), got {value}"
Colour = Annotated[Str, must(_is_colour, COLOUR_PROBLEM)]


def _colours(value: dict[str, str]) -> dict[str, str]:
    """pivot's own variables must be colours; a theme's other variables are Textual's business."""
    for key in COLOUR_VARIABLES:
        if key in value and not _is_colour(value[key]):
            raise PydanticCustomError("pivot", "{key}: " + COLOUR_PROBLEM, {"key": key, "value": repr(value[key])})
    return value


Variables = Annotated[dict[str, Str], expect("a table of strings"), AfterValidator(_colours)]


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


def variable_defaults(theme: Theme) -> dict[str, str]:
    """pivot's variables for a theme that does not set them (Textual's own, a user's): the fixed ones (ANSI colours
    for an ANSI theme), and each derived one from the theme's own colour ("foreground 50%": halfway from the
    background to the foreground)."""
    own = theme.to_color_system().generate()
    derived = {}
    for name, source in DERIVED_VARIABLES.items():
        key, _, share = source.partition(" ")
        colour = Color.parse(own[key])
        if share and colour.ansi is None:  # an ANSI colour has no shade between it and the terminal's background
            colour = Color.parse(own["background"]).blend(colour, float(share.rstrip("%")) / 100)
        derived[name] = colour.css if colour.ansi is not None else colour.hex
    return {**(ANSI_DEFAULTS if theme.ansi else VARIABLE_DEFAULTS), **derived}


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

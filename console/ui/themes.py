"""Themes from TOML files: the shipped ones (console.themes, the repository's themes/) and the user's
~/.config/pivot/themes/.

Textual has no theme-file loader: each file becomes Theme(**data). Broken files
are gathered and reported once, never half-applied.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from textual.color import ColorParseError
from textual.theme import Theme

from console.config import shipped, user_config_dir

DEFAULT_THEME = "pivot-dark"
# app-specific colours, with defaults so that Textual's built-in themes work too
VARIABLE_DEFAULTS = {"gpu-mem-high": "#ff8700", "gpu-stray": "#d7af00", "gpu-zombie": "#ff5f87"}
_FIELDS = set(Theme.__dataclass_fields__)


def theme_dirs() -> list[Path]:
    return [shipped("themes"), user_config_dir() / "themes"]


def load_themes(dirs: list[Path] | None = None) -> tuple[list[Theme], list[str]]:
    themes, errors = [], []
    for directory in dirs or theme_dirs():
        for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
                unknown = set(data) - _FIELDS
                if unknown:
                    raise ValueError(f"unknown key {sorted(unknown)[0]!r}")
                if "name" not in data or "primary" not in data:
                    raise ValueError("a theme needs at least name and primary")
                theme = Theme(**data)
                theme.to_color_system()  # parse every colour now, not on first use
                themes.append(theme)
            except (OSError, ValueError, TypeError, ColorParseError) as e:
                errors.append(f"{path}: {e}")
    return themes, errors

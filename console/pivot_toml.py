"""pivot.toml as the commands and the console read it: the ground floor's keys (console.config), then what lives
with its layer (`[sweep]`: console/sweep/settings.py; `[compare] slo`: console/sweep/analysis/slo.py), so that a bad
file stops any command, in one line naming the file and the key, before it does anything."""

from __future__ import annotations

import os

from console.config import Config, ConfigError
from console.config import load as load_keys
from console.schema import Invalid
from console.sweep.analysis.slo import Slo
from console.sweep.settings import SweepSettings


def load(explicit: str | os.PathLike[str] | None = None) -> Config:
    cfg = load_keys(explicit)
    try:
        SweepSettings.from_dict(cfg.sweep)
    except Invalid as e:
        raise ConfigError(cfg.path, f"sweep.{e.key}", e.problem) from None
    try:
        Slo.read(cfg.compare.slo)
    except ValueError as e:
        raise ConfigError(cfg.path, "compare.slo", str(e).removeprefix("slo: ")) from None
    return cfg

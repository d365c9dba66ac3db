"""One module per kind of inference server (see base.py). Every module of this package is imported here, and each
registers its engine: adding an engine is adding its module. `ENGINES` maps a kind to its engine."""

from __future__ import annotations

import importlib
import pkgutil

from console.engines.base import (
    ENGINES,
    HEALTH_PATH,
    POSITIONAL,
    Drafting,
    Engine,
    FlagValue,
    LengthSchedule,
    Measured,
    NoAdaptiveProfile,
    Schedule,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

DEFAULT = "sglang"  # a profile's kind when it names none; a run that recorded none was measured on one
GENERIC = "openai"  # what a kind pivot does not know (a record from a newer pivot) is taken for
KINDS = (DEFAULT, *sorted(set(ENGINES) - {DEFAULT}))  # as errors and docs list them
MULTINODE = tuple(kind for kind in KINDS if ENGINES[kind].rank_flags)


def engine(kind: str | None) -> Engine:
    """The engine of this kind; one pivot knows nothing of is any OpenAI-compatible server."""
    return ENGINES.get(kind or "") or ENGINES[GENERIC]


__all__ = [
    "DEFAULT",
    "ENGINES",
    "GENERIC",
    "HEALTH_PATH",
    "KINDS",
    "MULTINODE",
    "POSITIONAL",
    "Drafting",
    "Engine",
    "FlagValue",
    "LengthSchedule",
    "Measured",
    "NoAdaptiveProfile",
    "Schedule",
    "engine",
]

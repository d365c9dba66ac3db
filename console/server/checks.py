"""A preflight check's result, and the names `--skip` takes (light: the argument parser reads them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    warning: bool = False  # passed, but worth reading
    node: str | None = None  # of a server across nodes: the host it was checked on (its name says so too)


# what --skip calls each check, and the name it is shown under, in the order they run
CHECKS = {
    "launcher": "launcher",
    "model-path": "model path",
    "gpus-idle": "GPUs idle",
    "port-free": "port free",
    "flags-known": "flags known",
}

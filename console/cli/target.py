"""What every command may be given before (or after) its name: which pivot.toml, which host."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """Where a command acts: pivot.toml's path (None: the search order), a host of it (None: default_host), or this
    machine's GPUs."""

    config: str | None
    host: str | None
    local: bool = False


@dataclass
class Globals:
    """pivot's own options; --config and --host given after the command replace those before it."""

    config: str | None = None
    host: str | None = None
    theme: str | None = None
    local: bool = False
    readonly: bool = False
    fleet: bool = False
    verbose: bool = False
    command: str | None = None

    @property
    def target(self) -> Target:
        return Target(self.config, self.host, self.local)

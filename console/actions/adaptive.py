"""Writing the adaptive profile a comparison recommends (`w` in the Sweep pane, `pivot compare --write-profile`):
the profile beside pivot.toml, the engine's config file (where it reads one) uploaded to the host, one `profile`
event. What to write is
decided in console/sweep/adaptive.py."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from console.events import AdaptiveProfile
from console.files import write_atomically
from console.session import Session
from console.sweep.adaptive import AdaptivePlan


@dataclass(frozen=True)
class WrittenProfile:
    plan: AdaptivePlan
    remote_config: str | None  # where the profile's config file is on the host (for an engine that reads one)
    uploaded_to: str | None  # the host it was uploaded to; None when no host is configured

    def describe(self, *, paths: bool = True) -> str:
        """What was written; without the paths for a toast on a small screen (the event log keeps them)."""
        p = self.plan
        where = f", its config uploaded to {self.uploaded_to}{f':{self.remote_config}' if paths else ''}" if self.uploaded_to else ""
        text = (
            f"wrote profile {p.name}{f' to {p.profile_path}' if paths else ''}: drafting for running batches up to "
            f"{p.first_off - 1}, off from {p.first_off}{where}; sweep it to check that it follows the better curve at "
            "every level"
        )
        return text + "".join(f"\nwarning: {w}" for w in p.warnings)


async def write_config(session: Session, directory: Path, name: str, text: str, suffix: str = ".json") -> tuple[str, str | None]:
    """An engine's config file for profile `name`: a copy beside the profile, and the file on the session's host where
    it has one. (Its path there, the host; None where no host is configured, and the path is where it is to go.)"""
    await asyncio.to_thread(write_atomically, directory / f"{name}{suffix}", text)
    conn = session.conn if session.spec is not None else None
    if conn is None:
        return f"~/.pivot/adaptive/{name}{suffix}", None
    remote = await conn.expand(f"{conn.spec.workdir.rstrip('/')}/adaptive/{name}{suffix}")
    await conn.upload(text.encode(), remote)
    return remote, conn.spec.name


def write_profile_file(path: Path, header: str, data: dict[str, Any]) -> None:
    write_atomically(path, header + tomli_w.dumps(data))


async def write_adaptive_profile(session: Session, adaptive: AdaptivePlan) -> WrittenProfile:
    """The profile (and for an engine that reads a config file, a local copy of it, uploaded to the session's host
    when it has one); one `profile` event."""
    remote: str | None = None
    uploaded_to = None
    if adaptive.engine.adaptive_file:
        text = json.dumps(adaptive.config, indent=1) + "\n"
        remote, uploaded_to = await write_config(session, adaptive.profile_path.parent, adaptive.name, text)
    header = (
        f"# Written by pivot from the comparison of {adaptive.spec.name}'s run with a baseline, in the form "
        f"{adaptive.spec.kind} reads (see pivot's ENGINES notes).\n"
    ) + "".join(f"# warning: {w}\n" for w in adaptive.warnings)
    write_profile_file(adaptive.profile_path, header, adaptive.profile_data(remote))
    session.events.append(
        AdaptiveProfile(
            via=session.via,
            name=adaptive.name,
            path=str(adaptive.profile_path),
            drafting_up_to=adaptive.drafting_up_to,
            first_off=adaptive.first_off,
        )
    )
    return WrittenProfile(adaptive, remote, uploaded_to)

"""The campaign's event log: one JSON line per operator action, appended and synced as it happens.

Every action writes one typed event, whichever way it was taken (`via`: the console, a headless command, a
runbook). The kinds and their fields:

| kind      | fields                                                                                 |
|-----------|----------------------------------------------------------------------------------------|
| `kill`    | host, pids, grace_s, group, outcomes [{pid, outcome, detail, signals}], via            |
| `cleanup` | host, argv, exit_status, via                                                           |
| `start`   | host, profile, pid, via                                                                |
| `stop`    | host, profile, pid, outcome, during (e.g. "switch to X"), via                          |
| `switch`  | host, profile, replaced (the profile that was running), via                            |
| `restart` | host, profile, pid, via                                                                 |
| `sweep`   | host, run, profile, levels, how ("new", "resume", "repeat", "refine"), via             |
| `swept`   | run, end ("done", "stopped", "aborted", "failed"), reason                              |
| `profile` | name, path, drafting_up_to, first_off, via (an adaptive profile written)               |
| `task`    | change, content, status, priority, file, count, via                                   |

Several processes append (consoles, headless commands, runbooks): each append holds the campaign's lock, and a
last line left without its newline by a crash is ended first, so that the new event is a line of its own. Reads
take what parses: a log is a record for the operator, not a source of truth.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from console.locking import locked
from console.untrusted import visible

LOG = logging.getLogger(__name__)

SUMMARY_LIMIT = 4096  # a field of an event shown on one line: task texts may be long


@dataclass(frozen=True, kw_only=True)
class Event:
    kind: ClassVar[str] = ""
    via: str  # "console", "cli" or "runbook"

    def record(self) -> dict[str, Any]:
        return {"kind": self.kind, **{k: v for k, v in dataclasses.asdict(self).items() if v is not None}}


@dataclass(frozen=True, kw_only=True)
class Kill(Event):
    kind: ClassVar[str] = "kill"
    host: str
    pids: list[int]
    grace_s: float
    group: bool
    outcomes: list[dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class Cleanup(Event):
    kind: ClassVar[str] = "cleanup"
    host: str
    argv: list[str]
    exit_status: int | None


@dataclass(frozen=True, kw_only=True)
class Start(Event):
    kind: ClassVar[str] = "start"
    host: str
    profile: str
    pid: int | None = None


@dataclass(frozen=True, kw_only=True)
class Adopt(Event):
    """A server that pivot did not start (or whose record was lost), taken over as a profile's."""

    kind: ClassVar[str] = "adopt"
    host: str
    profile: str
    pid: int


@dataclass(frozen=True, kw_only=True)
class Stop(Event):
    kind: ClassVar[str] = "stop"
    host: str
    profile: str | None
    pid: int | None
    outcome: str
    during: str | None = None


@dataclass(frozen=True, kw_only=True)
class Switch(Event):
    kind: ClassVar[str] = "switch"
    host: str
    profile: str
    replaced: str | None


@dataclass(frozen=True, kw_only=True)
class Restart(Event):
    kind: ClassVar[str] = "restart"
    host: str
    profile: str
    pid: int | None


@dataclass(frozen=True, kw_only=True)
class Sweep(Event):
    kind: ClassVar[str] = "sweep"
    host: str
    run: str
    profile: str
    levels: list[int]
    how: str = "new"


@dataclass(frozen=True, kw_only=True)
class Swept(Event):
    kind: ClassVar[str] = "swept"
    run: str
    end: str
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class AdaptiveProfile(Event):
    kind: ClassVar[str] = "profile"
    name: str
    path: str
    drafting_up_to: int
    first_off: int


@dataclass(frozen=True, kw_only=True)
class TaskChange(Event):
    kind: ClassVar[str] = "task"
    change: str
    content: str | None = None
    status: str | None = None
    priority: str | None = None
    file: str | None = None
    count: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        record = super().record()
        record.update(record.pop("extra", {}))
        return record


class EventLog:
    def __init__(self, campaign_dir: Path):
        self.path = campaign_dir / "events.jsonl"

    def append(self, event: Event) -> dict[str, Any]:
        """The event written, fsynced. A log that cannot be written (a full disk) never hides what happened: the
        action has happened by then, so the loss is said (a warning naming the file) and the caller goes on."""
        record = {"time": datetime.now(UTC).isoformat(timespec="milliseconds"), **event.record()}
        line = json.dumps(record, default=str) + "\n"
        try:
            with locked(self.path), open(self.path, "a+b") as f:
                if f.seek(0, os.SEEK_END) > 0:
                    f.seek(-1, os.SEEK_END)
                    if f.read(1) != b"\n":
                        line = "\n" + line  # a torn line: end it (it stays unreadable), then ours
                f.write(line.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            LOG.warning("%s: the %s event was not written (%s); what it records happened", self.path, event.kind, e.strerror or e)
        return record

    def read(self) -> list[dict[str, Any]]:
        return list(self.each())

    def each(self) -> Iterator[dict[str, Any]]:
        """Every event, oldest first, read a line at a time (a long campaign's log is not held in memory)."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115  (closed below, as the generator ends or is dropped)
        except FileNotFoundError:
            return
        with f:
            yield from _events(f)

    def tail(self, n: int) -> list[dict[str, Any]]:
        """The last n events, read from the file's end: as quick for a 100 MB log as for a small one."""
        try:
            with open(self.path, "rb") as f:
                end = f.seek(0, os.SEEK_END)
                start, found = end, b""
                while start > 0 and found.count(b"\n") <= n:
                    start = max(0, start - TAIL_BLOCK)
                    f.seek(start)
                    found = f.read(end - start)
        except FileNotFoundError:
            return []
        lines = found.split(b"\n")
        if start > 0:
            lines = lines[1:]  # begun mid-line
        return list(_events(lines))[-n:] if n > 0 else []


TAIL_BLOCK = 1 << 16


def _events(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    for line in lines:
        try:
            event = json.loads(line.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            continue  # a line cut by a crash mid-write, or not ours: the rest of the log stands
        if isinstance(event, dict):
            yield event


def _clip(text: str) -> str:
    return text if len(text) <= SUMMARY_LIMIT else f"{text[:SUMMARY_LIMIT]}… ({len(text) - SUMMARY_LIMIT} more characters)"


def summary(event: dict[str, Any]) -> str:
    """One line that says what happened, for the log view and `pivot events`: safe to show (the events carry task
    texts, process names and the host's words)."""
    skip = {"time", "kind", "outcomes", "argv"}
    parts = [f"{k}={_clip(str(v))}" for k, v in event.items() if k not in skip and v not in (None, "", [])]
    if isinstance(outcomes := event.get("outcomes"), list) and outcomes:
        parts.append("outcomes=" + ",".join(f"{o.get('pid')}:{o.get('outcome')}" for o in outcomes if isinstance(o, dict)))
    return visible("  ".join(parts))

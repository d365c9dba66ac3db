"""A run's files, read and written defensively: names, the event log, the tables.

- A run's name is one path component of a safe alphabet, checked here and only here: a profile
  name comes from the host's server.json and a `--name` from the command line, and neither may
  place a run (or a deletion) outside the campaign's runs/.
- events.jsonl is appended line by line; a line torn by a crash or a full disk is cut off before
  the next append, so that the next event is not glued to it.
- The shape each kind of event must have, for `runevents`, which reads the log back: a wrong line makes
  the run corrupt (with its file and line), never an exception in whoever reads the run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import orjson

EVENTS, META, LEVELS, REQUESTS = "events.jsonl", "run.toml", "levels.parquet", "requests.parquet"
PENDING = "host-spool.json"  # a sweep's events that wait in a spool on the host, not fetched yet (loadgen/host_generator.py)


def pending_spool(run_dir: Path) -> dict[str, Any] | None:
    """The host, spool token and last event kept of a sweep whose events wait on the host, if they are not fetched yet."""
    try:
        pending = orjson.loads((run_dir / PENDING).read_bytes())
    except (OSError, ValueError):
        return None
    if isinstance(pending, dict) and isinstance(pending.get("seq"), int) and isinstance(pending.get("token"), str):
        return pending
    return None


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,119}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class RunError(Exception):
    pass


class EventsCorrupt(RunError):
    def __init__(self, path: Path, line: int, problem: str):
        self.path, self.line, self.problem = path, line, problem
        super().__init__(f"{path}:{line}: {problem}")


def check_run_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise RunError(
            f"run name {name!r}: must be one path component of letters, digits, '.', '_' and '-' "
            "(starting with a letter or digit, at most 120 characters)"
        )
    return name


def name_part(text: str) -> str:
    """Text from elsewhere (a profile name a host reported) made into part of a run name."""
    return _UNSAFE.sub("_", text).lstrip("._-")[:60] or "run"


class EventLogFile:
    """Appends events to a run's events.jsonl, one flushed line each."""

    def __init__(self, run_dir: Path):
        path = run_dir / EVENTS
        self.file = open(path, "ab")  # noqa: SIM115 - open for the run's life; close() ends it
        self._repair(path)

    def _repair(self, path: Path) -> None:
        """Cut a torn last line (no newline: its writer died in the middle) so the next event starts a line."""
        size = self.file.seek(0, os.SEEK_END)
        if not size:
            return
        with open(path, "rb") as f:
            f.seek(max(0, size - (1 << 20)))
            tail = f.read()
        if tail.endswith(b"\n"):
            return
        cut = tail.rfind(b"\n")
        os.truncate(path, size - len(tail) + cut + 1 if cut >= 0 else max(0, size - len(tail)))
        self.file.seek(0, os.SEEK_END)

    def append(self, event: dict[str, Any]) -> bytes:
        """The event as one JSON line (orjson: a request's chunks are the load generator's largest cost after HTTP)."""
        line = orjson.dumps(event, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
        self.file.write(line)
        self.file.flush()
        return line

    def sync(self) -> None:
        os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()


def _int(e: dict[str, Any], key: str, minimum: int = 0) -> bool:
    v = e.get(key)
    return isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def _number(e: dict[str, Any], key: str, *, optional: bool = False) -> bool:
    v = e.get(key)
    return (optional and v is None) or (isinstance(v, (int, float)) and not isinstance(v, bool))


def request_fields(e: dict[str, Any]) -> bool:
    return _int(e, "c", 1) and _int(e, "i") and _number(e, "start") and _int(e, "tokens")

"""The campaign's event log: one JSON line per action, appended and synced as it happens.

Several processes append (consoles, headless commands, runbooks): each append holds the campaign's lock, and a
last line left without its newline by a crash is ended first, so that the new event is a line of its own.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from console.tasks.lock import locked
from console.tasks.tasklist import clipped
from console.untrusted import visible


class EventLog:
    def __init__(self, campaign_dir: Path):
        self.path = campaign_dir / "events.jsonl"

    def append(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), "kind": kind, **fields}
        line = json.dumps(event, default=str) + "\n"
        with locked(self.path), open(self.path, "a+b") as f:
            if f.seek(0, os.SEEK_END) > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    line = "\n" + line  # a torn line: end it (it stays unreadable), then ours
            f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        return event

    def read(self) -> list[dict[str, Any]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        events = []
        for line in data.decode("utf-8", "replace").split("\n"):
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                continue  # a line cut by a crash mid-write, or not ours: the rest of the log stands
            if isinstance(event, dict):
                events.append(event)
        return events


def summary(event: dict[str, Any]) -> str:
    """One line that says what happened, for the log view and `pivot events`: safe to show (the events carry task
    texts, process names and the host's words)."""
    skip = {"time", "kind", "outcomes", "argv"}
    parts = [f"{k}={clipped(str(v))}" for k, v in event.items() if k not in skip and v not in (None, "", [])]
    if isinstance(outcomes := event.get("outcomes"), list) and outcomes:
        parts.append("outcomes=" + ",".join(f"{o.get('pid')}:{o.get('outcome')}" for o in outcomes if isinstance(o, dict)))
    return visible("  ".join(parts))

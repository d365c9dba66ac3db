"""The campaign's event log: one JSON line per action, appended and synced as it happens."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from console.untrusted import visible


class EventLog:
    def __init__(self, campaign_dir: Path):
        self.path = campaign_dir / "events.jsonl"

    def append(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), "kind": kind, **fields}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(event, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return event

    def read(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        events = []
        for line in lines:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a crash mid-write: the rest of the log stands
        return events


def summary(event: dict[str, Any]) -> str:
    """One line that says what happened, for the log view and `pivot events`: safe to show (the events carry task
    texts, process names and the host's words)."""
    skip = {"time", "kind", "outcomes", "argv"}
    parts = [f"{k}={v}" for k, v in event.items() if k not in skip and v not in (None, "", [])]
    if outcomes := event.get("outcomes"):
        parts.append("outcomes=" + ",".join(f"{o.get('pid')}:{o.get('outcome')}" for o in outcomes))
    return visible("  ".join(parts))

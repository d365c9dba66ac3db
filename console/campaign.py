"""A campaign: the directory that holds its runs, its task list and its event log. Every command and pane names runs
through it: `last` and `previous` are the newest runs with measured levels, and only those are compared."""

from __future__ import annotations

from pathlib import Path

from console.events import EventLog
from console.sweep.runs.files import RunError
from console.sweep.runs.store import Run, list_runs, open_run
from console.tasks.tasklist import TaskList

PICKS = {"last": -1, "previous": -2}


class Campaign:
    def __init__(self, directory: Path):
        self.dir = directory

    def runs(self) -> list[Run]:
        """Every run, oldest first; one that cannot be read is listed as corrupt."""
        return list_runs(self.dir)

    def measured_runs(self) -> list[Run]:
        """The runs with at least one measured level, oldest first: what can be compared."""
        return [r for r in self.runs() if r.has_measured_levels]

    def resolve(self, name: str) -> Run:
        """A run by its name, or `last` / `previous` (the newest run with measured levels, the one before it)."""
        if name not in PICKS:
            return open_run(self.dir, name)
        measured = self.measured_runs()
        if len(measured) < -PICKS[name]:
            raise RunError(f"no {name!r} run: {len(measured)} run(s) with measured levels")
        return measured[PICKS[name]]

    def latest_pair(self) -> tuple[Run, Run] | None:
        """The two newest runs with measured levels (the one before, the newest), if there are two."""
        measured = self.measured_runs()
        return (measured[-2], measured[-1]) if len(measured) >= 2 else None

    def tasks(self) -> TaskList:
        return TaskList(self.dir)

    def events(self) -> EventLog:
        return EventLog(self.dir)

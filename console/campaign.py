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

    def newest_measured(self, n: int) -> list[Run]:
        """The n newest runs with measured levels, newest first: only their metadata and those runs' levels are read
        (a campaign of 2,000 runs answers `last` at once)."""
        found: list[Run] = []
        for run in reversed(self.runs()):
            if len(found) == n:
                break
            if run.has_measured_levels:
                found.append(run)
        return found

    def resolve(self, name: str) -> Run:
        """A run by its name, or `last` / `previous` (the newest run with measured levels, the one before it)."""
        return self.resolve_all([name])[0]

    def resolve_all(self, names: list[str]) -> list[Run]:
        """Runs by name, `last` and `previous` among them, the campaign's runs listed once for all of them."""
        picks = [-PICKS[name] for name in names if name in PICKS]
        newest = self.newest_measured(max(picks)) if picks else []
        found = []
        for name in names:
            if name not in PICKS:
                found.append(open_run(self.dir, name))
            elif len(newest) < -PICKS[name]:
                raise RunError(f"no {name!r} run: {len(newest)} run(s) with measured levels")
            else:
                found.append(newest[-PICKS[name] - 1])
        return found

    def latest_pair(self) -> tuple[Run, Run] | None:
        """The two newest runs with measured levels (the one before, the newest), if there are two."""
        newest = self.newest_measured(2)
        return (newest[1], newest[0]) if len(newest) == 2 else None

    def tasks(self) -> TaskList:
        return TaskList(self.dir)

    def events(self) -> EventLog:
        return EventLog(self.dir)

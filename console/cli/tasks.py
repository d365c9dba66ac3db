"""`pivot tasks …`: the campaign's task list on the terminal."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.text import Text

from console import config
from console.cli.output import trimmed
from console.cli.prompt import ask
from console.cli.target import Target
from console.events import EventLog, TaskChange, summary
from console.session import Session
from console.tasks.tasklist import TaskError, TaskList, clipped
from console.untrusted import visible

GLYPHS = {"pending": ("○", "white"), "in_progress": ("◐", "yellow"), "completed": ("●", "green"), "cancelled": ("✕", "red")}


def render(tasks: TaskList) -> list[Text]:
    done, total = tasks.done_count
    lines = [Text(f"{done} of {total} done", style="bold")]
    for number, task in enumerate(tasks.tasks, 1):
        glyph, colour = GLYPHS[task.status]
        line = Text.assemble(f"{number:>3} ", (glyph, colour), f" [{task.priority[0].upper()}] ", visible(clipped(task.content)))
        if since := task.in_progress_since:
            line.append(f"  ({(time.time() - since) / 60:.0f} min)", "dim")
        if task.action:
            line.append(f"  ⚙ {visible(clipped(task.action))}", "cyan")
        if task.result:
            line.append(f"  → {visible(clipped(task.result))}", "dim")
        lines.append(line)
    return lines


STATUS_OF = {"done": "completed", "start": "in_progress", "cancel": "cancelled", "reset": "pending"}


class TaskCommand:
    """The task list of the campaign, as one `pivot tasks` verb changes it: each change saved and logged, then the
    list printed."""

    def __init__(self, config_path: str | None):
        cfg = config.load(config_path)
        self.tasks = TaskList(cfg.campaign_dir).load()
        self.log = EventLog(cfg.campaign_dir)
        self.out = trimmed(highlight=False)
        if self.tasks.warning:
            self.out.print(Text(visible(f"warning: {self.tasks.warning}"), style="yellow"), soft_wrap=True)

    def listed(self) -> int:
        for line in render(self.tasks):
            self.out.print(line)
        return 0

    def add(self, text: str, priority: str) -> int:
        task = self.tasks.add(text, priority)
        self.log.append(TaskChange(via="cli", change="add", content=task.content, priority=task.priority))
        return self.listed()

    def set_status(self, verb: str, numbers: list[int], *, insist: bool) -> int:
        if not numbers:
            raise TaskError(f"tasks {verb} takes task numbers, as tasks list shows them")
        for number in numbers:
            task = self.tasks.set_status(number, STATUS_OF[verb], insist=insist)
            self.log.append(TaskChange(via="cli", change=STATUS_OF[verb], content=task.content))
        return self.listed()

    def delete(self, numbers: list[int]) -> int:
        if len(numbers) != 1:
            raise TaskError("tasks delete takes one task number, as tasks list shows them")
        task = self.tasks.delete(numbers[0])
        self.log.append(TaskChange(via="cli", change="delete", content=task.content))
        return self.listed()

    def import_file(self, path: Path) -> int:
        count = self.tasks.import_todos(path)
        self.log.append(TaskChange(via="cli", change="import", file=str(path), count=count))
        self.out.print(Text(visible(f"imported {count} tasks from {path}")))
        return self.listed()

    def export(self) -> int:
        print(self.tasks.export_todos())
        return 0


async def run_command(target: Target, runbook_name: str, *, start: int, yes: bool) -> int:
    from console.actions.campaign import CampaignActions
    from console.actions.runbook import find_runbook, install, read_runbook, run_tasks

    cfg = config.load(target.config)
    runbook = read_runbook(find_runbook(cfg, runbook_name))
    tasks = TaskList(cfg.campaign_dir).load()
    numbers = install(tasks, runbook)[start - 1 :]

    async def confirm(question: str) -> bool:
        if yes:
            return True
        return await asyncio.to_thread(ask, f"{question} [y/N] ") in ("y", "yes")

    def say(line: str) -> None:  # the steps name tasks, and their failures quote the host
        print(visible(line, newlines=True), flush=True)

    async with Session(cfg, target.host) as session:
        await session.connect()
        ok = await run_tasks(tasks, CampaignActions(session, confirm_kill=confirm, say=say), numbers, say)
    for line in render(tasks):
        trimmed(highlight=False).print(line)
    return 0 if ok else 1


def events_command(config_path: str | None, kind: str | None, export: Path | None, tail: int | None) -> int:
    cfg = config.load(config_path)
    log = EventLog(cfg.campaign_dir)
    if tail is not None and kind is None:
        found: Iterable[dict[str, Any]] = log.tail(tail)
    else:  # a kind's last N: read through, keeping N
        found = (e for e in log.each() if kind is None or e.get("kind") == kind)
        if tail is not None:
            found = collections.deque(found, maxlen=tail)
    if export is not None:
        count = 0
        with open(export, "w", encoding="utf-8") as out:
            for e in found:
                out.write(json.dumps(e) + "\n")
                count += 1
        print(f"{count} events written to {export}")
        return 0
    for e in found:
        print(visible(f"{str(e.get('time', ''))[:19].replace('T', ' ')}  {e.get('kind', '')!s:<8} ") + summary(e))
    return 0

"""`pivot tasks …`: the campaign's task list on the terminal."""

from __future__ import annotations

import argparse
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


def _numbers(action: str, args: list[str], *, one: bool = False) -> list[int]:
    """The task numbers an action names, as `tasks list` shows them; TaskError naming the bad argument."""
    if not args or (one and len(args) > 1):
        raise TaskError(f"tasks {action} takes {'one task number' if one else 'task numbers'}, as tasks list shows them")
    try:
        return [int(a) for a in args]
    except ValueError:
        bad = next(a for a in args if not a.strip().isdecimal())
        raise TaskError(f"tasks {action}: {bad!r} is not a task number (tasks list shows them)") from None


def cmd_tasks(cli: argparse.Namespace) -> int:
    cfg, action, args, priority, insist = config.load(cli.config), cli.action, cli.args, cli.priority, cli.insist
    if action in STATUS_OF or action == "delete":
        numbers = _numbers(action, args, one=action == "delete")
    elif action == "import" and len(args) != 1:
        raise TaskError('tasks import takes one file (our tasks.json or a todo list: {"todos": [...]})')
    tasks = TaskList(cfg.campaign_dir).load()
    log = EventLog(cfg.campaign_dir)
    out = trimmed(highlight=False)
    if tasks.warning:
        out.print(Text(visible(f"warning: {tasks.warning}"), style="yellow"), soft_wrap=True)
    if action == "add":
        task = tasks.add(" ".join(args), priority)
        log.append(TaskChange(via="cli", change="add", content=task.content, priority=task.priority))
    elif action in STATUS_OF:
        for number in numbers:
            task = tasks.set_status(number, STATUS_OF[action], insist=insist)
            log.append(TaskChange(via="cli", change=STATUS_OF[action], content=task.content))
    elif action == "delete":
        task = tasks.delete(numbers[0])
        log.append(TaskChange(via="cli", change="delete", content=task.content))
    elif action == "import":
        count = tasks.import_todos(Path(args[0]))
        log.append(TaskChange(via="cli", change="import", file=args[0], count=count))
        out.print(Text(visible(f"imported {count} tasks from {args[0]}")))
    elif action == "export":
        print(tasks.export_todos())
        return 0
    for line in render(tasks):
        out.print(line)
    return 0


async def cmd_run(cli: argparse.Namespace) -> int:
    from console.actions.campaign import CampaignActions
    from console.actions.runbook import find_runbook, install, read_runbook, run_tasks

    cfg = config.load(cli.config)
    runbook = read_runbook(find_runbook(cfg, cli.runbook))
    tasks = TaskList(cfg.campaign_dir).load()
    numbers = install(tasks, runbook)[cli.start - 1 :]

    async def confirm(question: str) -> bool:
        if cli.yes:
            return True
        return await asyncio.to_thread(ask, f"{question} [y/N] ") in ("y", "yes")

    def say(line: str) -> None:  # the steps name tasks, and their failures quote the host
        print(visible(line, newlines=True), flush=True)

    async with Session(cfg, cli.host) as session:
        await session.connect()
        ok = await run_tasks(tasks, CampaignActions(session, confirm_kill=confirm, say=say), numbers, say)
    for line in render(tasks):
        trimmed(highlight=False).print(line)
    return 0 if ok else 1


def cmd_events(cli: argparse.Namespace) -> int:
    cfg, kind, export = config.load(cli.config), cli.kind, cli.export
    log = EventLog(cfg.campaign_dir)
    if cli.tail is not None and kind is None:
        found: Iterable[dict[str, Any]] = log.tail(cli.tail)
    else:  # a kind's last N: read through, keeping N
        found = (e for e in log.each() if kind is None or e.get("kind") == kind)
        if cli.tail is not None:
            found = collections.deque(found, maxlen=cli.tail)
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

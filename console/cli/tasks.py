"""`pivot tasks …`: the campaign's task list on the terminal."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.text import Text

from console import config
from console.tasks.events import EventLog
from console.tasks.tasklist import TaskList
from console.untrusted import visible

GLYPHS = {"pending": ("○", "white"), "in_progress": ("◐", "yellow"), "completed": ("●", "green"), "cancelled": ("✕", "red")}


def render(tasks: TaskList) -> list[Text]:
    done, total = tasks.done_count
    lines = [Text(f"{done} of {total} done", style="bold")]
    for number, task in enumerate(tasks.tasks, 1):
        glyph, colour = GLYPHS[task.status]
        line = Text.assemble(f"{number:>3} ", (glyph, colour), f" [{task.priority[0].upper()}] ", visible(task.content))
        if since := task.in_progress_since:
            line.append(f"  ({(time.time() - since) / 60:.0f} min)", "dim")
        if task.action:
            line.append(f"  ⚙ {visible(task.action)}", "cyan")
        if task.result:
            line.append(f"  → {visible(task.result)}", "dim")
        lines.append(line)
    return lines


def cmd_tasks(cfg: config.Config, action: str, args: list[str], *, priority: str, insist: bool) -> int:
    tasks = TaskList(cfg.campaign_dir).load()
    log = EventLog(cfg.campaign_dir)
    out = Console(highlight=False)
    if tasks.warning:
        out.print(Text(f"warning: {tasks.warning}", style="yellow"))
    if action == "add":
        task = tasks.add(" ".join(args), priority)
        log.append("task", change="add", content=task.content, priority=task.priority)
    elif action in ("done", "start", "cancel", "reset"):
        status = {"done": "completed", "start": "in_progress", "cancel": "cancelled", "reset": "pending"}[action]
        for number in args:
            task = tasks.set_status(int(number), status, insist=insist)
            log.append("task", change=status, content=task.content)
    elif action == "delete":
        task = tasks.delete(int(args[0]))
        log.append("task", change="delete", content=task.content)
    elif action == "import":
        count = tasks.import_todos(Path(args[0]))
        log.append("task", change="import", file=args[0], count=count)
        out.print(f"imported {count} tasks from {args[0]}")
    elif action == "export":
        print(tasks.export_todos())
        return 0
    for line in render(tasks):
        out.print(line)
    return 0


async def cmd_run(cfg: config.Config, host: str | None, runbook_path: Path, *, start: int, yes: bool) -> int:
    import asyncio

    from console.remote import Connection
    from console.tasks.runbook import Actions, install, read_runbook, run_tasks

    runbook = read_runbook(runbook_path)
    tasks = TaskList(cfg.campaign_dir).load()
    numbers = install(tasks, runbook)[start - 1:]
    spec = cfg.host(host)
    conn = Connection(spec)

    async def confirm(question: str) -> bool:
        if yes:
            return True
        answer = await asyncio.to_thread(input, f"{question} [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    try:
        await conn.up_now()
        def say(line: str) -> None:  # the steps name tasks, and their failures quote the host
            print(visible(line, newlines=True), flush=True)

        ok = await run_tasks(tasks, Actions(cfg, conn, confirm_kill=confirm, say=say), numbers, say)
    finally:
        await conn.close()
    for line in render(tasks):
        Console(highlight=False).print(line)
    return 0 if ok else 1


def cmd_events(cfg: config.Config, kind: str | None, export: Path | None) -> int:
    import json

    from console.tasks.events import summary

    events = [e for e in EventLog(cfg.campaign_dir).read() if kind is None or e.get("kind") == kind]
    if export is not None:
        export.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
        print(f"{len(events)} events written to {export}")
        return 0
    for e in events:
        print(visible(f"{str(e.get('time', ''))[:19].replace('T', ' ')}  {str(e.get('kind', '')):<8} ") + summary(e))
    return 0

"""The campaign's task list: content, priority, status and the history of each status change.

Saved on every change as JSON, atomically (a temporary file, fsync, rename,
fsync of the directory), so a crash, a kill -9 or a full disk never leaves a
half-written list. A file that does not load is moved aside and reported,
never overwritten. Several consoles and commands on one campaign: a save holds
the campaign's lock while it reads the file, merges and replaces it; if another
process changed the file since this list read it, the change is merged task by
task (by id) when the two did not touch the same task, and refused with a
message when they did. A task's text is a line of a todo list: at most 4 KiB.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from console.files import write_atomically
from console.locking import locked

PRIORITIES = ("high", "medium", "low")
STATUSES = ("pending", "in_progress", "completed", "cancelled")
FILE = "tasks.json"
MAX_TEXT = 4096  # bytes of UTF-8 in a task's text: a 20 MB one made every command take a minute


class TaskError(Exception):
    """A refused change or an unusable file; str() is one line."""


class TaskNotSaved(TaskError):
    """The change is made in memory but could not be written (a read-only or full disk)."""


@dataclass(frozen=True)
class Task:
    content: str
    priority: str = "medium"
    status: str = "pending"
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    history: tuple[tuple[float, str], ...] = ()  # (time, status) for every change, oldest first
    action: str | None = None  # a runbook action, e.g. "start demo-baseline"
    result: str | None = None  # what the action reported

    def __post_init__(self) -> None:
        if not self.content.strip():
            raise TaskError("a task needs some content")
        if self.priority not in PRIORITIES:
            raise TaskError(f"priority must be one of {', '.join(PRIORITIES)}, got {self.priority!r}")
        if self.status not in STATUSES:
            raise TaskError(f"status must be one of {', '.join(STATUSES)}, got {self.status!r}")

    @property
    def in_progress_since(self) -> float | None:
        if self.status != "in_progress":
            return None
        return next((t for t, s in reversed(self.history) if s == "in_progress"), None)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "content": self.content,
            "priority": self.priority,
            "status": self.status,
            "history": [list(h) for h in self.history],
        }
        if self.action:
            data["action"] = self.action
        if self.result:
            data["result"] = self.result
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        return cls(
            content=str(data["content"]),
            priority=str(data.get("priority", "medium")),
            status=str(data.get("status", "pending")),
            id=str(data.get("id") or uuid.uuid4().hex[:8]),
            history=tuple((float(t), str(s)) for t, s in data.get("history", ())),
            action=data.get("action"),
            result=data.get("result"),
        )


class NotATaskList(TaskError):
    """The file is there and readable, but it is not a task list."""


def parse(text: str, source: str) -> list[Task]:
    """Our own format or the todo format coding assistants write: {"todos": [{content, priority, status}]}."""
    try:
        data = json.loads(text)
        items = data["tasks"] if "tasks" in data else data["todos"]
        return [Task.from_dict(item) for item in items]
    except RecursionError:
        raise NotATaskList(f"{source}: not a task list (nested too deeply)") from None
    except (ValueError, KeyError, TypeError, TaskError) as e:
        raise NotATaskList(f"{source}: not a task list ({type(e).__name__}: {e})") from None


def read_text(path: Path) -> str | None:
    """A task file's text, None when there is none; TaskError naming the file when it cannot be read, NotATaskList
    when it is not UTF-8."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise TaskError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NotATaskList(f"{path}: not a task list (not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start})") from None


def clipped(text: str, limit: int = MAX_TEXT) -> str:
    """Text for the screen, at most `limit` characters: a list saved before the limit may hold a 20 MB task, which a
    terminal table would take minutes to lay out."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def check_text(content: str, where: str = "a task's text") -> str:
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > MAX_TEXT:
        shown = f"{size} bytes" if size < 1 << 20 else f"{size / (1 << 20):.1f} MiB"
        raise TaskError(f"{where} is {shown}: a task holds at most {MAX_TEXT} bytes ({MAX_TEXT // 1024} KiB)")
    return content


class TaskList:
    def __init__(self, campaign_dir: Path):
        self.path = campaign_dir / FILE
        self.tasks: list[Task] = []
        self._loaded: str | None = None  # the file's text when this list last read or wrote it
        self.warning: str | None = None

    # -- disk -----------------------------------------------------------------
    def load(self) -> TaskList:
        """Read the list. A file that is not a task list is set aside (never overwritten) and the list starts empty,
        with a warning; where it cannot be set aside (a read-only campaign), TaskError says so."""
        self.warning = None
        try:
            text = read_text(self.path)
            tasks = parse(text, str(self.path)) if text is not None else []
        except NotATaskList as e:
            return self._set_aside(e)
        self.tasks, self._loaded = tasks, text
        return self

    def _set_aside(self, problem: TaskError) -> TaskList:
        try:
            with locked(self.path):
                try:  # another process may have set it aside and saved a good list meanwhile
                    text = read_text(self.path)
                    self.tasks, self._loaded = (parse(text, str(self.path)) if text is not None else []), text
                    return self
                except NotATaskList:
                    pass
                stamp = time.strftime("%Y%m%d-%H%M%S")
                aside = self.path.with_name(f"{FILE}.corrupt-{stamp}")
                n = 1
                while aside.exists():  # never over an earlier one
                    aside, n = self.path.with_name(f"{FILE}.corrupt-{stamp}-{n}"), n + 1
                os.replace(self.path, aside)
        except OSError as e:
            raise TaskError(f"{problem}; cannot set it aside ({e.strerror or e}): move or fix it, then retry") from None
        self.tasks, self._loaded = [], None
        self.warning = f"{problem}; kept aside as {aside.name}, starting with an empty list"
        return self

    def _text(self) -> str:
        return json.dumps({"version": 1, "tasks": [t.to_dict() for t in self.tasks]}, indent=1) + "\n"

    def save(self, before: list[Task]) -> None:
        """Write, under the campaign's lock, after merging a change another process made since we read the file."""
        try:
            with locked(self.path):
                on_disk = read_text(self.path)
                if on_disk is not None and on_disk != self._loaded:
                    self.tasks = merge(before, self.tasks, parse(on_disk, str(self.path)))
                text = self._text()
                write_atomically(self.path, text)
        except OSError as e:  # read-only, full disk: the change stays in memory, and the operator is told
            raise TaskNotSaved(f"{self.path}: cannot save ({e.strerror or e}): the change is not on disk") from None
        self._loaded = text

    def _change(self, new: list[Task]) -> None:
        before = self.tasks
        self.tasks = new
        self.save(before)

    # -- changes --------------------------------------------------------------
    def index_of(self, number: int) -> int:
        """1-based numbers, as the operator sees them."""
        if not 1 <= number <= len(self.tasks):
            raise TaskError(f"no task {number} (there are {len(self.tasks)})")
        return number - 1

    def add(self, content: str, priority: str = "medium", action: str | None = None) -> Task:
        task = Task(check_text(content), priority, history=((time.time(), "pending"),), action=action)
        self._change([*self.tasks, task])
        return task

    def set_status(self, number: int, status: str, *, insist: bool = False, result: str | None = None) -> Task:
        i = self.index_of(number)
        if status == "in_progress" and not insist:
            busy = [j + 1 for j, t in enumerate(self.tasks) if t.status == "in_progress" and j != i]
            if busy:
                raise TaskError(f"task {busy[0]} is already in progress: finish it first, or insist")
        task = self.tasks[i]
        changed = replace(
            task, status=status, history=(*task.history, (time.time(), status)), result=result if result is not None else task.result
        )
        self._change([*self.tasks[:i], changed, *self.tasks[i + 1 :]])
        return changed

    def edit(self, number: int, *, content: str | None = None, priority: str | None = None) -> Task:
        i = self.index_of(number)
        task = self.tasks[i]
        changed = replace(
            task,
            content=check_text(content) if content is not None else task.content,
            priority=priority if priority is not None else task.priority,
        )
        self._change([*self.tasks[:i], changed, *self.tasks[i + 1 :]])
        return changed

    def delete(self, number: int) -> Task:
        i = self.index_of(number)
        task = self.tasks[i]
        self._change([*self.tasks[:i], *self.tasks[i + 1 :]])
        return task

    def move(self, number: int, offset: int) -> None:
        i = self.index_of(number)
        j = max(0, min(len(self.tasks) - 1, i + offset))
        tasks = list(self.tasks)
        tasks.insert(j, tasks.pop(i))
        self._change(tasks)

    def import_todos(self, path: Path) -> int:
        text = read_text(path)
        if text is None:
            raise TaskError(f"{path}: no such file")
        tasks = parse(text, str(path))
        for number, task in enumerate(tasks, 1):
            check_text(task.content, f"{path}: task {number}'s text")
        now = time.time()
        fresh = [replace(t, history=t.history or ((now, t.status),)) for t in tasks]
        self._change([*self.tasks, *fresh])
        return len(fresh)

    def export_todos(self) -> str:
        """The todo format as coding assistants write it: content, priority, status."""
        return json.dumps({"todos": [{"content": t.content, "priority": t.priority, "status": t.status} for t in self.tasks]})

    @property
    def done_count(self) -> tuple[int, int]:
        counted = [t for t in self.tasks if t.status != "cancelled"]
        return sum(t.status == "completed" for t in counted), len(counted)


def merge(base: list[Task], ours: list[Task], theirs: list[Task]) -> list[Task]:
    """Three-way merge by task id: each side's changes to different tasks are both kept."""
    by_id = {t.id: t for t in base}
    ours_by, theirs_by = {t.id: t for t in ours}, {t.id: t for t in theirs}
    conflicts = [
        i
        for i in ours_by.keys() & theirs_by.keys()
        if ours_by[i] != by_id.get(i) and theirs_by[i] != by_id.get(i) and ours_by[i] != theirs_by[i]
    ]
    if conflicts:
        content = ours_by[conflicts[0]].content
        raise TaskError(f"another console changed the task {content!r} at the same time: reload (r) and redo the change")
    merged: list[Task] = []
    for task in theirs:  # their order, with our edits; their deletions stand unless we edited that task
        if task.id in ours_by:
            merged.append(ours_by[task.id] if ours_by[task.id] != by_id.get(task.id) else task)
        elif task.id not in by_id:
            merged.append(task)  # they added it
    for task in ours:
        if task.id not in by_id and task.id not in theirs_by:
            merged.append(task)  # we added it
        elif task.id in by_id and task.id not in theirs_by and task != by_id[task.id]:
            merged.append(task)  # they deleted what we edited: keep ours
    return merged

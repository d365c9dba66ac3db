"""The Tasks pane: the campaign's task list, edited live and saved on every change."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import var
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static

from console.campaign import Campaign
from console.events import TaskChange
from console.session import Session
from console.tasks.tasklist import PRIORITIES, Task, TaskError, TaskList, TaskNotSaved, check_text, clipped
from console.ui.attention import call_attention
from console.ui.colours import theme_style
from console.ui.messages import ShowComparison
from console.ui.screens.confirm import confirmed
from console.ui.widgets.pane import Pane
from console.ui.widgets.problem import PaneProblem, survives
from console.ui.widgets.quiet import QuietStatic
from console.untrusted import visible

GLYPHS = {"pending": ("○", "foreground"), "in_progress": ("◐", "warning"), "completed": ("●", "success"), "cancelled": ("✕", "error")}
PRIORITY_COLOURS = {"high": "error", "medium": "warning", "low": "secondary"}


def _ago(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min ago"
    return f"{minutes // 60} h ago" if minutes < 24 * 60 else f"{minutes // 1440} d ago"


class TextPrompt(ModalScreen[str | None]):
    DEFAULT_CSS = """
    TextPrompt { align: center middle; }
    TextPrompt > Vertical { width: 80; max-width: 95%; height: auto; border: thick $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, value: str = "", check: Callable[[str], object] | None = None):
        """check: raises TaskError for text that cannot be taken; the prompt then says why and keeps the text."""
        super().__init__()
        self.title_text, self.value, self.check = title, value, check

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text, style="bold"))
            yield Input(self.value, id="text")
            yield Static(id="problem")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if text and self.check is not None:
            try:
                self.check(text)
            except TaskError as e:  # refused: said here, and what was typed stays to be cut down
                self.query_one("#problem", Static).update(Text(f"{e}: shorten it, or Esc to drop it", style="bold red"))
                return
        self.dismiss(text or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TasksPane(Pane):
    DEFAULT_CSS = """
    TasksPane { padding: 0 1; }
    TasksPane DataTable { height: 1fr; overflow-x: hidden; }
    TasksPane #tasks-detail { height: auto; max-height: 3; color: $text-muted; }
    """
    BINDINGS = [
        Binding("a", "add", "Add", id="tasks.add", tooltip="Add a task"),
        Binding("e", "edit", "Edit", id="tasks.edit", tooltip="Edit the task's text"),
        Binding(
            "s", "status('in_progress')", "Start", id="tasks.start", tooltip="Mark the task in progress (one at a time unless insisted: S)"
        ),
        Binding("S", "insist", "Start anyway", show=False, id="tasks.insist", tooltip="Mark it in progress although another is"),
        Binding("d", "status('completed')", "Done", id="tasks.done", tooltip="Mark the task completed"),
        Binding("x", "status('cancelled')", "Cancel", show=False, id="tasks.cancel", tooltip="Mark the task cancelled"),
        Binding("u", "status('pending')", "Reset", show=False, id="tasks.reset", tooltip="Mark the task pending again"),
        Binding("p", "priority", "Priority", show=False, id="tasks.priority", tooltip="Cycle the priority: high, medium, low"),
        Binding("K", "move(-1)", "Up", show=False, id="tasks.up", tooltip="Move the task up"),
        Binding("J", "move(1)", "Down", show=False, id="tasks.down", tooltip="Move the task down"),
        Binding("delete", "delete", "Delete", show=False, id="tasks.delete", tooltip="Delete the task (asks first)"),
        Binding("f", "fold", "Fold done", show=False, id="tasks.fold", tooltip="Hide or show completed and cancelled tasks"),
        Binding("r", "run_one", "Run", id="tasks.run", tooltip="Run the task's action (kill, start, sweep, compare…)"),
        Binding(
            "R",
            "run_from_here",
            "Run from here",
            id="tasks.run_from",
            tooltip="Run this task's action and every one after it, stopping at the first failure",
        ),
        Binding(
            "L", "load_runbook", "Runbook", id="tasks.runbook", tooltip="Add a runbook's tasks (from profiles/runbooks/ or the campaign)"
        ),
    ]

    READONLY = frozenset(
        {"add", "edit", "status", "insist", "priority", "move", "delete", "run_one", "run_from_here", "load_runbook"}
    )  # the list is shown, never changed

    running = var(False, bindings=True)  # a runbook is running from this pane

    def __init__(self, session: Session, *, readonly: bool = False, **kw: object):
        super().__init__(session, readonly=readonly, **kw)
        self.border_title = "Tasks"
        self.tasks: TaskList | None = None
        self.folded = False
        self.said = ""  # the runbook's last line, shown under the running task
        self._mtime = 0.0
        self._rows: list[tuple[str, tuple[str | Text, ...]]] = []  # what the table shows now

    def compose(self) -> ComposeResult:
        yield DataTable(id="tasks-table", cursor_type="row", zebra_stripes=False)
        yield QuietStatic("", id="tasks-detail")
        yield PaneProblem()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label, key in (("#", "n"), ("", "s"), ("P", "p"), ("FOR", "time"), ("TASK", "task")):
            table.add_column(label, key=key)
        self.tasks = TaskList(self.session.config.campaign_dir)
        self._load()
        self._draw()
        self.set_interval(2.0, self._reload_if_changed)  # another console's edits, and the in-progress clocks

    @survives("reading the task list")
    def _reload_if_changed(self) -> None:
        try:
            mtime = self.tasks.path.stat().st_mtime if self.tasks else 0.0
        except FileNotFoundError:
            mtime = 0.0
        if self.tasks is not None and mtime != self._mtime:
            self._load()
        self._draw()

    def _load(self) -> None:
        assert self.tasks is not None
        try:
            self.tasks.load()
        except TaskError as e:  # unreadable, or not a list and not movable aside: shown, and never saved over
            self.notify(str(e), title="Tasks", severity="error", timeout=12)
            return
        if self.tasks.warning:
            self.notify(self.tasks.warning, title="Tasks", severity="warning", timeout=12)

    def _visible(self) -> list[tuple[int, Task]]:
        assert self.tasks is not None
        return [(i + 1, t) for i, t in enumerate(self.tasks.tasks) if not (self.folded and t.status in ("completed", "cancelled"))]

    def _draw(self, follow: int | None = None) -> None:
        """follow: a task number to put the cursor on (the step a runbook is running)."""
        if self.tasks is None:
            return
        try:
            self._mtime = self.tasks.path.stat().st_mtime
        except FileNotFoundError:
            self._mtime = 0.0
        table = self.query_one(DataTable)
        row = table.cursor_row
        listed = self._visible()
        room = self._task_room(table)
        rows: list[tuple[str, tuple[str | Text, ...]]] = []
        for number, task in listed:
            glyph, colour = GLYPHS[task.status]
            style = "dim" if task.status in ("completed", "cancelled") else ""
            since = task.in_progress_since
            clock = f"{(time.time() - since) / 60:.0f}m" if since else ""
            content = Text(visible(clipped(task.content)), style=style)
            if task.result:
                content.append(f"  → {visible(clipped(task.result))}", "dim")
            content.truncate(room, overflow="ellipsis")  # cut with a mark, never scrolled sideways: the detail has it all
            rows.append(
                (
                    task.id,
                    (
                        str(number),
                        Text(glyph, style=theme_style(self.app, colour, bold=True)),
                        Text(task.priority[0].upper(), style=theme_style(self.app, PRIORITY_COLOURS[task.priority])),
                        clock,
                        content,
                    ),
                )
            )
        if rows != self._rows:  # every 2 s, and mostly nothing has changed: the table is not built again for nothing
            self._rows = rows
            table.clear()
            for key, cells in rows:
                table.add_row(*cells, key=key)
        numbers = [number for number, _ in listed]
        if follow in numbers:
            row = numbers.index(follow)
        if table.row_count:
            table.move_cursor(row=min(row, table.row_count - 1), animate=False)
        done, total = self.tasks.done_count
        title = f"Tasks — {done} of {total} done" + (" (done folded)" if self.folded else "")
        if self.border_title != title:  # setting it draws the whole pane again, every 2 s for nothing
            self.border_title = title
        self._detail()

    def _task_room(self, table: DataTable) -> int:
        """The TASK column's width: what the other columns leave of the table."""
        others = sum(column.get_render_width(table) for key, column in table.columns.items() if key.value != "task")
        return max(8, table.scrollable_content_region.width - others - 2 * table.cell_padding)

    def on_resize(self) -> None:
        self._draw()

    def _detail(self) -> None:
        task = self.current
        detail = self.query_one("#tasks-detail", QuietStatic)
        if task is None:
            detail.update(
                "no tasks" if self.readonly else "no tasks: a adds one, L adds a runbook's tasks (demo-campaign on the demo host)"
            )
            return
        history = " → ".join(f"{s.replace('_', ' ')} {_ago(time.time() - t)}" for t, s in task.history[-4:])
        live = [self.said] if self.running and self.said and task.status == "in_progress" else []
        # the live line first, then the whole text when the table cuts it: 3 lines at most
        whole = [task.content] if len(visible(task.content)) > self._task_room(self.query_one(DataTable)) else []
        lines = [*live, *whole, *([f"action: {task.action}"] if task.action else []), history][:3]
        detail.update(Text("\n".join(visible(clipped(line)) for line in lines)))

    def on_data_table_row_highlighted(self) -> None:
        self._detail()

    @property
    def current(self) -> Task | None:
        number = self.current_number
        return self.tasks.tasks[number - 1] if number is not None and self.tasks is not None else None

    @property
    def current_number(self) -> int | None:
        table = self.query_one(DataTable)
        listed = self._visible() if self.tasks else []
        return listed[table.cursor_row][0] if listed and table.cursor_row < len(listed) else None

    def _apply(self, change, what: str) -> None:  # type: ignore[no-untyped-def]
        try:
            task = change()
        except TaskNotSaved as e:  # the list on screen keeps it; the next change that saves writes it too
            self.notify(f"{e}; it stays on this screen until a save works", title="Tasks", severity="error", timeout=8)
        except TaskError as e:
            self.notify(str(e), title="Tasks", severity="error", timeout=8)
        else:
            if isinstance(task, Task):
                self.session.events.append(TaskChange(via="console", change=what, content=task.content, status=task.status))
        self._draw()

    # -- actions --------------------------------------------------------------
    @work(group="ask", exit_on_error=False)
    async def action_add(self) -> None:
        text = await self.app.push_screen_wait(TextPrompt("New task", check=check_text))
        if text and self.tasks is not None:
            self._apply(lambda: self.tasks.add(text), "add")
            self.query_one(DataTable).move_cursor(row=self.query_one(DataTable).row_count - 1)

    @work(group="ask", exit_on_error=False)
    async def action_edit(self) -> None:
        number, task = self.current_number, self.current
        if number is None or task is None:
            return
        text = await self.app.push_screen_wait(TextPrompt("Edit the task", visible(clipped(task.content)), check=check_text))
        if text and self.tasks is not None:
            self._apply(lambda: self.tasks.edit(number, content=text), "edit")

    def action_status(self, status: str, insist: bool = False) -> None:
        if (number := self.current_number) is not None and self.tasks is not None:
            self._apply(lambda: self.tasks.set_status(number, status, insist=insist), status)

    def action_insist(self) -> None:
        self.action_status("in_progress", insist=True)

    def action_priority(self) -> None:
        number, task = self.current_number, self.current
        if number is not None and task is not None and self.tasks is not None:
            following = PRIORITIES[(PRIORITIES.index(task.priority) + 1) % len(PRIORITIES)]
            self._apply(lambda: self.tasks.edit(number, priority=following), "priority")

    def action_move(self, offset: int) -> None:
        if (number := self.current_number) is not None and self.tasks is not None:
            self._apply(lambda: self.tasks.move(number, offset), "move")
            table = self.query_one(DataTable)
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + offset)))

    def action_delete(self) -> None:
        number, task = self.current_number, self.current
        if number is None or task is None or self.tasks is None:
            return

        self._delete(number, task.content)

    @work(group="ask", exit_on_error=False)
    async def _delete(self, number: int, content: str) -> None:
        if await confirmed(self.app, f"Delete task {number}?", [Text(visible(clipped(content)))], "Delete"):
            self._apply(lambda: self.tasks.delete(number), "delete")  # type: ignore[union-attr]

    def action_fold(self) -> None:
        self.folded = not self.folded
        self._draw()

    # -- runbooks -------------------------------------------------------------
    def can(self, action: str) -> bool | None:
        if action in ("run_one", "run_from_here"):
            return self.session.lifecycle is not None and not self.running
        return True

    @work(group="ask", exit_on_error=False)
    async def action_load_runbook(self) -> None:
        from console.actions.runbook import install, read_runbook, runbooks

        found = runbooks(self.session.config)
        names = ", ".join(found) or "none found"
        default = "demo-campaign" if "demo-campaign" in found and self.session.host_name == "demo" else ""
        name = await self.app.push_screen_wait(TextPrompt(f"Runbook to add ({names})", default))
        path = found.get(name or "")
        if path is None or self.tasks is None:
            if name:
                self.notify(f"no runbook {visible(name)!r}", severity="error")
            return
        try:
            install(self.tasks, read_runbook(path))
        except TaskError as e:
            self.notify(str(e), title="Runbook", severity="error", timeout=10)
        self._draw()

    def action_run_one(self) -> None:
        if (number := self.current_number) is not None:
            self.run_tasks([number])

    def action_run_from_here(self) -> None:
        if (number := self.current_number) is not None and self.tasks is not None:
            self.run_tasks(list(range(number, len(self.tasks.tasks) + 1)))

    @work(exclusive=True, group="runbook", exit_on_error=False)
    async def run_tasks(self, numbers: list[int]) -> None:
        """The tasks' actions, through the session the whole console shares: the other panes show each step as it
        happens (the Server pane follows the lifecycle, the Sweep pane any sweep started through the session)."""
        from console.actions.campaign import ActionFailed, CampaignActions
        from console.actions.runbook import run_tasks

        if self.session.lifecycle is None or self.tasks is None:
            return

        async def confirm(question: str) -> bool:
            call_attention(self.app, self.session.config.notify, "a runbook step waits for you", question)
            return await confirmed(self.app, question[0].upper() + question[1:], [], "Kill")

        def say(line: str) -> None:
            assert self.tasks is not None
            self.said = line.strip()
            self._draw(follow=next((n for n in numbers if self.tasks.tasks[n - 1].status == "in_progress"), None))

        try:
            actions = CampaignActions(self.session, confirm_kill=confirm, say=say)
        except ActionFailed as e:
            self.notify(str(e), severity="error")
            return
        self.running, self.said = True, ""
        try:
            ok = await run_tasks(self.tasks, actions, numbers, say)
        finally:
            self.running = False
            self._draw()
        last = self.tasks.tasks[numbers[-1] - 1] if numbers else None
        if ok and last is not None and last.action and last.action.startswith("compare"):
            pair = Campaign(self.session.config.campaign_dir).latest_pair()
            if pair is not None:
                self.post_message(ShowComparison(*pair))  # the verdict where the curves are
        self.notify("runbook finished" if ok else "runbook stopped at a failed step", severity="information" if ok else "error")

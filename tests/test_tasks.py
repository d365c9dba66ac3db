"""The task list: persistence under failure, concurrent consoles, the todo format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.tasks.tasklist import FILE, TaskError, TaskList

SHARED_TODOS = Path(__file__).parent.parent.parent / "shared" / "data" / "campaign-todos.json"
TODOS = {
    "todos": [
        {"content": "Kill current EAGLE-3 server and zombie processes", "priority": "high", "status": "completed"},
        {"content": "Start baseline server", "priority": "high", "status": "in_progress"},
        {"content": "Sweep baseline", "priority": "medium", "status": "pending"},
    ]
}


def test_add_status_history_and_reload(tmp_path: Path) -> None:
    tasks = TaskList(tmp_path).load()
    tasks.add("Kill the old server", "high")
    tasks.add("Sweep the baseline")
    tasks.set_status(1, "in_progress")
    with pytest.raises(TaskError, match="task 1 is already in progress"):
        tasks.set_status(2, "in_progress")
    tasks.set_status(2, "in_progress", insist=True)
    tasks.set_status(1, "completed", result="memory released")
    again = TaskList(tmp_path).load()
    assert [(t.content, t.status) for t in again.tasks] == [("Kill the old server", "completed"), ("Sweep the baseline", "in_progress")]
    assert [s for _, s in again.tasks[0].history] == ["pending", "in_progress", "completed"]
    assert again.tasks[0].result == "memory released" and again.done_count == (1, 2)
    assert again.tasks[1].in_progress_since is not None
    again.move(2, -1)
    again.edit(1, priority="low")
    again.delete(2)
    assert [(t.content, t.priority) for t in TaskList(tmp_path).load().tasks] == [("Sweep the baseline", "low")]


def test_the_todo_format_round_trips(tmp_path: Path) -> None:
    source = tmp_path / "todos.json"
    source.write_text(json.dumps(TODOS))
    tasks = TaskList(tmp_path / "c").load()
    assert tasks.import_todos(source) == 3
    assert json.loads(tasks.export_todos()) == TODOS
    if SHARED_TODOS.exists():  # the campaign's own list, as it stood
        other = TaskList(tmp_path / "d").load()
        other.import_todos(SHARED_TODOS)
        assert json.loads(other.export_todos()) == json.loads(SHARED_TODOS.read_text())


def test_a_corrupt_file_is_kept_aside_and_reported(tmp_path: Path) -> None:
    (tmp_path / FILE).write_text('{"tasks": [{"content": "half')
    tasks = TaskList(tmp_path).load()
    assert tasks.tasks == [] and tasks.warning and "kept aside" in tasks.warning
    aside = [p for p in tmp_path.iterdir() if p.name.startswith(f"{FILE}.corrupt-")]
    assert len(aside) == 1 and aside[0].read_text() == '{"tasks": [{"content": "half'


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_keeps_the_list_in_memory(tmp_path: Path) -> None:
    tasks = TaskList(tmp_path).load()
    tasks.add("one")
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(TaskError, match="cannot save"):
            tasks.add("two")
        assert [t.content for t in tasks.tasks] == ["one", "two"]
    finally:
        tmp_path.chmod(0o700)


def test_a_failing_disk_keeps_the_list_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = TaskList(tmp_path).load()
    tasks.add("one")

    def full(*args: object, **kw: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("console.tasks.tasklist.write_atomically", full)
    with pytest.raises(TaskError, match="No space left on device"):
        tasks.add("two")
    assert [t.content for t in tasks.tasks] == ["one", "two"]
    assert [t.content for t in TaskList(tmp_path).load().tasks] == ["one"]


def test_two_consoles_keep_each_others_edits_or_refuse(tmp_path: Path) -> None:
    first = TaskList(tmp_path).load()
    first.add("shared")
    second = TaskList(tmp_path).load()
    first.add("from the first")
    second.add("from the second")  # the file changed under it: merged, not overwritten
    assert [t.content for t in TaskList(tmp_path).load().tasks] == ["shared", "from the first", "from the second"]
    first.load()
    second.load()
    first.set_status(1, "completed")
    with pytest.raises(TaskError, match="another console changed the task 'shared'"):
        second.set_status(1, "cancelled")
    assert TaskList(tmp_path).load().tasks[0].status == "completed"


def test_the_event_log_prints_filters_and_exports(tmp_path: Path) -> None:
    from console.events import EventLog, Kill, TaskChange

    log = EventLog(tmp_path / "campaign")
    log.append(Kill(via="cli", host="demo", pids=[1, 2], grace_s=5, group=True, outcomes=[{"pid": 1, "outcome": "exited"}]))
    log.append(TaskChange(via="cli", change="add", content="Sweep the baseline"))
    with open(log.path, "a") as f:
        f.write('{"time": "cut by a cra')  # a crash mid-write loses only that line
    config = tmp_path / "pivot.toml"
    config.write_text('campaign_dir = "campaign"\n')
    run = lambda *a: subprocess.run(
        [sys.executable, "-m", "console", "--config", str(config), "events", *a], capture_output=True, text=True, timeout=60
    )
    printed = run().stdout.splitlines()
    assert len(printed) == 2 and "kill" in printed[0] and "outcomes=1:exited" in printed[0]
    assert run("--kind", "task").stdout.count("\n") == 1
    out = tmp_path / "export.jsonl"
    assert "2 events written" in run("--export", str(out)).stdout
    assert [json.loads(line)["kind"] for line in out.read_text().splitlines()] == ["kill", "task"]


def test_the_event_log_tails_a_long_campaign_from_its_end(tmp_path: Path) -> None:
    """A 100 MB event log (issue 34, L6): `pivot events` took 20.6 s and 1.0 GB; `E` blocked the console ~11 s. The
    log is read a line at a time, and `--tail N` (and `E`) read only its end."""
    from console.events import EventLog, TaskChange

    log = EventLog(tmp_path / "campaign")
    log.append(TaskChange(via="cli", change="add", content="first"))
    line = log.path.read_text()
    with open(log.path, "a") as f:
        for i in range(40_000):
            f.write(line.replace("first", f"task {i}"))
    log.append(TaskChange(via="cli", change="add", content="last"))
    assert [e["content"] for e in log.tail(3)] == ["task 39998", "task 39999", "last"]
    assert len(log.tail(500)) == 500 and log.tail(0) == [] and len(log.read()) == 40_002
    config = tmp_path / "pivot.toml"
    config.write_text('campaign_dir = "campaign"\n')
    run = lambda *a: subprocess.run(
        [sys.executable, "-m", "console", "--config", str(config), "events", *a], capture_output=True, text=True, timeout=60
    )
    tailed = run("--tail", "2").stdout.splitlines()
    assert len(tailed) == 2 and "content=task 39999" in tailed[0] and "content=last" in tailed[1]
    assert run("--kind", "task", "--tail", "1").stdout.count("\n") == 1
    bad = run("--tail", "-3")
    assert bad.returncode == 2 and "Invalid value for '--tail': expected a whole number of 0 or more, got '-3'" in bad.stderr

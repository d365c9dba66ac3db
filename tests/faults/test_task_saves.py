"""Items 5 and 19: the campaign's files under concurrent writers and kill -9. Real processes, real signals."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from console.events import EventLog, TaskChange
from console.tasks.tasklist import FILE, TaskList

WORKER = """
import sys, time
from pathlib import Path
from console import config
from console.cli.tasks import TaskCommand
cfg = config.load(sys.argv[1])
print("ready", flush=True)
while not Path(sys.argv[2]).exists():  # all start adding together
    time.sleep(0.002)
for i in range(25):
    TaskCommand(sys.argv[1]).add("worker %s task %d" % (sys.argv[3], i), "medium")
"""


def test_four_processes_adding_25_tasks_each_lose_none(campaign_config: Path) -> None:
    go = campaign_config.parent / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(campaign_config), str(go), str(w)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for w in range(4)
    ]
    for worker in workers:  # each imported and loaded its config: the adds will overlap
        assert worker.stdout is not None and worker.stdout.readline() == b"ready\n"
    go.touch()
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err.decode()
    campaign = campaign_config.parent / "campaign"
    contents = [t.content for t in TaskList(campaign).load().tasks]
    assert sorted(contents) == sorted(f"worker {w} task {i}" for w in range(4) for i in range(25))
    lines = (campaign / "events.jsonl").read_text().splitlines()
    assert len(lines) == 100 and all(json.loads(line)["change"] == "add" for line in lines)


def test_a_torn_last_event_line_is_ended_before_the_next_append(tmp_path: Path) -> None:
    log = EventLog(tmp_path)
    log.append(TaskChange(via="cli", change="add", content="one"))
    with open(log.path, "a") as f:
        f.write('{"time": "2026-11-30T10:00:00", "kind": "ki')  # a crash mid-write
    log.append(TaskChange(via="cli", change="add", content="two"))
    assert [e["content"] for e in log.read()] == ["one", "two"]
    lines = log.path.read_text().split("\n")
    assert lines[-1] == "" and lines[1].endswith('"kind": "ki')  # the torn line is kept, on a line of its own


SAVER = """
import sys
from pathlib import Path
from console.tasks.tasklist import TaskList
tasks = TaskList(Path(sys.argv[1])).load()
i = 0
while True:
    i += 1
    tasks.add("task %d " % i + "x" * 2000)
    if i == 1:
        print("saved", flush=True)
"""


def test_kill_9_in_the_middle_of_saves_never_leaves_a_file_that_does_not_load(tmp_path: Path) -> None:
    for attempt in range(25):
        proc = subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        # a slow start must not make every kill land before the first save: wait for it (bounded), then kill at a
        # different point of the saves that follow
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready and proc.stdout.readline() == b"saved\n", f"attempt {attempt}: the saver did not save"
        time.sleep((attempt % 5) * 0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        tasks = TaskList(tmp_path).load()
        assert tasks.warning is None, f"attempt {attempt}: {tasks.warning}"
        assert not list(tmp_path.glob(f"{FILE}.corrupt-*"))
    assert TaskList(tmp_path).load().tasks  # and there is something in it

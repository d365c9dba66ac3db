"""Item 18: a task's text is at most 4 KiB (a 20 MB one made every `tasks` command take over a minute): a longer one is
refused with one line naming the limit, when added, edited or imported, and nothing is saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.tasks.tasklist import MAX_TEXT, TaskError, TaskList
from tests.faults.conftest import run_pivot


def test_tasks_add_refuses_a_text_over_4_kib(campaign_config: Path) -> None:
    refused = run_pivot(campaign_config, "tasks", "add", "x" * (MAX_TEXT + 1))
    assert refused.returncode != 0 and refused.stderr.splitlines() == [
        "pivot: a task's text is 4097 bytes: a task holds at most 4096 bytes (4 KiB)"
    ]
    assert not (campaign_config.parent / "campaign" / "tasks.json").exists()
    accepted = run_pivot(campaign_config, "tasks", "add", "é" * (MAX_TEXT // 2))  # 4096 bytes of UTF-8
    assert accepted.returncode == 0, accepted.stderr


def test_an_import_with_a_20_mb_task_is_refused_whole(campaign_config: Path) -> None:
    todos = campaign_config.parent / "todos.json"
    todos.write_text(json.dumps({"todos": [{"content": "Sweep the baseline"}, {"content": "y" * 20_000_000}]}))
    refused = run_pivot(campaign_config, "tasks", "import", str(todos))
    assert refused.returncode != 0 and refused.stderr.splitlines() == [
        f"pivot: {todos}: task 2's text is 19.1 MiB: a task holds at most 4096 bytes (4 KiB)"
    ]
    assert TaskList(campaign_config.parent / "campaign").load().tasks == []


def test_an_edit_over_the_limit_keeps_the_task(tmp_path: Path) -> None:
    tasks = TaskList(tmp_path).load()
    tasks.add("Start the baseline")
    with pytest.raises(TaskError, match="a task holds at most 4096 bytes"):
        tasks.edit(1, content="z" * (MAX_TEXT + 100))
    assert [t.content for t in TaskList(tmp_path).load().tasks] == ["Start the baseline"]


def test_a_20_mb_task_saved_before_the_limit_is_shown_clipped_and_kept(campaign_config: Path) -> None:
    campaign = campaign_config.parent / "campaign"
    campaign.mkdir()
    big = "y" * 20_000_000
    (campaign / "tasks.json").write_text(json.dumps({"tasks": [{"content": "Sweep"}, {"content": big}]}))
    listed = run_pivot(campaign_config, "tasks", "list")  # laying out 20 MB took Rich over three minutes
    assert listed.returncode == 0 and f"… ({len(big) - MAX_TEXT} more characters)" in listed.stdout
    assert len(listed.stdout) < 3 * MAX_TEXT
    assert TaskList(campaign).load().tasks[1].content == big  # shown clipped, never cut on disk


async def test_the_task_form_keeps_what_was_typed_when_it_refuses_it() -> None:
    """14 KB pasted into the task form (issue 34, L7): refused in one line, the form closed, the text gone. Now the
    form says why and keeps the text to be cut down."""
    from textual.app import App
    from textual.widgets import Input, Static

    from console.tasks.tasklist import check_text
    from console.ui.widgets.tasks.pane import TextPrompt

    answers: list[str | None] = []
    pasted = "q" * 14_000

    class Harness(App[None]):
        def on_mount(self) -> None:
            self.push_screen(TextPrompt("New task", check=check_text), answers.append)

    async with Harness().run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        prompt = pilot.app.screen
        assert isinstance(prompt, TextPrompt)
        prompt.query_one(Input).value = pasted
        await pilot.press("enter")
        await pilot.pause()
        assert pilot.app.screen is prompt and answers == []  # still open
        assert prompt.query_one(Input).value == pasted
        said = str(prompt.query_one("#problem", Static).render())
        assert "a task's text is 14000 bytes: a task holds at most 4096 bytes" in said and "shorten it" in said
        prompt.query_one(Input).value = "Sweep the baseline"
        await pilot.press("enter")
        await pilot.pause()
        assert answers == ["Sweep the baseline"]

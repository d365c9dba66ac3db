"""Runbooks: an ordered list of tasks that carry actions, run in order, stopping at the first failure.

    # profiles/runbooks/demo-campaign.toml
    name = "demo campaign"
    [[tasks]]
    content = "Kill the current server and its zombie processes"
    priority = "high"
    action = "kill-stray"

Actions: kill-stray, verify-idle, check-files PATH…, start PROFILE, stop, switch PROFILE,
sweep [key=value…], compare A B (run names, or `last` and `previous` for the newest two), refine [A B]
(measure between the levels where the drafting decision changes, switching servers as needed).
Running one moves its task to in_progress, and to completed with the action's result, or
leaves it in_progress with the error. An action that is not one of these is refused when
the runbook is read, never faked.
"""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from console.actions.campaign import ActionFailed, CampaignActions
from console.config import Config, user_config_dir
from console.tasks.tasklist import TaskError, TaskList

ACTIONS = (
    "kill-stray",
    "verify-idle",
    "check-files",
    "start",
    "stop",
    "switch",
    "sweep",
    "compare",
    "repeat-uncertain",
    "refine",
    "write-profile",
    "verify",
)


@dataclass(frozen=True)
class RunbookTask:
    content: str
    priority: str
    action: str


def check_action(action: str) -> list[str]:
    words = shlex.split(action)
    if not words or words[0] not in ACTIONS:
        raise TaskError(f"unknown action {action!r} (known: {', '.join(ACTIONS)})")
    arity = {
        "start": (1,),
        "switch": (1,),
        "compare": (2,),
        "stop": (0,),
        "kill-stray": (0,),
        "verify-idle": (0,),
        "refine": (0, 2),
        "repeat-uncertain": (0, 1, 2),
        "write-profile": (0, 2),
        "verify": (0, 1),
    }
    if words[0] in arity and len(words) - 1 not in arity[words[0]]:
        counts = " or ".join(map(str, arity[words[0]]))
        raise TaskError(f"{words[0]} takes {counts} argument(s): {action!r}")
    return words


def runbooks(cfg: Config) -> dict[str, Path]:
    """Runbooks by name: `runbooks/` of every profile directory (the shipped ones first), the campaign directory, and
    ~/.config/pivot; a later one of the same name wins, as profiles do."""
    dirs = [d / "runbooks" for d in cfg.profile_dirs] + [cfg.campaign_dir, user_config_dir()]
    return dict(sorted({p.stem: p for d in dirs if d.is_dir() for p in d.glob("*.toml") if p.name != "pivot.toml"}.items()))


def find_runbook(cfg: Config, given: str) -> Path:
    """A runbook file as given, else one of `runbooks(cfg)` by name (`pivot run demo-campaign`)."""
    path = Path(given)
    if path.is_file():
        return path
    found = runbooks(cfg)
    if given in found:
        return found[given]
    raise TaskError(f"no runbook {given!r}: not a file, nor one of {', '.join(found) or 'none found'}")


def read_runbook(path: Path) -> list[RunbookTask]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise TaskError(f"{path}: {e}") from None
    tasks = []
    for i, item in enumerate(data.get("tasks", []), 1):
        if not isinstance(item, dict) or not isinstance(item.get("content"), str):
            raise TaskError(f"{path}: tasks[{i}]: needs a content string")
        action = item.get("action", "")
        if action:
            try:
                check_action(action)
            except TaskError as e:
                raise TaskError(f"{path}: tasks[{i}].action: {e}") from None
        tasks.append(RunbookTask(item["content"], item.get("priority", "medium"), action))
    if not tasks:
        raise TaskError(f"{path}: no [[tasks]]")
    return tasks


async def run_action(actions: CampaignActions, action: str) -> str:
    """A task's action, checked, done by the campaign's verb of that name."""
    words = check_action(action)
    return str(await getattr(actions, "do_" + words[0].replace("-", "_"))(*words[1:]))


async def run_tasks(tasks: TaskList, actions: CampaignActions, numbers: list[int], say: Callable[[str], None]) -> bool:
    """Run the actions of these task numbers in order; stop at the first failure. True when all passed."""
    for number in numbers:
        task = tasks.tasks[number - 1]
        if not task.action:
            continue
        if task.status == "completed":
            say(f"{number}. {task.content}: already completed")
            continue
        tasks.set_status(number, "in_progress", insist=True)
        say(f"{number}. {task.content}  [{task.action}]")
        try:
            result = await run_action(actions, task.action)
        except Exception as e:  # noqa: BLE001 - any failure of a step stops the runbook and is written on its task
            e = e if isinstance(e, (ActionFailed, TaskError)) else ActionFailed(f"{type(e).__name__}: {e}")
            tasks.set_status(number, "in_progress", insist=True, result=f"failed: {e}")
            say(f"   failed: {e}")
            return False
        tasks.set_status(number, "completed", result=result)
        say(f"   done: {result}")
    return True


def install(tasks: TaskList, runbook: list[RunbookTask]) -> list[int]:
    """Add the runbook's tasks that the list does not have yet (same content and action); their numbers."""
    numbers = []
    for item in runbook:
        existing = next((i + 1 for i, t in enumerate(tasks.tasks) if t.content == item.content and t.action == item.action), None)
        if existing is None:
            tasks.add(item.content, item.priority, action=item.action or None)
            existing = len(tasks.tasks)
        numbers.append(existing)
    return numbers

"""The kill confirmation: exactly what will be signalled, pinned by pid and start time."""

from __future__ import annotations

import shlex
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App

from console.gpu.format import gib
from console.gpu.kill import KillPlan
from console.ui.screens.confirm import Confirm


class ConfirmKill(Confirm):
    def __init__(self, plan: KillPlan, grace_s: float, title: str | None = None):
        table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
        for col in ("PID", "USER", "GPU", "GPU-MEM", "STATE", "COMMAND"):
            table.add_column(col, no_wrap=True, overflow="ellipsis", ratio=1 if col == "COMMAND" else None)
        for p in plan.targets:
            table.add_row(
                str(p.pid),
                Text(p.user),
                "-" if p.gpu is None else str(p.gpu),
                "-" if p.mem_mib is None else f"{gib(p.mem_mib)} GiB",
                Text(p.state),
                Text(p.cmd or "(no command line)"),
            )
        how = "to its process group where it leads one" if plan.group else "to the process only"
        summary = f"SIGTERM {how}, then SIGKILL after {grace_s:g} s. These processes hold {gib(plan.memory_mib)} GiB of GPU memory."
        note = "\n".join(f"not killed: pid {r.pid}: {r.reason}" for r in plan.refused)
        n = len(plan.targets)
        super().__init__(title or f"Kill {n} process{'es' if n != 1 else ''}?", [table, summary], action_label="Kill", note=note)
        self.plan = plan


async def kill_confirmed(app: App[Any], plan: KillPlan, grace_s: float, title: str | None) -> bool | None:
    """The one way to a kill from the screen (from a worker): what may not be killed said (None), else this
    confirmation's answer."""
    if not plan.targets:
        app.notify("\n".join(f"pid {r.pid}: {r.reason}" for r in plan.refused), title="Not killed", severity="error")
        return None
    answer: bool = await app.push_screen_wait(ConfirmKill(plan, grace_s, title))
    return answer


class ConfirmCommand(Confirm):
    def __init__(self, host: str, argv: list[str]):
        super().__init__(f"Run the cleanup command on {host}?", [Text(shlex.join(argv))], action_label="Run")

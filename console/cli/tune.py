"""`pivot tune PROFILE`: the draft length for each load, measured on the host, written in the engine's own schedule and
swept (console/actions/tune.py); `pivot report --tune NAME` makes its report."""

from __future__ import annotations

import asyncio

from console import config
from console.actions.tune import TuneOrder, Tuning
from console.cli.prompt import ask
from console.cli.sweep import campaign_verb
from console.cli.target import Target


async def _go_on(plan: str) -> bool:
    print(plan)
    return await asyncio.to_thread(ask, "go on? [yes/no] ") in ("y", "yes")


def tune_command(target: Target, order: TuneOrder, *, yes: bool) -> int:
    cfg = config.load(target.config)
    return asyncio.run(campaign_verb(cfg, target.host, lambda actions: Tuning(actions, order, confirm=None if yes else _go_on).run()))

"""`pivot sweep`, `pivot runs`, `pivot compare`: sweeps and their comparison on the terminal."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from console import config
from console.campaign import Campaign
from console.cli.output import terminal
from console.cli.prompt import ask
from console.cli.target import Target
from console.cli.types import flag
from console.schema import Invalid
from console.settings import PROMPT_SETS, SweepSettings, tidy_levels
from console.sweep.analysis.drift import drift
from console.sweep.model import LevelDone, LevelProgress, LevelRetry, LevelStarted, RequestsDone, Said, SweepDone, SweepStarted
from console.sweep.runs.files import pending_spool
from console.sweep.runs.lock import holder
from console.sweep.runs.store import Run, RunError, delete_run, label, list_runs, open_run, open_run_dir, started_at
from console.sweep.words.levels import capacity_text, kept_text, level_columns, level_row
from console.sweep.words.parts import drift_text
from console.sweep.words.verdicts import at, naming, value
from console.untrusted import visible

if TYPE_CHECKING:  # the session (SSH, telemetry) only for the commands that sweep: `runs` and `compare` read files
    from console.actions.campaign import CampaignActions
    from console.sweep.sweeps import SweepHandle


@dataclass(frozen=True)
class SweepOrder:
    """`pivot sweep`'s options beside the settings: what to sweep, and how."""

    url: str | None
    resume: str | None
    repeat_uncertain: str | None
    refine: tuple[str, str] | None
    yes: bool
    against: str | None
    other_server: bool
    allow_busy: bool
    as_json: bool


def settings_from(cfg: config.Config, given: dict[str, Any]) -> SweepSettings:
    """pivot.toml's [sweep] with the flags given over it; an error names the flag and the value."""
    data = cfg.sweep.to_dict()
    if given.get("prompts") not in (None, *PROMPT_SETS):  # a file named on the command line: from where it was typed
        given = {**given, "prompts": os.path.abspath(given["prompts"])}
    if "levels" in given and "rates" not in given:  # levels named here are concurrencies, whatever [sweep] rates says
        given = {**given, "rates": []}
    if "rates" in given:
        given = {**given, "rates": sorted(set(given["rates"]))}
    if "levels" in given:
        tidy, note = tidy_levels(given["levels"])
        if note:
            print(f"pivot: --levels: {note}", file=sys.stderr)
        given = {**given, "levels": list(tidy)}
    try:
        return SweepSettings.from_dict({**data, **given})
    except Invalid as e:  # a flag's value, else pivot.toml's (checked when it was read: a flag made it wrong)
        key = (e.key or "").split(".")[0]
        raise RunError(f"{flag(key) if key in given else f'[sweep] {e.key}'}: {e.problem}") from None


def sweep_command(target: Target, order: SweepOrder, given: dict[str, Any]) -> int:
    """given: the [sweep] settings given as flags."""
    cfg = config.load(target.config)
    if order.refine:
        a, b = resolve_runs(cfg, list(order.refine))
        question = (
            f"refining switches the server on {cfg.host(target.host).name} between {a.profile} and {b.profile}, as often "
            "as it takes (each switch stops the running server)"
        )
        return asyncio.run(
            campaign_verb(cfg, target.host, lambda actions: actions.do_refine(a.name, b.name), ask_first=None if order.yes else question)
        )
    if order.repeat_uncertain:
        uncertain = resolve_runs(cfg, [order.repeat_uncertain])[0]
        if (pid := holder(uncertain.dir)) is not None:
            raise RunError(f"run {uncertain.name} is being written by a load generator now (pid {pid}): stop that sweep first")
        against = resolve_runs(cfg, [order.against])[0].name if order.against else None
        return asyncio.run(campaign_verb(cfg, target.host, lambda actions: actions.do_repeat_uncertain(uncertain.name, against)))
    run: Run | None = None
    how = "new"
    if order.resume:
        if given:  # a resume measures what the run lacks, with the run's own settings
            raise RunError(
                f"--resume measures what run {order.resume} still lacks with its own settings: {', '.join(map(flag, given))} "
                "would measure something else (a new sweep takes them)"
            )
        run = resolve_runs(cfg, [order.resume])[0]
        if (pid := holder(run.dir)) is not None:
            raise RunError(f"run {run.name} is being written by a load generator now (pid {pid}): stop that sweep first")
        settings = run.settings
        how = "resume"
    else:
        settings = settings_from(cfg, given)
    status = asyncio.run(
        sweep(
            cfg,
            target.host,
            settings,
            run=run,
            how=how,
            levels=None,
            url=order.url,
            as_json=order.as_json,
            other_server=order.other_server,
            allow_busy=order.allow_busy,
        )
    )
    if cfg.notify.bell and sys.stdout.isatty():  # an operator in another window: tmux marks this one
        print("\a", end="", flush=True)
    return status


async def campaign_verb(
    cfg: config.Config, host: str | None, verb: Callable[[CampaignActions], Awaitable[object]], *, ask_first: str | None = None
) -> int:
    """One of the campaign's verbs (console/actions/campaign.py) on the host, its steps printed as they come: a
    refinement (`ask_first` asks before the first switch of servers), or a repeat of a run's uncertain levels."""
    from console.actions.campaign import ActionFailed, CampaignActions

    if ask_first is not None:
        print(ask_first)
        if ask("go on? [yes/no] ") not in ("y", "yes"):
            print("nothing measured")
            return 1
    from console.session import Session

    async with Session(cfg, host) as session:
        await session.connect()
        try:
            print(await verb(CampaignActions(session, confirm_kill=_never, via="cli")))
        except ActionFailed as e:
            print(f"pivot: {e}", file=sys.stderr)
            return 1
    return 0


async def _never(question: str) -> bool:
    return False  # neither kills


async def sweep(
    cfg: config.Config,
    host: str | None,
    settings: SweepSettings,
    *,
    run: Run | None,
    how: str,
    levels: list[int] | None,
    url: str | None,
    as_json: bool,
    other_server: bool,
    allow_busy: bool,
) -> int:
    from console.session import Session
    from console.sweep.sweeps import ServerBusy

    out = terminal(stderr=as_json)
    async with Session(cfg, None if url else host, local=url is not None) as session:
        if url is None:
            await session.connect()
        try:
            handle = await session.sweeps.start(
                settings, run=run, how=how, levels=levels, url=url, other_server=other_server, allow_busy=allow_busy
            )
        except ServerBusy as e:  # the console asks instead; a command is told how to go on
            raise RunError(f"{e}; sweep anyway with --allow-busy") from None
        target = ["--url", url] if url else []
        resume = config.pivot_command(cfg, None if url else session.host_name, "sweep", *target, "--resume", handle.run.name)
        return await print_sweep(handle, out, as_json, resume)


def level_table(title: str) -> Table:
    """The levels' table of `runs show`, of a sweep's end and of an interrupted one: its columns, no rows yet."""
    table = Table(box=None, header_style="bold", pad_edge=False, title=title, title_justify="left")
    for col in level_columns():
        table.add_column(col, justify="left" if col == "notes" else "right")
    return table


async def print_sweep(handle: SweepHandle, out: Console, as_json: bool, resume: str) -> int:
    """resume: the command line that measures what the run lacks, said where the sweep leaves it partial."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=out,
        transient=True,
        disable=as_json or not out.is_terminal,
    )
    with naming(bool(handle.settings.rates)):
        try:
            with progress:
                status = await _follow(handle, out, as_json, progress, resume)
        except asyncio.CancelledError:  # Ctrl-C: the load generator ended too, keeping what finished; said before the exit
            _say_interrupted(handle.run, out, as_json, resume)
            raise
        if not as_json:
            out.print(_saved_table(handle.run)[0])  # as kept: a resumed level with what it had before, its attempts merged
            out.print(f"saved: {handle.run.dir}")
    return status


def _saved_table(run: Run) -> tuple[Table, list[LevelDone]]:
    levels = open_run_dir(run.dir).levels(tables=False)
    table = level_table(f"run {run.name}")
    for level in levels:
        table.add_row(*level_row(level))
    return table, levels


def _say_interrupted(run: Run, out: Console, as_json: bool, resume: str) -> None:
    table, levels = _saved_table(run)
    if not as_json:
        out.print(table)
    out.print(Text(f"interrupted: {kept_text(levels)}; `{resume}` measures what is missing", style="yellow"))


async def _follow(handle: SweepHandle, out: Console, as_json: bool, progress: Progress, resume: str) -> int:
    """The sweep's events as they come, on the terminal; its exit status (3: stopped on a failed level)."""
    status = 0
    task = None
    async for event in handle.events():
        if as_json and not isinstance(event, RequestsDone | LevelProgress):  # a run's events, as its events.jsonl holds them
            print(json.dumps(event.model_dump(mode="json", exclude_unset=True)), flush=True)
        match event:
            case SweepStarted():
                status = 0 if status == 3 else status  # a resume goes on from where a fetched sweep stopped
                for warning in event.warnings:
                    out.print(Text(f"warning: {visible(warning)}", style="yellow"))
            case LevelStarted():
                if task is not None:
                    progress.remove_task(task)
                task = progress.add_task(at(event.c) + (" again (drift)" if event.reference else ""), total=event.requests + event.warmup)
            case RequestsDone() if task is not None:
                progress.advance(task, event.n)
            case LevelDone() if event.reference:
                out.print(
                    Text(
                        f"{at(event.c)} measured again at the end: {event.total_tok_s:.1f} tok/s (the sweep's "
                        "drift: pivot compare holds it against the start)"
                    )
                )
            case LevelDone():
                cells = level_row(event)
                if not as_json:
                    progress.console.print(Text("  ".join(f"{h}={v}" for h, v in zip(level_columns(), cells, strict=True) if v)))
            case LevelRetry():
                out.print(
                    Text(
                        f"{at(event.c)} failed ({visible(str(event.reason))}); the server answers again: measuring the level once more",
                        style="yellow",
                    )
                )
            case Said(type="failed"):
                out.print(
                    Text(
                        f"pivot: the load generator failed: {visible(event.message)}; what it measured is "
                        f"kept, and `{resume}` measures the rest",
                        style="red",
                    )
                )
                status = 1
            case Said():
                out.print(Text(visible(event.message), style="yellow"))
            case SweepDone() if event.failed:
                out.print(
                    Text(
                        f"pivot: the sweep stopped: {visible(event.failed)}; the run is partial and `{resume}` measures the rest",
                        style="red",
                    )
                )
                status = 3
            case SweepDone() if event.aborted or event.stopped:
                out.print("sweep " + ("aborted" if event.aborted else "stopped") + ": finished requests are kept")
            case SweepDone() if event.capacity is not None:
                out.print(Text(capacity_text(event.capacity), style="bold"))
    return status


def import_runs(config_path: str | None, files: list[str], name: str | None, profile: str) -> int:
    return _import(config.load(config_path), files, name, profile, terminal())


def delete_runs(config_path: str | None, names: list[str], yes: bool) -> int:
    return _delete(config.load(config_path), names, yes)


def show_run(config_path: str | None, name: str) -> int:
    cfg = config.load(config_path)
    out = terminal()
    run = Campaign(cfg.campaign_dir).resolve(name)
    state = run.state
    title = f"{run.name} ({visible(run.profile)}, {state})"
    if run.corrupt:
        title += f": {run.corrupt}"
    if run.stopped_because:
        title += f": stopped because {visible(run.stopped_because)}"
    with naming(run.rates):
        table = level_table(title)
        for level in run.levels():
            table.add_row(*level_row(level))
        out.print(table)
    for line in run.workload:
        out.print(line, markup=False, highlight=False)
    if run.meta.capacity is not None:
        out.print(capacity_text(run.meta.capacity), markup=False, highlight=False)
    if run.client_placement:
        out.print(f"the load generator ran {run.client_placement}", markup=False, highlight=False)
    if run.served_by:
        out.print(f"served by {run.served_by}", markup=False, highlight=False)
    if (moved := drift(run, cfg.margin)) is not None:
        word = {"alike": "within the margin", "cannot tell": "cannot tell"}.get(moved.verdict.word, "beyond the margin")
        with naming(run.rates):
            out.print(f"{drift_text(moved, label(run))} ({word})", markup=False, highlight=False)
    return 0


def list_runs_command(config_path: str | None) -> int:
    cfg = config.load(config_path)
    rows = [("RUN", "PROFILE", "STATE", "LEVELS", "STARTED (UTC)")]
    for run in list_runs(cfg.campaign_dir):
        levels = run.level_cs() if not run.meta.corrupt else None
        state = run_state(run)
        with naming(run.rates):  # a rate run's levels: 0.5,1,2 req/s
            cells = (",".join(value(c) for c in levels) + (" req/s" if run.rates else "")) if levels is not None else ""
        if run.corrupt:
            cells = visible(run.corrupt)
        started = started_at(run)
        rows.append((run.name, visible(run.profile), state, cells, f"{started:%Y-%m-%d %H:%M:%S}" if started.year > 1 else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for cells_of_run in rows:  # plain columns, never truncated: run names are meant to be copied
        print("  ".join(cell.ljust(w) for cell, w in zip(cells_of_run, widths, strict=True)).rstrip())
    return 0


def run_state(run: Run) -> str:
    """A run's state as `pivot runs` says it: being measured now, or with events that wait on a host, beside the
    state its events give."""
    if (pid := holder(run.dir)) is not None:
        return f"measuring (pid {pid})"
    state = run.state
    if state == "partial" and run.meta.ended_by in ("aborted", "stopped"):
        state = f"partial ({run.meta.ended_by})"
    if state == "partial" and any(c for c in run.meta.levels or [] if c not in (run.meta.measured_levels or [])):
        state = "partial (a level failed)"
    if (pending := pending_spool(run.dir)) is not None:
        return f"{state}, more waits on {visible(str(pending.get('host')))}: sweep --resume fetches it"
    return state


def _import(cfg: config.Config, names: list[str], name: str | None, profile: str, out: Console) -> int:
    from console.server.profiles import ProfileError, load_profiles
    from console.sweep.runs.imports import import_results

    if not names:
        raise RunError("runs import takes the result files of one server (bench_serving, vllm bench serve)")
    try:
        found = load_profiles(*cfg.profile_dirs).get(profile)
        argv, kind = found.argv(), found.kind
    except ProfileError:
        argv, kind = None, None  # a profile unknown here: the run is imported without its command line
    run = import_results(cfg.campaign_dir, [Path(n) for n in names], name=name, profile=profile, argv=argv, kind=kind)
    intervals = "with per-request intervals" if all(lv.total_tok_s_lo is not None for lv in run.levels()) else "aggregates"
    out.print(f"imported {run.name} from {run.meta.source}: levels {', '.join(str(level.c) for level in run.levels())} ({intervals})")
    return 0


def _delete(cfg: config.Config, names: list[str], yes: bool) -> int:
    if not names:
        raise RunError("runs delete takes the runs to delete (pivot runs lists them)")
    runs = [open_run(cfg.campaign_dir, n) for n in names]  # every name checked before anything is removed
    for run in runs:
        if (pid := holder(run.dir)) is not None:
            raise RunError(f"run {run.name} is being written by a load generator (pid {pid}): stop that sweep first; nothing deleted")
    if not yes:
        print("delete " + ", ".join(f"{r.name} ({r.dir})" for r in runs) + "?")
        if ask("[yes/no] ") not in ("y", "yes"):
            print("nothing deleted")
            return 1
    for run in runs:
        delete_run(cfg.campaign_dir, run.name)
        print(f"deleted {run.name}")
    return 0


def resolve_runs(cfg: config.Config, names: list[str]) -> list[Run]:
    """Runs by name; `last` and `previous` as runbooks say them (the newest, the one before)."""
    return Campaign(cfg.campaign_dir).resolve_all(names)

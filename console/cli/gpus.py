"""`pivot gpus` and `pivot kill`: the GPU pane's data and kill flow on the terminal."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict

from rich.console import Console
from rich.table import Table
from rich.text import Text

from console import config
from console.actions import kill
from console.cli.output import trimmed
from console.cli.prompt import ask
from console.cli.target import Target
from console.config import Config, ConfigError
from console.gpu.format import age, flags, gib, idle_line
from console.gpu.samples import AgentError, Sample
from console.gpu.telemetry import LinkDown
from console.remote.errors import RemoteError
from console.server.lifecycle import ServerLifecycle
from console.server.slurm import node_line
from console.session import Session


def _table(sample: Sample, threshold: float) -> list[Table | str]:
    gpus = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("GPU", "NAME", "MEM GiB", "UTIL", "TEMP", "POWER"):
        gpus.add_column(col, justify="left" if col == "NAME" else "right")
    for g in sample.gpus:
        power = f"{g.power_w:.0f}/{g.power_limit_w:.0f}W" if g.power_w is not None and g.power_limit_w else "?"
        gpus.add_row(
            str(g.index),
            Text(g.name),
            f"{gib(g.mem_used_mib)}/{gib(g.mem_total_mib)}",
            "?" if g.util_pct is None else f"{g.util_pct:.0f}%",
            "?" if g.temp_c is None else f"{g.temp_c:.0f}C",
            power,
        )
    procs = _process_table("GPU", "PID", "USER", "GPU-MEM", "STATE", "AGE", "FLAGS", "COMMAND")
    now = time.time()
    for p in sorted(sample.procs, key=lambda p: (p.gpu if p.gpu is not None else -1, p.pid)):
        procs.add_row(
            str(p.gpu), str(p.pid), Text(p.user), f"{gib(p.mem_mib)} GiB", Text(p.state), age(p.age_s(now)), ",".join(flags(p)), Text(p.cmd)
        )
    return [gpus, "", procs if sample.procs else "no GPU processes", "", idle_line(sample, threshold)]


async def _fleet(cfg: Config, out: Console, as_json: bool) -> int:
    """One line per GPU host; exit 1 when one of them could not be looked at."""
    from console.fleet import COLUMNS, gpu_hosts, look_all

    if not gpu_hosts(cfg):
        raise ConfigError(cfg.path, "hosts", "no GPU host configured")
    views = await look_all(cfg)
    if as_json:
        for view in views:
            print(json.dumps(view.to_dict()), flush=True)
        return 0 if all(v.state == "up" for v in views) else 1
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in COLUMNS:
        table.add_column(col, justify="right" if col in ("RTT", "GPUS BUSY", "MEM GiB", "STRAY") else "left")
    for v in views:
        table.add_row(*v.cells())
    out.print(table)
    return 0 if all(v.state == "up" for v in views) else 1


def _process_table(*columns: str) -> Table:
    """One row per process; the command gets the width the other columns leave and is cut with an ellipsis."""
    table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
    for col in columns:
        table.add_column(
            col,
            justify="right" if col in ("GPU", "PID", "GPU-MEM", "AGE") else "left",
            no_wrap=True,
            overflow="ellipsis",
            ratio=1 if col == "COMMAND" else None,
        )
    return table


async def _first_sample(session: Session) -> Sample:
    await session.connect()
    result = await session.telemetry.sample_once()
    if isinstance(result, AgentError):
        raise RemoteError(session.host_label, result.message)
    return result


async def show_gpus(target: Target, *, watch: bool, as_json: bool, every_host: bool) -> int:
    if not as_json:
        return await _gpus(target, watch, as_json, every_host)
    try:  # a script reading JSON gets JSON, a failure too: {"type": "error", ...} on stdout, the line on stderr
        return await _gpus(target, watch, as_json, every_host)
    except (ConfigError, RemoteError) as e:
        print(
            json.dumps({"type": "error", "kind": type(e).__name__, "host": getattr(e, "host", None) or None, "message": str(e)}), flush=True
        )
        raise


async def _job_gpus(lifecycle: ServerLifecycle, threshold_mib: float, as_json: bool) -> int:
    """A Slurm login node: the GPUs of its running job's nodes, one line (or JSON object) per node."""
    await lifecycle.conn.connected(30, fail_fast=True)
    status = await lifecycle.poll()
    nodes = await lifecycle.job_gpus()
    if not nodes:
        print(f"{lifecycle.spec.name} is a Slurm login node and no job of pivot's runs there ({status.describe()})")
        return 1
    for name, sample in nodes:
        if as_json:
            print(json.dumps({"type": "node", "node": name, "sample": asdict(sample)}))
        else:
            print(node_line(name, sample, threshold_mib))
    return 0 if all(isinstance(s, Sample) for _, s in nodes) else 1


async def _gpus(target: Target, watch: bool, as_json: bool, every_host: bool) -> int:
    cfg = config.load(target.config)
    out = trimmed()
    if every_host:
        return await _fleet(cfg, out, as_json)
    async with Session(cfg, target.host, local=target.local) as session:
        if session.lifecycle is not None and session.lifecycle.runs_jobs:
            assert isinstance(session.lifecycle, ServerLifecycle)  # a login node's, over SSH
            return await _job_gpus(session.lifecycle, cfg.idle_threshold_mib, as_json)
        if session.spec is not None and not session.spec.gpus:
            raise ConfigError(cfg.path, f"hosts.{session.spec.name}", "this host has no GPUs (gpus = false)")
        if not watch:
            sample = await _first_sample(session)
            if as_json:
                print(json.dumps({"type": "sample", **asdict(sample)}))
            else:
                for part in _table(sample, cfg.idle_threshold_mib):
                    out.print(part)
            return 0
        await session.connect()
        async for event in session.telemetry.events():
            if isinstance(event, Sample):
                if as_json:
                    print(json.dumps({"type": "sample", **asdict(event)}), flush=True)
                else:
                    out.clear()
                    out.print(Text(f"{time.strftime('%H:%M:%S')}  source: {event.source}"))
                    for part in _table(event, cfg.idle_threshold_mib):
                        out.print(part)
            elif isinstance(event, (AgentError, LinkDown)):
                message = getattr(event, "message", None) or getattr(event, "reason", "")
                if as_json:
                    print(json.dumps({"type": "error", "kind": type(event).__name__, "message": message}), flush=True)
                print(f"pivot: {message}", file=sys.stderr)
    return 0


async def kill_command(target: Target, pids: list[int], *, stray: bool, yes: bool, grace_s: float | None, single: bool) -> int:
    if bool(pids) == stray:
        print("pivot: kill takes PIDs or --stray (never a name pattern)", file=sys.stderr)
        return 2
    cfg = config.load(target.config)
    async with Session(cfg, target.host, local=target.local) as session:
        return await kill_processes(session, pids, stray=stray, yes=yes, grace_s=grace_s, single=single)


async def kill_processes(
    session: Session,
    pids: list[int],
    *,
    stray: bool,
    yes: bool,
    grace_s: float | None,
    single: bool,
    release_timeout_s: float = kill.RELEASE_TIMEOUT_S,
) -> int:
    """The kill flow on the terminal; 0 when every target's memory came back."""
    grace = session.config.kill_grace_s if grace_s is None else grace_s
    out = trimmed()
    sample = await _first_sample(session)
    chosen = [p.pid for p in sample.stray] if stray else pids
    if not chosen:
        out.print("no stray processes: nothing to kill" if stray else "no pid given")
        return 0
    plan = kill.plan(session, sample, chosen, group=not single)
    for refusal in plan.refused:
        out.print(Text.assemble(("refused", "bold red"), f" pid {refusal.pid}: {refusal.reason}"))
    if not plan.targets:
        return 1
    out.print(f"SIGTERM, then SIGKILL after {grace:g} s" + ("" if single else ", to the process group where the process leads one") + ":")
    table = _process_table("PID", "USER", "GPU", "GPU-MEM", "STATE", "COMMAND")
    for p in plan.targets:
        table.add_row(str(p.pid), Text(p.user), str(p.gpu), f"{gib(p.mem_mib)} GiB", Text(p.state), Text(p.cmd))
    out.print(table)
    if not yes:
        what = "this process" if len(plan.targets) == 1 else f"these {len(plan.targets)} processes"
        answer = await asyncio.to_thread(ask, f"Kill {what}? [y/N] ")
        if answer not in ("y", "yes"):
            out.print("nothing was killed")
            return 1
    try:
        report = await kill.kill(session, plan, grace_s=grace)
    except asyncio.CancelledError:  # Ctrl-C: what was under way, said before the exit
        out.print(
            Text(
                f"interrupted while {session.host_label} killed {len(plan.targets)} process(es): the host goes on to "
                "the end (SIGKILL after the grace); logged as interrupted; pivot gpus shows what still runs",
                style="yellow",
            )
        )
        raise
    for o in report.outcomes:
        out.print(Text(report.said(o), style="green" if o.ended else "yellow"))
    for parent in report.parents:
        out.print(f"  a zombie's parent {parent} must reap it: pivot kill {parent}")
    for line in report.advice:
        out.print(f"  {line}")
    samples = kill.only_samples(session)
    try:
        released = await kill.follow_release(
            samples, plan, lambda line: out.print(Text(line)), timeout_s=release_timeout_s, since=report.began
        )
    finally:
        await samples.aclose()
    return 0 if released else 1

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
from console.cli.prompt import ask
from console.gpu.format import age, flags, gib, idle_line
from console.gpu.kill import KillOutcome, ReleaseWatch, plan_kill, zombie_advice
from console.gpu.samples import AgentError, Sample
from console.gpu.telemetry import LinkDown, LocalTelemetry, RemoteTelemetry
from console.remote import Connection
from console.tasks.events import EventLog

RELEASE_TIMEOUT_S = 30.0


def _table(sample: Sample, threshold: float) -> list[Table | str]:
    gpus = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("GPU", "NAME", "MEM GiB", "UTIL", "TEMP", "POWER"):
        gpus.add_column(col, justify="left" if col == "NAME" else "right")
    for g in sample.gpus:
        power = f"{g.power_w:.0f}/{g.power_limit_w:.0f}W" if g.power_w is not None and g.power_limit_w else "?"
        gpus.add_row(str(g.index), Text(g.name), f"{gib(g.mem_used_mib)}/{gib(g.mem_total_mib)}",
                     "?" if g.util_pct is None else f"{g.util_pct:.0f}%", "?" if g.temp_c is None else f"{g.temp_c:.0f}C", power)
    procs = _process_table("GPU", "PID", "USER", "GPU-MEM", "STATE", "AGE", "FLAGS", "COMMAND")
    now = time.time()
    for p in sorted(sample.procs, key=lambda p: (p.gpu if p.gpu is not None else -1, p.pid)):
        procs.add_row(str(p.gpu), str(p.pid), Text(p.user), f"{gib(p.mem_mib)} GiB", Text(p.state), age(p.age_s(now)),
                      ",".join(flags(p)), Text(p.cmd))
    return [gpus, "", procs if sample.procs else "no GPU processes", "", idle_line(sample, threshold)]


def _process_table(*columns: str) -> Table:
    """One row per process; the command gets the width the other columns leave and is cut with an ellipsis."""
    table = Table(box=None, header_style="bold", pad_edge=False, expand=True)
    for col in columns:
        table.add_column(col, justify="right" if col in ("GPU", "PID", "GPU-MEM", "AGE") else "left", no_wrap=True,
                         overflow="ellipsis", ratio=1 if col == "COMMAND" else None)
    return table


def _telemetry(cfg: config.Config, host: str | None, local: bool) -> tuple[RemoteTelemetry | LocalTelemetry, Connection | None]:
    if local:
        return LocalTelemetry(interval=cfg.telemetry_interval_s), None
    spec = cfg.host(host)
    conn = Connection(spec)
    return RemoteTelemetry(conn, spec, interval=cfg.telemetry_interval_s), conn


async def _first_sample(telemetry: RemoteTelemetry | LocalTelemetry) -> Sample:
    if isinstance(telemetry, RemoteTelemetry):
        await telemetry.conn.up_now()
        result = await telemetry.sample_once()
    else:
        result = None
        async for event in telemetry.events():
            if isinstance(event, (Sample, AgentError)):
                result = event
                break
    if isinstance(result, AgentError):
        raise SystemExit(f"pivot: {result.message}")
    assert isinstance(result, Sample)
    return result


async def cmd_gpus(cfg: config.Config, host: str | None, *, watch: bool, as_json: bool, local: bool) -> int:
    telemetry, conn = _telemetry(cfg, host, local)
    out = Console()
    try:
        if not watch:
            sample = await _first_sample(telemetry)
            if as_json:
                print(json.dumps(asdict(sample)))
            else:
                for part in _table(sample, cfg.idle_threshold_mib):
                    out.print(part)
            return 0
        if conn is not None:
            await conn.up_now()
        async for event in telemetry.events():
            if isinstance(event, Sample):
                if as_json:
                    print(json.dumps(asdict(event)), flush=True)
                else:
                    out.clear()
                    out.print(Text(f"{time.strftime('%H:%M:%S')}  source: {event.source}"))
                    for part in _table(event, cfg.idle_threshold_mib):
                        out.print(part)
            elif isinstance(event, (AgentError, LinkDown)):
                print(f"pivot: {getattr(event, 'message', None) or getattr(event, 'reason', '')}", file=sys.stderr)
        return 0
    finally:
        if conn is not None:
            await conn.close()


async def cmd_kill(cfg: config.Config, host: str | None, pids: list[int], *, stray: bool, yes: bool, grace: float | None,
                   single: bool, local: bool) -> int:
    telemetry, conn = _telemetry(cfg, host, local)
    grace_s = cfg.kill_grace_s if grace is None else grace
    out = Console()
    try:
        sample = await _first_sample(telemetry)
        chosen = [p.pid for p in sample.stray] if stray else pids
        if not chosen:
            out.print("no stray processes: nothing to kill" if stray else "no pid given")
            return 0
        agent_pid = telemetry.hello.pid if telemetry.hello else None
        plan = plan_kill(sample, chosen, agent_pid=agent_pid, group=not single)
        for refusal in plan.refused:
            out.print(Text.assemble(("refused", "bold red"), f" pid {refusal.pid}: {refusal.reason}"))
        if not plan.targets:
            return 1
        out.print(f"SIGTERM, then SIGKILL after {grace_s:g} s" + ("" if single else ", to the process group where the process leads one") + ":")
        table = _process_table("PID", "USER", "GPU", "GPU-MEM", "STATE", "COMMAND")
        for p in plan.targets:
            table.add_row(str(p.pid), Text(p.user), str(p.gpu), f"{gib(p.mem_mib)} GiB", Text(p.state), Text(p.cmd))
        out.print(table)
        if not yes:
            answer = await asyncio.to_thread(ask, f"Kill these {len(plan.targets)} processes? [y/N] ")
            if answer not in ("y", "yes"):
                out.print("nothing was killed")
                return 1
        outcomes = [KillOutcome.from_agent(d) for d in await telemetry.kill(plan.agent_targets(), grace_s)]
        for o in outcomes:
            out.print(Text(o.describe(), style="green" if o.ended else "yellow"))
            if advice := zombie_advice(o):
                out.print(f"  {advice}" + (f": pivot kill {o.ppid}" if o.ppid and o.ppid > 1 else ""))
        log = EventLog(cfg.campaign_dir)
        log.append("kill", host=conn.host if conn else "local", pids=[p.pid for p in plan.targets], signal="TERM,KILL",
                   grace_s=grace_s, outcomes=[asdict(o) for o in outcomes])
        released = await _follow_release(telemetry, ReleaseWatch(plan), out)
        return 0 if released else 1
    finally:
        if conn is not None:
            await conn.close()


async def _follow_release(telemetry: RemoteTelemetry | LocalTelemetry, watch: ReleaseWatch, out: Console) -> bool:
    deadline = time.monotonic() + RELEASE_TIMEOUT_S
    events = telemetry.events()
    try:
        while not watch.done and time.monotonic() < deadline:
            try:
                event = await asyncio.wait_for(anext(events), deadline - time.monotonic())
            except asyncio.TimeoutError:
                break
            if isinstance(event, Sample):
                for message in watch.update(event):
                    out.print(message)
                last = event
        if not watch.done:
            holders = watch.holders(last) if "last" in locals() else []
            still = ", ".join(f"pid {p.pid} ({p.state})" for p in holders) or "unknown"
            out.print(Text(f"memory not released after {RELEASE_TIMEOUT_S:g} s on GPU {', '.join(map(str, watch.pending))}: {still}",
                           style="red"))
        return watch.done
    finally:
        await events.aclose()

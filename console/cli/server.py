"""`pivot server …` and `pivot profiles …`: the Server pane's actions on the terminal."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from console import config
from console.cli.output import trimmed
from console.cli.target import Target
from console.server.adopt import adopt, unmanaged
from console.server.lifecycle import Check, Lifecycle, ServerLifecycle
from console.server.multinode import ranks
from console.server.profiles import diff, load_profiles
from console.server.slurm import SlurmLifecycle, batch_script
from console.server.state import LifecycleError, PreflightFailed, ServerState
from console.session import Session
from console.untrusted import visible

READY_TIMEOUT_S = 1800.0  # a large model can take many minutes to load
STATUS_TAIL = 8  # a crashed server's last lines in `server status`: the state first, the log is `server logs`


def list_profiles(config_path: str | None) -> int:
    out = trimmed(highlight=False)
    profiles = load_profiles(*config.load(config_path).profile_dirs)
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("PROFILE", "KIND", "DRAFTS", "EXTENDS", "DESCRIPTION"):
        table.add_column(col)
    for name in profiles.names:  # a name is a file's: written out like any text from disk
        if name in profiles.broken:
            table.add_row(Text(visible(name)), Text("broken", style="red"), "", "", Text(visible(str(profiles.broken[name]))))
        else:
            p = profiles.profiles[name]
            drafts = Text(visible(p.drafting.method)) if p.drafting else Text("—")
            table.add_row(Text(visible(name)), Text(p.kind), drafts, Text(visible(p.extends or "")), Text(visible(p.description)))
    out.print(table)
    return 1 if profiles.broken else 0


def show_profile(config_path: str | None, name: str) -> int:
    cfg = config.load(config_path)
    p = load_profiles(*cfg.profile_dirs).get(name)
    print(f"# {visible(str(p.path))}")
    ready = f"; its log says {visible(p.ready_line)!r}" if p.ready_line else ""
    first, *rest = map(visible, p.health_paths)
    fallback = f" (where there is no {first}: {', then '.join(rest)})" if rest else ""
    print(f"# {p.engine.title} ({p.kind}): ready when {first} answers 200{fallback}{ready}")
    engine = p.engine
    metrics = f"metrics at {engine.metrics}" if engine.metrics else "no metrics"
    usage = "usage in the stream" if engine.include_usage else "no usage in the stream (tokens counted as they come)"
    eos = "ignore_eos sent" if engine.ignore_eos else "ignore_eos not sent"
    early = ", requests may end early" if engine.ends_early else ""
    print(f"# {metrics}; {usage}; {eos}{early}")
    print(f"# {p.drafting_text()}")
    if p.left_out:  # `false` drops a flag; the engine's default then applies, which may not be "off"
        print(f'# left out (false): {" ".join(visible(f) for f in p.left_out)}; write "False" to pass the word')
    if p.node_count:  # a number of nodes: a Slurm login node runs it as this job
        print(f'# on a Slurm host (role = "slurm"): a job on {p.node_count} nodes, this batch script\n')
        print(batch_script(p, p.argv()))
        return 0
    for rank in ranks(p, cfg):  # (none for a profile of one host)
        print(f"# rank {rank.rank} on {rank.host.name}:")
        print(rank.profile.command_line())
    if not p.nodes:
        print(p.command_line())  # unwrapped: a command line to paste
    return 0


def diff_profiles(config_path: str | None, first: str, second: str) -> int:
    out = trimmed(highlight=False)
    profiles = load_profiles(*config.load(config_path).profile_dirs)
    a, b = profiles.get(first), profiles.get(second)
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("SETTING", a.name, b.name):
        table.add_column(col)
    for key, va, vb in diff(a, b):
        table.add_row(Text(visible(key)), Text(visible(va) if va is not None else "—"), Text(visible(vb) if vb is not None else "—"))
    out.print(table if diff(a, b) else f"{a.name} and {b.name} start the same server")
    return 0


def print_checks(out: Console, checks: list[Check]) -> None:
    for c in checks:
        if not c.ok:
            mark = Text("FAIL", style="bold red")
        else:
            mark = Text("warn", style="yellow") if c.warning else Text("ok  ", style="green")
        out.print(Text.assemble(mark, f" {c.name}: ", Text(c.detail)))


Act = Callable[[Session, Lifecycle, Console], Awaitable[int]]


async def on_server(target: Target, act: Act) -> int:
    """One of `pivot server`'s verbs on the host's managed server; a lifecycle's refusal is one line, exit 1."""
    out = trimmed(highlight=False, soft_wrap=True)  # a check or a status is one line, however narrow the pipe
    async with Session(config.load(target.config), target.host) as session:
        lifecycle = session.lifecycle
        assert lifecycle is not None and session.spec is not None
        try:
            await session.connect()
            return await act(session, lifecycle, out)
        except LifecycleError as e:
            print(f"pivot: {visible(str(e))}", file=sys.stderr)
            return 1


async def status(session: Session, lifecycle: Lifecycle, out: Console) -> int:
    found = await lifecycle.poll()
    out.print(Text(found.describe()))
    if found.model:
        out.print(Text(f"model: {found.model}"))
    if found.state == ServerState.CRASHED:
        out.print(Text("\n".join(found.log_tail[-STATUS_TAIL:]), style="dim"))
        out.print("(the last lines of its log; pivot server logs shows the rest)")
    record = getattr(lifecycle, "record", None)
    stopped = found.state in (ServerState.STOPPED, ServerState.CRASHED)
    if (
        stopped
        and isinstance(lifecycle, ServerLifecycle)
        and not isinstance(lifecycle, SlurmLifecycle)
        and record is not None
        and record.job is None
        and (other := await unmanaged(lifecycle, record.host, record.port))
    ):  # its port served by another process
        out.print(Text(f"{other.describe()}: pivot server adopt {visible(record.profile)} takes it over", style="yellow"))
        return 1
    return 0 if found.state in (ServerState.READY, ServerState.STOPPED) else 1


def logs(follow: bool) -> Act:
    async def act(session: Session, lifecycle: Lifecycle, out: Console) -> int:
        if not follow:
            for line in await lifecycle.log_tail(200):
                print(line)
            return 0
        async with await lifecycle.follow_log(50) as stream:
            async for line in stream:
                print(visible(line), flush=True)
        return 0

    return act


async def stop(session: Session, lifecycle: Lifecycle, out: Console) -> int:
    report = await lifecycle.stop()  # written in the event log by the lifecycle, as every action is
    out.print(report.describe())
    return 0 if report.ok else 1


@dataclass(frozen=True)
class Launch:
    """`pivot server start P`, `switch P` or `restart`, and how."""

    verb: str  # start, switch or restart
    profile: str | None  # start, switch: the profile
    force: bool  # start past a failed preflight
    skip: frozenset[str]  # preflight checks left out
    wait: bool  # wait for ready

    async def __call__(self, session: Session, lifecycle: Lifecycle, out: Console) -> int:
        profiles = session.profiles()
        before = await lifecycle.poll() if self.verb in ("switch", "restart") else lifecycle.status  # what a stop will end
        lifecycle.last_stop = None
        try:
            if self.verb == "restart" or self.profile is None:
                checks = await lifecycle.restart(profiles, force=self.force, skip=self.skip)
            elif self.verb == "start":
                checks = await lifecycle.start(profiles.get(self.profile), force=self.force, skip=self.skip)
            else:
                checks = await lifecycle.switch(profiles.get(self.profile), force=self.force, skip=self.skip)
        except PreflightFailed as e:
            print_checks(out, e.checks)
            kept = f"; nothing was stopped: {e.still_running} still runs" if e.still_running else ""
            failed = sum(not c.ok for c in e.checks)
            out.print(Text(f"not started: {failed} check(s) failed{kept} (--skip CHECK leaves one out, --force starts anyway)"))
            return 1
        print_checks(out, checks)
        if lifecycle.last_stop is not None:  # a switch or a restart stopped the server first
            out.print(Text(f"stopped {before.profile} (pid {before.pid}): {lifecycle.last_stop.describe()}"))
        assert session.spec is not None
        out.print(f"started {lifecycle.status.profile} (pid {lifecycle.status.pid}); log: {session.spec.workdir}/server.log")
        return await _wait_ready(lifecycle, out) if self.wait else 0


def adopt_server(name: str, yes: bool) -> Act:
    async def act(session: Session, lifecycle: Lifecycle, out: Console) -> int:
        return await _adopt(session, lifecycle, name, yes, out)

    return act


async def _adopt(session: Session, lifecycle: Lifecycle, name: str, yes: bool, out: Console) -> int:
    """Take over the server serving the profile's port, after the operator says yes (or --yes)."""
    if not isinstance(lifecycle, ServerLifecycle) or isinstance(lifecycle, SlurmLifecycle):
        raise LifecycleError("adopt takes over a server on a GPU host; a Slurm job is pivot's only through sbatch")
    profile = session.profiles().get(name)
    await lifecycle.poll()
    found = await unmanaged(lifecycle, profile.host, profile.port)
    if found is None:
        raise LifecycleError(f"nothing but the managed server serves {profile.host}:{profile.port}: nothing to adopt")
    out.print(Text(found.describe()))
    if not yes:
        answer = await asyncio.to_thread(
            input, f"adopt pid {found.pid} as {profile.name}, so that pivot stops it (its whole process group) from now on? [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            out.print("nothing adopted")
            return 1
    record = await adopt(lifecycle, profile, found)
    out.print(Text(f"adopted pid {record.pid} as {profile.name}: {lifecycle.status.describe()}"))
    return 0


async def _wait_ready(lifecycle: Lifecycle, out: Console) -> int:
    deadline = time.monotonic() + READY_TIMEOUT_S
    shown = ""
    while time.monotonic() < deadline:
        status = await lifecycle.poll()
        if status.last_line and status.last_line != shown:
            shown = status.last_line
            out.print(Text(f"  {shown}", style="dim"))
        if status.state == ServerState.READY:
            out.print(Text(status.describe()))
            return 0
        if status.state == ServerState.CRASHED:
            out.print(Text(status.describe(), style="bold red"))
            out.print(Text("\n".join(status.log_tail[-STATUS_TAIL:]), style="dim"))
            out.print("(the last lines of its log; pivot server logs shows the rest)")
            return 1
        await asyncio.sleep(1.0)
    out.print("not ready in time")
    return 1

"""Killing GPU processes, one implementation for the GPU pane, `pivot kill` and a runbook's kill-stray: what may
be killed, the signals, one `kill` event, what to offer next (a zombie's parent, the hypervisor's cleanup), and
following the memory as it comes back."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from dataclasses import dataclass

from console.events import Cleanup, Kill
from console.gpu.kill import KillOutcome, KillPlan, ReleaseWatch, plan_kill, zombie_advice, zombie_parents
from console.gpu.samples import Sample
from console.remote import RunResult
from console.session import Session

RELEASE_TIMEOUT_S = 30.0
INTERRUPTED = "interrupted here while the host killed it; the host finishes the kill: pivot gpus shows whether it still runs"


def plan(session: Session, sample: Sample, pids: Iterable[int], *, group: bool = True) -> KillPlan:
    """The processes that may be killed among `pids`, pinned by start time, and the refusals with their reasons."""
    hello = session.telemetry.hello
    return plan_kill(sample, pids, agent_pid=hello.pid if hello else None, group=group)


@dataclass(frozen=True)
class KillReport:
    plan: KillPlan
    outcomes: tuple[KillOutcome, ...]
    parents: tuple[int, ...]  # zombies' parents to offer: a zombie goes only when its parent reaps it or dies
    advice: tuple[str, ...]  # what else frees a target that did not end (a zombie of PID 1: its init, the hypervisor)
    stuck: bool  # a target survived, or cannot be freed from here: the hypervisor's cleanup is worth offering
    began: float  # time.monotonic() when the signals went: a release is timed from it

    @property
    def all_ended(self) -> bool:
        return all(o.ended for o in self.outcomes)

    def said(self, o: KillOutcome) -> str:
        """An outcome in words; a zombie whose parent this same kill ended goes to init, which reaps it."""
        if o.outcome == "zombie" and o.ppid in {x.pid for x in self.outcomes if x.ended}:
            return f"pid {o.pid}: zombie; its parent {o.ppid} was ended by this kill, so init reaps it"
        return o.describe()


async def kill(session: Session, chosen: KillPlan, *, grace_s: float | None = None, via: str | None = None) -> KillReport:
    """SIGTERM to each target (its group where it leads one), SIGKILL after the grace; one `kill` event."""
    grace = session.config.kill_grace_s if grace_s is None else grace_s
    began = time.monotonic()

    def logged(outcomes: tuple[KillOutcome, ...]) -> None:
        session.events.append(
            Kill(
                via=via or session.via,
                host=session.host_label,
                pids=[p.pid for p in chosen.targets],
                grace_s=grace,
                group=chosen.group,
                outcomes=[dataclasses.asdict(o) for o in outcomes],
            )
        )

    try:
        outcomes = tuple(KillOutcome.from_agent(d) for d in await session.telemetry.kill(chosen.agent_targets(), grace))
    except asyncio.CancelledError:  # interrupted (Ctrl-C, q): every target was signalled; the host finishes the kill
        logged(tuple(KillOutcome(p.pid, "unknown", INTERRUPTED) for p in chosen.targets))
        raise
    logged(outcomes)
    parents = tuple(zombie_parents(outcomes))
    handled = {*parents, *(o.pid for o in outcomes if o.ended)}  # a zombie's parent offered, or ended by this kill
    advice = tuple(a for o in outcomes if (a := zombie_advice(o)) and o.ppid not in handled)
    stuck = any(o.outcome in ("permission-denied", "survived") or (o.outcome == "zombie" and o.ppid not in handled) for o in outcomes)
    return KillReport(chosen, outcomes, parents, advice, stuck, began)


async def follow_release(
    samples: AsyncIterator[Sample],
    chosen: KillPlan,
    say: Callable[[str], None],
    timeout_s: float = RELEASE_TIMEOUT_S,
    since: float | None = None,
) -> bool:
    """Say a line per GPU as the targets' memory comes back, from the samples given, until all of it has or the
    timeout passes (then a line with what still holds it); whether it all came back. since: when the signals went
    (KillReport.began), from which a release is timed."""
    watch = ReleaseWatch(chosen) if since is None else ReleaseWatch(chosen, started=since)
    deadline = time.monotonic() + timeout_s
    last: Sample | None = None
    while not watch.done and time.monotonic() < deadline:
        try:
            last = await asyncio.wait_for(anext(samples), max(0.01, deadline - time.monotonic()))
        except (TimeoutError, StopAsyncIteration):
            break
        for line in watch.update(last):
            say(line)
    if not watch.done:
        holders = ", ".join(f"pid {p.pid} ({p.state})" for p in watch.holders(last)) if last else ""
        say(f"memory not released after {timeout_s:g} s on GPU {', '.join(map(str, watch.pending))}: {holders or 'unknown'}")
    return watch.done


async def only_samples(session: Session) -> AsyncGenerator[Sample, None]:
    """The session's telemetry, samples only (a headless command or a runbook: the console has its own stream)."""
    async for event in session.telemetry.events():
        if isinstance(event, Sample):
            yield event


async def cleanup(session: Session) -> RunResult:
    """The hypervisor's cleanup command (a kill from inside failed); one `cleanup` event."""
    hypervisor = session.hypervisor
    if hypervisor is None or not hypervisor.cleanup:
        raise ValueError('no host with role = "hypervisor" and a cleanup command is configured')
    result = await session.pool.get(hypervisor.name).run(list(hypervisor.cleanup), timeout=120)
    session.events.append(Cleanup(via=session.via, host=hypervisor.name, argv=list(hypervisor.cleanup), exit_status=result.exit_status))
    return result

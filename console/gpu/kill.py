"""Killing GPU processes: what may be killed, the signals, and watching the memory come back.

The operator confirms a list of processes pinned by pid *and* start time; the
agent checks both again on the host before it sends anything, so a pid that
was reused in between is never hit. Never by name pattern, never PID 1, never
the console's own agent, never a process outside the GPU list.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from console.gpu.samples import GpuProcess, Sample
from console.untrusted import visible

MIB_PER_GIB = 1024


@dataclass(frozen=True)
class Refusal:
    pid: int
    reason: str


@dataclass(frozen=True)
class KillPlan:
    targets: tuple[GpuProcess, ...]
    refused: tuple[Refusal, ...]
    group: bool = True

    def agent_targets(self) -> list[str]:
        mode = "group" if self.group else "single"
        return [f"{p.pid}:{p.start_ticks}:{mode}" for p in self.targets]

    @property
    def memory_mib(self) -> float:
        return sum(p.mem_mib or 0 for p in self.targets)


def plan_kill(sample: Sample, pids: Iterable[int], *, agent_pid: int | None, group: bool = True) -> KillPlan:
    by_pid: dict[int, GpuProcess] = {}
    for proc in sample.procs:
        by_pid.setdefault(proc.pid, proc)  # a process on several GPUs is one target
    for zombie in sample.procs:
        # the parent of a zombie on the GPU list may be killed: it is the only way to free the zombie
        if zombie.zombie and zombie.ppid and zombie.parent_start_ticks is not None and zombie.ppid not in by_pid:
            by_pid[zombie.ppid] = GpuProcess(
                pid=zombie.ppid,
                gpu=None,
                mem_mib=None,
                user=zombie.user,
                state="?",
                cmd=zombie.parent_cmd,
                start_ticks=zombie.parent_start_ticks,
            )
    targets, refused = [], []
    for pid in dict.fromkeys(pids):
        target = by_pid.get(pid)
        if pid <= 1:
            refused.append(Refusal(pid, "PID 1 is never killed"))
        elif agent_pid is not None and pid == agent_pid:
            refused.append(Refusal(pid, "that is pivot's own telemetry agent"))
        elif target is None:
            refused.append(Refusal(pid, "not in the GPU process list: pivot kills only processes holding GPU memory"))
        elif not target.visible:
            refused.append(Refusal(pid, "not visible in this PID namespace (NVML reports host PIDs): use the hypervisor's cleanup"))
        elif target.start_ticks is None:
            refused.append(Refusal(pid, "its start time is unknown, so it cannot be pinned safely"))
        else:
            targets.append(target)
    return KillPlan(tuple(targets), tuple(refused), group)


@dataclass(frozen=True)
class KillOutcome:
    pid: int
    outcome: str  # exited | zombie | no-such-process | permission-denied | survived | reused | refused
    detail: str
    signals: tuple[str, ...] = ()
    ppid: int | None = None

    @property
    def ended(self) -> bool:
        return self.outcome in ("exited", "no-such-process")

    @classmethod
    def from_agent(cls, d: dict) -> KillOutcome:
        return cls(
            int(d.get("pid", 0)),
            visible(str(d.get("outcome", "?"))),
            visible(str(d.get("detail", ""))),
            tuple(d.get("signals", ())),
            d.get("ppid"),
        )

    def describe(self) -> str:
        return f"pid {self.pid}: {self.outcome.replace('-', ' ')} ({self.detail})"


@dataclass
class ReleaseWatch:
    """Follows samples after a kill until each GPU the targets held memory on is free of them."""

    plan: KillPlan
    started: float = field(default_factory=time.monotonic)
    pending: dict[int, float] = field(default_factory=dict)  # gpu -> MiB the targets held there
    released: dict[int, float] = field(default_factory=dict)  # gpu -> seconds it took

    def __post_init__(self) -> None:
        for proc in self.plan.targets:
            if proc.gpu is not None:
                self.pending[proc.gpu] = self.pending.get(proc.gpu, 0.0) + (proc.mem_mib or 0)

    def update(self, sample: Sample) -> list[str]:
        """Messages for GPUs released since the last sample."""
        keys = {p.key for p in self.plan.targets}
        still = {p.gpu for p in sample.procs if p.key in keys}
        messages = []
        for gpu in sorted(self.pending):
            if gpu not in still:
                took = time.monotonic() - self.started
                self.released[gpu] = took
                messages.append(f"GPU {gpu}: {self.pending[gpu] / MIB_PER_GIB:.1f} GiB released in {took:.1f} s")
        for gpu in self.released:
            self.pending.pop(gpu, None)
        return messages

    @property
    def done(self) -> bool:
        return not self.pending

    def holders(self, sample: Sample) -> list[GpuProcess]:
        keys = {p.key for p in self.plan.targets}
        return [p for p in sample.procs if p.key in keys]


def zombie_advice(outcome: KillOutcome) -> str | None:
    """Who can free a zombie target: its parent, or, for a zombie of PID 1 (which is never signalled), the container's
    init or the hypervisor's cleanup. None for any other outcome."""
    if outcome.outcome != "zombie":
        return None
    if outcome.ppid and outcome.ppid > 1:
        return f"pid {outcome.pid} is a zombie: its parent {outcome.ppid} must reap it, so kill the parent"
    return (
        f"pid {outcome.pid} is a zombie whose parent is PID 1, which pivot never signals: it goes only when "
        f"the container's init reaps it, or with the hypervisor's cleanup"
    )


def zombie_parents(outcomes: Iterable[KillOutcome]) -> list[int]:
    """The parents to offer when a target is a zombie: a zombie goes only when its parent reaps it or dies. A parent
    this kill ended already is not offered (its zombie goes to init, which reaps it)."""
    outcomes = list(outcomes)
    ended = {o.pid for o in outcomes if o.ended}
    return list(dict.fromkeys(o.ppid for o in outcomes if o.outcome == "zombie" and o.ppid and o.ppid > 1 and o.ppid not in ended))

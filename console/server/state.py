"""What pivot knows of the server it manages: its state, the record it left on the host, a stop's outcome, and the
errors of the lifecycle's actions (console/server/lifecycle.py)."""

from __future__ import annotations

import enum
import re
import time
from dataclasses import dataclass, field, replace

from pydantic import TypeAdapter

from console.engines import HEALTH_PATH, engine
from console.gpu.kill import KillOutcome
from console.gpu.samples import GpuProcess
from console.server.checks import Check
from console.untrusted import visible

ADDRESS = re.compile(r"[A-Za-z0-9._:-]{1,253}")  # a host name or an IP address, as Slurm may name a node's
NODE = re.compile(r"[A-Za-z0-9._-]{1,128}")  # a host of pivot.toml, as a record names the nodes of a server
MAX_RECORD = 256 * 1024  # a record is an argv and a few fields: far smaller


class ServerState(enum.StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    UNHEALTHY = "unhealthy"
    CRASHED = "crashed"
    STOPPING = "stopping"
    UNKNOWN = "unknown"  # not seen: the host not reached yet, or its record unreadable (the detail says which)

    @property
    def running(self) -> bool:
        """A server process of ours is up (or on its way up or down)."""
        return self in (ServerState.STARTING, ServerState.READY, ServerState.UNHEALTHY, ServerState.STOPPING)


class NoHealthRoute(Exception):
    """Every health path of the profile answered 404."""


@dataclass(frozen=True)
class ServerRecord:
    profile: str
    argv: list[str]
    pid: int
    start_ticks: int | None
    started: float
    host: str
    port: int
    kind: str
    stopped: bool = False
    health: tuple[str, ...] = ()  # the profile's health paths (empty in a record of an older pivot: the kind's)
    rank: int = 0  # of a server across nodes (console/server/multinode.py): this host's rank
    nodes: tuple[str, ...] = ()  # of a server across nodes: its hosts in rank order (pivot.toml's names)
    job: int | None = None  # a Slurm job's id (console/server/slurm.py): the server is the job, pid is 0
    launch: str = ""  # of a server across nodes: one start's token, the same in every rank's record (none: older)

    @property
    def health_paths(self) -> tuple[str, ...]:
        return self.health or engine(self.kind).health

    @classmethod
    def parse(cls, text: str) -> ServerRecord | None:
        """The record a host holds, or None when it is missing or not of the shape pivot wrote (it is the host's file)."""
        try:
            return cls.read(text)
        except RecordError:
            return None

    @classmethod
    def read(cls, text: str) -> ServerRecord | None:
        """The record a host holds; None when there is none; RecordError, saying what is wrong, when there is one that
        pivot did not write as it is (the host's file: every field checked for its type, strictly)."""
        if not text.strip():
            return None
        if len(text) > MAX_RECORD:
            raise RecordError(f"server.json is over {MAX_RECORD // 1024} KiB: not a record pivot wrote")
        try:
            record = _RECORD.validate_json(text, strict=True)
        except ValueError as e:  # pydantic's ValidationError, or JSON that is not
            first = e.errors()[0] if hasattr(e, "errors") else None
            where = ".".join(str(p) for p in first["loc"]) if first and first.get("loc") else ""
            why = first["msg"] if first else str(e)
            raise RecordError(f"server.json: {where + ': ' if where else ''}{visible(str(why))}") from None
        if (
            record.pid < (0 if record.job is not None else 1)
            or not 0 < record.port < 65536
            or (  # a Slurm job's pid is 0
                record.start_ticks is not None and record.start_ticks < 0
            )
            or (record.job is not None and record.job < 1)
        ):
            raise RecordError("server.json: pid, port or start_ticks out of range")
        record = replace(record, health=tuple(p for p in record.health if HEALTH_PATH.fullmatch(p)))
        if not 0 <= record.rank < max(1, len(record.nodes)) or not all(NODE.fullmatch(n) for n in record.nodes):
            raise RecordError("server.json: rank or nodes not of a server pivot started")
        return record


@dataclass(frozen=True)
class Unmanaged:
    """A process serving a port on the host that is not the server pivot manages: pid None where it cannot be seen."""

    port: int
    pid: int | None  # the leader of its process group
    start_ticks: int | None
    cmd: str
    argv: tuple[str, ...]

    def describe(self) -> str:
        who = f"pid {self.pid}" + (f" ({self.cmd})" if self.cmd else "") if self.pid else "a process pivot cannot see"
        return f"unmanaged server on port {self.port}: {who}"


class RecordError(ValueError):
    """server.json is there but is not a record of pivot's: the server's state is unknown, not "stopped"."""


@dataclass(frozen=True)
class ServerStatus:
    state: ServerState
    profile: str | None = None
    pid: int | None = None
    started: float | None = None
    ready_at: float | None = None
    last_line: str = ""
    detail: str = ""
    log_tail: tuple[str, ...] = ()
    model: str | None = None
    nodes: tuple[str, ...] = ()  # a server across nodes: its hosts, rank 0 first
    rank: int = 0  # which of them this host's status is of
    job: int | None = None  # a Slurm job's id: the server is the job
    at: float = field(default_factory=time.time)

    def describe(self) -> str:
        """One line: "ready demo-eagle3 (pid 4100), up 1h00m: detail"."""
        what = self.headline()
        if self.process:
            what += f" ({self.process})"
        if when := self.elapsed():
            what += f", {when}"
        return what + (f": {self.detail}" if self.detail else "")

    @property
    def process(self) -> str | None:
        """ "pid N", or "job N" of a server run as a Slurm job."""
        return f"job {self.job}" if self.job is not None else f"pid {self.pid}" if self.pid else None

    def headline(self) -> str:
        if not self.profile:
            return str(self.state)
        if self.nodes:
            where = f"rank {self.rank}/{len(self.nodes)}" if self.rank else f"{len(self.nodes)} nodes"
            return f"{self.state} {self.profile} ({where})"
        return f"{self.state} {self.profile}"

    def elapsed(self) -> str | None:
        """How long it has been starting, or up."""
        if self.state == ServerState.STARTING and self.started:
            return f"{max(0.0, time.time() - self.started):.0f} s"
        if self.state in (ServerState.READY, ServerState.UNHEALTHY) and self.started:
            return f"up {_duration(max(0.0, time.time() - self.started))}"
        return None


def _duration(seconds: float) -> str:
    """To the second in the first minute, then to the minute: a line that changes each second is redrawn each second."""
    s = int(seconds)
    return f"{s}s" if s < 60 else f"{s // 60}m" if s < 3600 else f"{s // 3600}h{s % 3600 // 60:02d}m"


class LifecycleError(Exception):
    """A refused action, with one line the operator can read."""


class PreflightFailed(LifecycleError):
    def __init__(self, checks: list[Check], *, still_running: str | None = None):
        """still_running: the server a refused switch left as it was (it is checked before anything is stopped)."""
        self.checks, self.still_running = checks, still_running
        failed = [c for c in checks if not c.ok]
        kept = f"; nothing was stopped: {still_running} still runs" if still_running else ""
        super().__init__("; ".join(f"{c.name}: {c.detail}" for c in failed) + kept + " (start with force to override)")


@dataclass(frozen=True)
class StopReport:
    outcomes: tuple[KillOutcome, ...]
    leftovers: tuple[GpuProcess, ...]  # processes of the server's group still holding GPU memory
    gpus: str = "read"  # "read"; "none" (gpus = false); or why they could not be read: then nothing is said of them
    ranks: tuple[tuple[str, StopReport], ...] = ()  # a server across nodes: each node's own report
    problem: str = ""  # why the stop (this host's part) could not be done
    note: str = ""  # what the stop was, where the GPUs are not this host's to read (a Slurm job's)

    @property
    def ok(self) -> bool:
        """Stopped, and nothing of it holds GPU memory."""
        return not self.leftovers and not self.problem and all(r.ok for _, r in self.ranks)

    def describe(self) -> str:
        if self.ranks:
            return "; ".join(f"{host}: {report.describe()}" for host, report in self.ranks)
        return self._describe()

    def _describe(self) -> str:
        if self.problem or self.note:
            return self.problem or self.note
        if self.gpus == "none":
            return "stopped (this host has no GPUs)"
        if self.gpus != "read":
            return f"stopped; GPU memory not checked: {self.gpus}"
        if not self.leftovers:
            return "stopped; no process of its group holds GPU memory"
        pids = ", ".join(str(p.pid) for p in self.leftovers)
        return f"stopped, but {len(self.leftovers)} process(es) of its group still hold GPU memory ({pids}): kill them from the GPU pane"


_RECORD = TypeAdapter(ServerRecord)  # strict from JSON: an int is an int, a list of strings is one

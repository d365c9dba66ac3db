"""Typed samples from the agent's JSON lines, and what the console derives from them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from console.gpu.agent import VERSION as AGENT_VERSION
from console.untrusted import visible

T = TypeVar("T")


class SampleParseError(ValueError):
    pass


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    mem_used_mib: float | None
    mem_total_mib: float | None
    util_pct: float | None
    temp_c: float | None
    power_w: float | None
    power_limit_w: float | None

    @property
    def mem_fraction(self) -> float | None:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return self.mem_used_mib / self.mem_total_mib


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    gpu: int | None
    mem_mib: float | None
    visible: bool = True  # False: not in this PID namespace (NVML reports host PIDs in containers)
    ppid: int | None = None
    pgid: int | None = None
    user: str = "?"
    state: str = "?"
    cmd: str = ""
    start: float | None = None
    start_ticks: int | None = None
    parent_gone: bool = False
    leader_gone: bool = False
    server: bool = False  # part of the server the console manages
    parent_start_ticks: int | None = None  # zombies only: to pin the parent that must reap it
    parent_cmd: str = ""

    @property
    def zombie(self) -> bool:
        return self.state == "Z"

    @property
    def orphan(self) -> bool:
        return self.parent_gone or self.leader_gone

    @property
    def stray(self) -> bool:
        """Holds GPU memory and is not part of the managed server."""
        return not self.server

    def age_s(self, now: float | None = None) -> float | None:
        return None if self.start is None else max(0.0, (now or time.time()) - self.start)

    @property
    def key(self) -> tuple[int, int | None]:
        """What a confirmation pins: the pid and its start time, so a reused pid is never hit."""
        return (self.pid, self.start_ticks)


@dataclass(frozen=True)
class ServerRef:
    pid: int
    alive: bool


@dataclass(frozen=True)
class Hello:
    source: str
    pid: int
    host: str
    interval: float
    version: int

    @property
    def outdated(self) -> bool:
        return self.version < AGENT_VERSION


@dataclass(frozen=True)
class AgentError:
    kind: str  # "no-driver" | "query-failed"
    message: str


@dataclass(frozen=True)
class Sample:
    t: float
    gpus: tuple[Gpu, ...]
    procs: tuple[GpuProcess, ...]
    server: ServerRef | None = None
    source: str = "?"
    received: float = field(default_factory=time.time)
    problems: tuple[str, ...] = ()  # what the agent could not read (a GPU lost, a row dropped): the sample is partial

    def idle(self, threshold_mib: float) -> bool:
        """Every GPU below the threshold, and every GPU read: a partial sample cannot say "idle"."""
        return not self.problems and all((g.mem_used_mib or 0) < threshold_mib for g in self.gpus)

    def busy_gpus(self, threshold_mib: float) -> list[Gpu]:
        return [g for g in self.gpus if (g.mem_used_mib or 0) >= threshold_mib]

    @property
    def stray(self) -> list[GpuProcess]:
        return [p for p in self.procs if p.stray]


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):  # "[N/A]", "[Not Supported]" from an older agent or a raw field
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SampleParseError(f"{name} must be an integer, got {value!r}")
    return value


def _text(value: Any, default: str = "") -> str:
    """A string from the host (a process's argv, a user or GPU name): control characters made visible."""
    return visible(str(value)) if value not in (None, "") else default


def _gpu(d: dict[str, Any]) -> Gpu:
    return Gpu(
        index=_int(d.get("index"), "gpu index"),
        uuid=_text(d.get("uuid")),
        name=_text(d.get("name"), "?"),
        mem_used_mib=_num(d.get("mem_used_mib")),
        mem_total_mib=_num(d.get("mem_total_mib")),
        util_pct=_num(d.get("util_pct")),
        temp_c=_num(d.get("temp_c")),
        power_w=_num(d.get("power_w")),
        power_limit_w=_num(d.get("power_limit_w")),
    )


def _proc(d: dict[str, Any], server: ServerRef | None) -> GpuProcess:
    pid = _int(d.get("pid"), "process pid")
    pgid = d.get("pgid") if isinstance(d.get("pgid"), int) else None
    in_server = bool(server and server.alive and pgid == server.pid)
    return GpuProcess(
        pid=pid,
        gpu=d.get("gpu") if isinstance(d.get("gpu"), int) else None,
        mem_mib=_num(d.get("mem_mib")),
        visible=bool(d.get("visible", True)),
        ppid=d.get("ppid"),
        pgid=pgid,
        user=_text(d.get("user"), "?"),
        state=_text(d.get("state"), "?"),
        cmd=_text(d.get("cmd")),
        start=_num(d.get("start")),
        start_ticks=d.get("start_ticks") if isinstance(d.get("start_ticks"), int) else None,
        parent_gone=bool(d.get("parent_gone")),
        leader_gone=bool(d.get("leader_gone")),
        server=in_server,
        parent_start_ticks=d.get("parent_start_ticks") if isinstance(d.get("parent_start_ticks"), int) else None,
        parent_cmd=_text(d.get("parent_cmd")),
    )


def _rows(items: list[Any], parse: Callable[[dict[str, Any]], T], what: str, problems: list[str]) -> list[T]:
    """Each row parsed; a row that is not of the agent's shape is dropped, and said, rather than the whole sample."""
    out = []
    for item in items:
        try:
            if not isinstance(item, dict):
                raise TypeError("not an object")
            out.append(parse(item))
        except (TypeError, KeyError, ValueError) as e:
            problems.append(f"a {what} row was not read: {visible(str(e))[:120]}")
    return out


def parse_line(line: str, source: str = "?") -> Hello | Sample | AgentError:
    """One agent line to a typed value; raises SampleParseError on anything malformed."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise SampleParseError(f"not JSON ({e.msg} at column {e.colno}): {line[:80]!r}") from None
    except ValueError as e:  # a number too long to convert, say
        raise SampleParseError(f"not JSON ({e}): {line[:80]!r}") from None
    if not isinstance(data, dict):
        raise SampleParseError(f"not a JSON object: {line[:80]!r}")
    line_type = data.get("type")
    version = data.get("v", 0)
    try:
        if line_type == "hello":
            return Hello(
                _text(data.get("source"), "?"),
                int(data.get("pid", 0)),
                _text(data.get("host"), "?"),
                float(data.get("interval", 1.0)),
                int(version),
            )
        if line_type == "error":
            return AgentError(_text(data.get("kind"), "?"), _text(data.get("message")))
        if line_type == "sample":
            gpus, procs = data.get("gpus"), data.get("procs")
            if not isinstance(gpus, list) or not isinstance(procs, list):
                raise SampleParseError("sample without gpus or procs lists")
            raw_server = data.get("server")
            server = ServerRef(int(raw_server["pid"]), bool(raw_server.get("alive"))) if isinstance(raw_server, dict) else None
            problems = [visible(str(w))[:300] for w in data.get("warnings") or () if isinstance(w, str)][:8]
            return Sample(
                t=float(data.get("t", time.time())),
                gpus=tuple(sorted(_rows(gpus, _gpu, "GPU", problems), key=lambda g: g.index)),
                procs=tuple(_rows(procs, lambda p: _proc(p, server), "process", problems)),
                server=server,
                source=source,
                problems=tuple(problems),
            )
    except (TypeError, KeyError, ValueError) as e:
        if isinstance(e, SampleParseError):
            raise
        raise SampleParseError(f"malformed {line_type} line: {e}") from None
    raise SampleParseError(f"unknown line type {line_type!r}")

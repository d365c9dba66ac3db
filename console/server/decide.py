"""What a poll concludes from what it saw: the server's next status, as a pure function of the last one and of the
facts one poll gathers on the host (console/server/lifecycle.py `poll` gathers them). No I/O here, so every case is
a row of a table (tests/test_decide.py); what a conclusion still needs from the host (a crash's log tail, the model's
name) is asked for by name and fetched by the poll."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from console.server.state import ServerRecord, ServerState, ServerStatus
from console.untrusted import visible

UNHEALTHY_AFTER = 3  # failed health checks in a row, with the process alive


class Fetch(Enum):
    """What the poll must still ask the host for, once the state is decided."""

    NOTHING = "nothing"
    CRASH_TAIL = "crash-tail"  # a crash seen for the first time: its log's last lines
    MODEL = "model"  # ready, and the model's name not known yet


@dataclass(frozen=True)
class Seen:
    """One poll's facts: the record (None: there is none), whether its process runs as the record says (pid and start
    time), the log's last line, and the health check's answer (None where it was not asked: no process, stopping)."""

    record: ServerRecord | None
    alive: bool = False
    last_line: str = ""
    healthy: bool | None = None
    why: str = ""  # why the health check failed
    no_health_route: bool = False  # the server has no health endpoint pivot knows: waiting will not change it
    host: str = ""  # this host's name, for "rank 1 on gpu02 ended without a stop"
    clock_ahead: float = 0.0  # how far the host's clock is ahead of this one's: the record's start is on the host's


@dataclass(frozen=True)
class Next:
    status: ServerStatus
    failures: int  # failed health checks in a row
    fetch: Fetch = Fetch.NOTHING


def next_status(previous: ServerStatus, seen: Seen, *, stopping: bool, crash_known: bool, failures: int, now: float) -> Next:
    """previous: the last status; stopping: a stop of pivot's is under way; crash_known: this record's process was
    already seen to have ended (its crash is said once, with its log tail); failures: failed health checks so far."""
    record = seen.record
    if record is None:
        return Next(ServerStatus(ServerState.STOPPED), 0)
    base = ServerStatus(
        ServerState.STOPPED,
        visible(record.profile),
        record.pid,
        record.started - seen.clock_ahead if record.started is not None else None,
        previous.ready_at,
        seen.last_line,
        model=previous.model,
        nodes=record.nodes,
        rank=record.rank,
        at=now,
    )
    if not seen.alive:
        if record.stopped or stopping:
            return Next(replace(base, ready_at=None), 0)
        if not crash_known:
            ended = f"rank {record.rank} on {seen.host}" if record.nodes else "the process"
            return Next(
                replace(base, state=ServerState.CRASHED, ready_at=None, detail=f"{ended} ended without a stop"), 0, Fetch.CRASH_TAIL
            )
        return Next(replace(base, state=ServerState.CRASHED, ready_at=None, log_tail=previous.log_tail, detail=previous.detail), 0)
    if record.rank > 0:  # a rank that serves no API (or a dummy /health): its process is what there is to see
        state = ServerState.STOPPING if stopping else ServerState.READY
        return Next(replace(base, state=state, detail=f"rank 0 on {record.nodes[0]} serves it"), failures)
    if stopping:
        return Next(replace(base, state=ServerState.STOPPING), failures)
    was_up = previous.state in (ServerState.READY, ServerState.UNHEALTHY)
    if seen.no_health_route and not was_up:
        return Next(replace(base, state=ServerState.STARTING, ready_at=None, detail=seen.why), failures)
    if seen.healthy:
        ready = replace(base, state=ServerState.READY, ready_at=previous.ready_at if was_up else now)
        return Next(ready, 0, Fetch.NOTHING if ready.model else Fetch.MODEL)
    if was_up:
        failures += 1
        if failures >= UNHEALTHY_AFTER:
            return Next(replace(base, state=ServerState.UNHEALTHY, detail=seen.why), failures)
        return Next(replace(base, state=previous.state), failures)
    return Next(replace(base, state=ServerState.STARTING, ready_at=None), failures)


def runs_as_recorded(record: ServerRecord, stat_text: str) -> bool | None:
    """Whether /proc/PID/stat shows the record's process running (not a zombie) with the record's start time; None
    when the stat is of another pid (or none): the pid file did not name the record's process."""
    head = stat_text.strip().split(" ", 1)[0]
    if not head.isdigit() or int(head) != record.pid:
        return None
    fields = stat_text.strip().rsplit(")", 1)[-1].split()
    return len(fields) > 19 and fields[0] != "Z" and (record.start_ticks is None or fields[19] == str(record.start_ticks))

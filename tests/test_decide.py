"""The server's next state as a table of cases (console/server/decide.py): what the last poll said, what this one saw,
what follows, and what must still be fetched. No host: the poll's I/O is not in the decision."""

from __future__ import annotations

from dataclasses import replace

import pytest

from console.server.decide import UNHEALTHY_AFTER, Fetch, Seen, next_status
from console.server.state import ServerRecord, ServerState, ServerStatus

NOW = 1000.0
RECORD = ServerRecord("eagle3", ["serve"], 4100, 77, 900.0, "127.0.0.1", 30000, "sglang")
RANK1 = replace(RECORD, rank=1, nodes=("gpu01", "gpu02"))
S = ServerState


def was(state: ServerState, **kw: object) -> ServerStatus:
    return ServerStatus(state, "eagle3", 4100, 900.0, **kw)  # type: ignore[arg-type]


CASES = [
    # id, previous, seen, stopping, crash_known, failures -> state, fetch, failures, detail
    ("no record", was(S.READY), Seen(None), False, False, 0, S.STOPPED, Fetch.NOTHING, 0, ""),
    ("stopped record", was(S.READY), Seen(replace(RECORD, stopped=True)), False, False, 0, S.STOPPED, Fetch.NOTHING, 0, ""),
    ("gone while stopping", was(S.STOPPING), Seen(RECORD), True, False, 0, S.STOPPED, Fetch.NOTHING, 0, ""),
    ("gone, first seen", was(S.READY), Seen(RECORD), False, False, 0, S.CRASHED, Fetch.CRASH_TAIL, 0, "the process ended without a stop"),
    ("gone, said before", was(S.CRASHED, detail="said"), Seen(RECORD), False, True, 0, S.CRASHED, Fetch.NOTHING, 0, "said"),
    (
        "a rank gone",
        was(S.READY),
        Seen(RANK1, host="gpu02"),
        False,
        False,
        0,
        S.CRASHED,
        Fetch.CRASH_TAIL,
        0,
        "rank 1 on gpu02 ended without a stop",
    ),
    ("a rank alive", was(S.STARTING), Seen(RANK1, alive=True), False, False, 0, S.READY, Fetch.NOTHING, 0, "rank 0 on gpu01 serves it"),
    ("a rank stopping", was(S.READY), Seen(RANK1, alive=True), True, False, 0, S.STOPPING, Fetch.NOTHING, 0, "rank 0 on gpu01 serves it"),
    ("alive, stopping", was(S.READY), Seen(RECORD, alive=True), True, False, 0, S.STOPPING, Fetch.NOTHING, 0, ""),
    ("loading", was(S.STARTING), Seen(RECORD, alive=True, healthy=False, why="503"), False, False, 0, S.STARTING, Fetch.NOTHING, 0, ""),
    ("up: the model asked", was(S.STARTING), Seen(RECORD, alive=True, healthy=True), False, False, 0, S.READY, Fetch.MODEL, 0, ""),
    ("up, model known", was(S.READY, model="m"), Seen(RECORD, alive=True, healthy=True), False, False, 2, S.READY, Fetch.NOTHING, 0, ""),
    (
        "one failed check",
        was(S.READY),
        Seen(RECORD, alive=True, healthy=False, why="timeout"),
        False,
        False,
        0,
        S.READY,
        Fetch.NOTHING,
        1,
        "",
    ),
    (
        "unhealthy",
        was(S.READY),
        Seen(RECORD, alive=True, healthy=False, why="timeout"),
        False,
        False,
        UNHEALTHY_AFTER - 1,
        S.UNHEALTHY,
        Fetch.NOTHING,
        UNHEALTHY_AFTER,
        "timeout",
    ),
    (
        "no health route yet",
        was(S.STARTING),
        Seen(RECORD, alive=True, healthy=False, why="no route", no_health_route=True),
        False,
        False,
        0,
        S.STARTING,
        Fetch.NOTHING,
        0,
        "no route",
    ),
    (
        "no health route once up",
        was(S.READY),
        Seen(RECORD, alive=True, healthy=False, why="no route", no_health_route=True),
        False,
        False,
        0,
        S.READY,
        Fetch.NOTHING,
        1,
        "",
    ),
]


@pytest.mark.parametrize(
    ("previous", "seen", "stopping", "crash_known", "failures", "state", "fetch", "after", "detail"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_the_next_state(
    previous: ServerStatus,
    seen: Seen,
    stopping: bool,
    crash_known: bool,
    failures: int,
    state: ServerState,
    fetch: Fetch,
    after: int,
    detail: str,
) -> None:
    decided = next_status(previous, seen, stopping=stopping, crash_known=crash_known, failures=failures, now=NOW)
    assert (decided.status.state, decided.fetch, decided.failures, decided.status.detail) == (state, fetch, after, detail)


def test_ready_keeps_the_time_it_became_ready_and_a_new_start_gets_its_own() -> None:
    up = Seen(RECORD, alive=True, healthy=True)
    assert next_status(was(S.STARTING), up, stopping=False, crash_known=False, failures=0, now=NOW).status.ready_at == NOW
    kept = next_status(was(S.READY, ready_at=950.0, model="m"), up, stopping=False, crash_known=False, failures=0, now=NOW)
    assert kept.status.ready_at == 950.0 and kept.status.model == "m"
    crashed = next_status(was(S.READY, ready_at=950.0), Seen(RECORD), stopping=False, crash_known=False, failures=0, now=NOW)
    assert crashed.status.ready_at is None


def test_a_profile_name_from_the_host_is_shown_with_its_control_characters_written_out() -> None:
    seen = Seen(replace(RECORD, profile="eagle3\x1b[2J"), alive=True, healthy=False)
    decided = next_status(was(S.STARTING), seen, stopping=False, crash_known=False, failures=0, now=NOW)
    assert decided.status.profile == "eagle3\\x1b[2J"


def test_an_uptime_is_reckoned_on_the_hosts_clock() -> None:
    """The record's start is the host's time: a host whose clock runs 2 h ahead read `up -7199s` (issue 34, L4)."""
    import time

    from console.server.lifecycle import _clock_ahead

    ahead = _clock_ahead(f"{int(time.time()) + 7200}\n")
    assert 7198 < ahead < 7202
    started_on_host = time.time() + 7200 - 90  # started 90 s ago by the host's clock
    seen = Seen(replace(RECORD, started=started_on_host), alive=True, healthy=True, clock_ahead=ahead)
    status = next_status(was(S.READY, model="m"), seen, stopping=False, crash_known=False, failures=0, now=time.time()).status
    assert status.elapsed() in ("up 1m", "up 88s", "up 89s", "up 90s", "up 91s")
    assert _clock_ahead("") == 0.0 and _clock_ahead("not a number") == 0.0
    gone_back = ServerStatus(S.READY, "eagle3", 4100, time.time() + 50)  # never negative, whatever the clocks say
    assert gone_back.elapsed() == "up 0s"

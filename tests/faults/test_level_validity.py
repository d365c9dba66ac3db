"""A level is valid only if it measured what it says: the same server from its start to its end, and no other
client's requests beside its C. A server replaced or restarted mid-sweep, or shared with another sweep, never yields
a complete run whose levels count (issue 34, H3 and H4)."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from console.settings import SweepSettings
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run, open_run
from tests.conftest import wait_until
from tests.faults.test_runs import _events, loadgen_of
from tests.test_sim_server import SPEC_FLAGS, sim_env, start_server  # noqa: F401  (fixtures)


def _replace_mid_level(start_server, tmp_path: Path, first: list[str], then: list[str]) -> str:  # type: ignore[no-untyped-def]  # noqa: F811
    """A sweep of a server that is killed mid-level and another started on its port: why the sweep stopped."""
    server = start_server("--enable-metrics", *first)
    port = int(server.url.rsplit(":", 1)[1])
    settings = SweepSettings(levels=(2, 4), requests=400, max_tokens=64, input_tokens=16, server_wait_s=120, idle_timeout_s=5)
    run = create_run(tmp_path / "campaign", RunMeta(profile="eagle3", settings=settings.to_dict()))
    loadgen = loadgen_of(server.url, run.dir)
    # once the server's counters have counted some of the level (a server killed before it counted anything can be
    # told from its successor only by what it says of itself)
    wait_until(lambda: sum(e.get("running") or 0 for e in _events(run.dir) if e["type"] == "metrics") >= 2, timeout=60)
    os.killpg(server.proc.pid, signal.SIGKILL)  # another console stops it in the middle of C=2 ...
    start_server("--enable-metrics", *then, port=port)  # ... and starts a server of its own on the same port
    assert loadgen.wait(timeout=180) == 3, loadgen.stderr.read() if loadgen.stderr else ""
    run = open_run(tmp_path / "campaign", run.name)
    run.finish()
    assert run.state == "partial" and not run.measured()
    assert not any(e["type"] == "level_done" and not e.get("failed") for e in _events(run.dir))
    assert run.stopped_because is not None and run.stopped_because.startswith("C=2: ")
    return run.stopped_because


def test_a_server_replaced_by_another_profile_mid_sweep_stops_it(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    why = _replace_mid_level(start_server, tmp_path, SPEC_FLAGS, [])
    assert "the server was replaced" in why and "speculative_algorithm EAGLE3, now none" in why, why


def test_a_server_restarted_mid_sweep_stops_it(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    why = _replace_mid_level(start_server, tmp_path, [], [])
    assert "the server was restarted (its counters began again)" in why, why


@pytest.mark.slow  # ten seconds and more on 2 cores
def test_a_level_that_shared_the_server_with_another_sweep_is_not_a_measurement(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    server = start_server("--enable-metrics")
    # its long answers keep its 3 requests on the server nearly all the time (short ones leave gaps a scrape can see)
    other_settings = SweepSettings(levels=(3,), requests=100000, max_tokens=4096, input_tokens=16, drift_check=False)
    other = create_run(tmp_path / "campaign", RunMeta(profile="other", settings=other_settings.to_dict()))
    settings = SweepSettings(levels=(1, 2), requests=60, max_tokens=64, input_tokens=16, server_wait_s=5)
    mine = create_run(tmp_path / "campaign", RunMeta(profile="mine", settings=settings.to_dict()))
    other_loadgen = loadgen_of(server.url, other.dir)
    try:
        wait_until(lambda: sum(e["type"] == "request" for e in _events(other.dir)) >= 3, timeout=60)
        loadgen = loadgen_of(server.url, mine.dir)
        assert loadgen.wait(timeout=180) == 3, loadgen.stderr.read() if loadgen.stderr else ""
    finally:
        other_loadgen.kill()
        other_loadgen.wait()
    run = open_run(tmp_path / "campaign", mine.name)
    run.finish()
    assert run.state == "partial" and not run.measured()
    level = run.levels()[0]
    # the other sweep holds 3; a scrape may catch one of them, or this client's, between the client and the server
    assert (
        level.c == 1
        and level.failed
        and re.fullmatch(r"another client held about [234] request\(s\) beside C=1, by the server's own count", level.failed)
    ), level.failed
    assert run.stopped_because and "another client held" in run.stopped_because
    started = next(e for e in _events(mine.dir) if e["type"] == "sweep_started")
    assert any("already serving" in w for w in started["warnings"]), started["warnings"]

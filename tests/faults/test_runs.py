"""Runs under faults: names from a hostile host or command line, servers and links that die mid-level, two load
generators on one run, corrupt and cut event logs, a full disk. Nothing is lost, nothing is called complete that
is not, nothing is written outside the campaign."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.settings import SweepSettings
from console.sweep.model import RunMeta
from console.sweep.runs.files import EVENTS, EventLogFile, RunError
from console.sweep.runs.store import create_run, list_runs, open_run
from tests.conftest import wait_until
from tests.fixtures_runs import BASELINE, EAGLE3, write_run
from tests.test_sim_server import sim_env, start_server  # noqa: F401  (fixtures)


def pivot(config: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", "--config", str(config), *args], capture_output=True, text=True, timeout=120, input=stdin
    )


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    (tmp_path / "pivot.toml").write_text(f'campaign_dir = "{tmp_path / "campaign"}"\n')
    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path / "campaign", "spec", "eagle3", EAGLE3, speculative=True)
    return tmp_path / "campaign"


def test_a_profile_name_from_the_host_cannot_place_a_run_outside_the_campaign(tmp_path: Path) -> None:
    run = create_run(tmp_path / "campaign", RunMeta(profile="../../../../../../elsewhere/x"))
    assert run.dir.parent == tmp_path / "campaign" / "runs" and "/" not in run.name and not run.name.startswith(".")
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("name", ["../../x", "/abs/path", "a/b", ".hidden", "..", ""])
def test_run_names_are_one_safe_path_component(campaign: Path, tmp_path: Path, name: str) -> None:
    results = tmp_path / "old.jsonl"
    results.write_text(json.dumps({"max_concurrency": 1, "output_throughput": 90.0, "completed": 4}) + "\n")
    imported = pivot(tmp_path / "pivot.toml", "runs", "import", str(results), "--name", name)
    assert imported.returncode == 2 and "must be one path component" in imported.stderr
    for action in ("show", "delete"):
        refused = pivot(tmp_path / "pivot.toml", "runs", action, name, "--yes")
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert sorted(p.name for p in (campaign / "runs").iterdir()) == ["base", "spec"]


def test_an_imported_profile_name_is_made_safe(campaign: Path, tmp_path: Path) -> None:
    results = tmp_path / "old.jsonl"
    results.write_text(json.dumps({"max_concurrency": 1, "output_throughput": 90.0, "completed": 4}) + "\n")
    imported = pivot(tmp_path / "pivot.toml", "runs", "import", str(results), "--profile", "../../x")
    assert imported.returncode == 0, imported.stderr
    assert len(list((campaign / "runs").iterdir())) == 3 and not (tmp_path / "x").exists()


def test_delete_asks_and_stays_inside_runs(campaign: Path, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "run.toml").write_text("")
    assert pivot(tmp_path / "pivot.toml", "runs", "delete", str(outside), "--yes").returncode == 2
    assert pivot(tmp_path / "pivot.toml", "runs", "delete", "../../precious", "--yes").returncode == 2
    assert outside.exists()
    asked = pivot(tmp_path / "pivot.toml", "runs", "delete", "base", stdin="")  # EOF at the question: nothing deleted
    assert asked.returncode == 1 and "nothing deleted" in asked.stdout and (campaign / "runs" / "base").exists()
    told = pivot(tmp_path / "pivot.toml", "runs", "delete", "base", stdin="yes\n")
    assert told.returncode == 0 and not (campaign / "runs" / "base").exists()


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"level_done"}',
        '{"type":"level_done","c":"abc","requests":1,"errors":0,"total_tok_s":1}',
        "[1,2,3]",
        '{"type":"request","c":1,"i":0,"start":0,"tokens":"x"}',
    ],
)
def test_one_wrong_line_makes_one_run_corrupt_and_the_others_work(campaign: Path, tmp_path: Path, line: str) -> None:
    with open(campaign / "runs" / "spec" / EVENTS, "a") as f:
        f.write(line + "\n")
    listed = pivot(tmp_path / "pivot.toml", "runs")
    assert listed.returncode == 0, listed.stderr
    spec_line = next(row for row in listed.stdout.splitlines() if row.startswith("spec "))
    assert "corrupt" in spec_line and "events.jsonl:" in spec_line  # its file and line
    assert "base " in listed.stdout and "complete" in listed.stdout
    shown = pivot(tmp_path / "pivot.toml", "runs", "show", "spec")
    assert shown.returncode == 0 and "corrupt" in shown.stdout
    write_run(campaign, "spec2", "eagle3", EAGLE3, speculative=True)
    assert pivot(tmp_path / "pivot.toml", "compare", "base", "spec2").returncode == 0
    refused = pivot(tmp_path / "pivot.toml", "compare", "base", "spec")
    assert refused.returncode == 2 and "events.jsonl:" in refused.stderr and "Traceback" not in refused.stderr


def test_a_torn_last_line_is_cut_before_the_next_event(tmp_path: Path) -> None:
    run = create_run(tmp_path, RunMeta(profile="p"))
    with open(run.dir / EVENTS, "a") as f:
        f.write('{"type":"sweep_started"}\n{"type":"level_st')  # the disk filled in the middle of a line
    sink = EventLogFile(run.dir)
    sink.append({"type": "sweep_done", "aborted": True})
    sink.close()
    assert [json.loads(line)["type"] for line in (run.dir / EVENTS).read_text().splitlines()] == ["sweep_started", "sweep_done"]


def test_a_full_disk_at_the_end_of_a_sweep_is_one_line_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import polars as pl

    def full(frame: pl.DataFrame, path: Path, **kw: object) -> None:
        Path(path).write_bytes(b"PAR1 half a table")  # the disk filled in the middle of the table
        raise OSError(errno.ENOSPC, "No space left on device")

    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False)
    run = open_run(tmp_path, "base")
    with open(run.dir / EVENTS, "a") as f:
        f.write('{"type":"sweep_done","aborted":false,"stopped":false}\n')
    before = {p.name: p.read_bytes() for p in run.dir.iterdir()}
    monkeypatch.setattr(pl.DataFrame, "write_parquet", full)
    with pytest.raises(RunError, match=r"cannot write .*levels\.parquet: No space left on device"):
        run.finish()
    assert {p.name: p.read_bytes() for p in run.dir.iterdir()} == before  # no temporary file; the old table whole


def test_the_load_generator_says_so_in_one_line_when_it_cannot_write(tmp_path: Path) -> None:
    run = create_run(tmp_path, RunMeta(profile="p", settings={"levels": [1]}))
    (run.dir / EVENTS).unlink()
    (run.dir / EVENTS).symlink_to("/dev/full")
    done = subprocess.run(
        [sys.executable, "-m", "console.sweep.loadgen", "--url", "http://127.0.0.1:9", "--run-dir", str(run.dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stderr.strip() == "pivot-loadgen: cannot write the run: No space left on device"


def test_a_cut_event_log_falls_back_on_the_tables(campaign: Path) -> None:
    events = campaign / "runs" / "base" / EVENTS
    events.write_text(events.read_text()[:10])  # cut inside the first line; levels.parquet is intact
    run = open_run(campaign, "base")
    assert len(run.levels()) == 8 and run.state != "empty"


def test_two_load_generators_never_write_one_run(tmp_path: Path) -> None:
    from console.sweep.runs.lock import run_lock

    run = create_run(tmp_path, RunMeta(profile="p", settings={"levels": [1]}))
    with run_lock(run.dir):
        second = subprocess.run(
            [sys.executable, "-m", "console.sweep.loadgen", "--url", "http://127.0.0.1:9", "--run-dir", str(run.dir), "--resume"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert second.returncode == 2 and f"being written by another load generator (pid {os.getpid()})" in second.stderr
    assert (run.dir / EVENTS).read_text() == ""  # the second one wrote nothing


def test_a_run_being_written_is_not_deleted(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """`pivot runs delete RUN --yes` while a sweep writes RUN: refused, naming the load generator; the sweep ends with
    its run whole (issue 34, H5)."""
    server = start_server()
    (tmp_path / "pivot.toml").write_text(f'campaign_dir = "{tmp_path / "campaign"}"\n')
    settings = SweepSettings(levels=(2,), requests=300, max_tokens=64, input_tokens=16, drift_check=False)
    run = create_run(tmp_path / "campaign", RunMeta(profile="p", settings=settings.to_dict()))
    loadgen = loadgen_of(server.url, run.dir)
    wait_until(lambda: sum(e["type"] == "request" for e in _events(run.dir)) >= 3, timeout=60)
    deleted = pivot(tmp_path / "pivot.toml", "runs", "delete", run.name, "--yes")
    assert deleted.returncode == 2 and deleted.stdout == "", deleted.stdout
    assert (
        f"run {run.name} is being written by a load generator (pid {loadgen.pid}): stop that sweep first; nothing deleted" in deleted.stderr
    )
    assert loadgen.wait(timeout=120) == 0, loadgen.stderr.read() if loadgen.stderr else ""
    assert open_run(tmp_path / "campaign", run.name).state == "complete"
    assert pivot(tmp_path / "pivot.toml", "runs", "delete", run.name, "--yes").returncode == 0  # once it is done


def test_a_killed_load_generator_is_named_with_its_signal(tmp_path: Path) -> None:
    import asyncio

    from console.sweep.loadgen.runner import SweepProcess

    run = create_run(tmp_path, RunMeta(profile="p", settings={"levels": [1], "server_wait_s": 30}))

    async def go() -> list[dict]:
        process = SweepProcess(run, ["--url", "http://127.0.0.1:9"])
        events = []
        async for event in process.events():
            events.append(event.model_dump())
            if event.type == "sweep_started" and process.proc is not None:
                process.proc.send_signal(signal.SIGKILL)
        return events

    events = asyncio.run(go())
    assert events[-1] == {"type": "failed", "status": -9, "message": "the load generator was killed by SIGKILL"}


def loadgen_of(url: str, run_dir: Path) -> subprocess.Popen[str]:
    """The load generator measuring the run against a URL, as the console starts it (its stderr kept)."""
    return subprocess.Popen(
        [sys.executable, "-m", "console.sweep.loadgen", "--url", url, "--run-dir", str(run_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _events(run_dir: Path) -> list[dict]:
    """The run's events so far: none before the load generator has made its file (the run's directory comes first)."""
    if not (run_dir / EVENTS).exists():
        return []
    lines = (run_dir / EVENTS).read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def test_a_server_killed_mid_level_fails_the_level_and_the_sweep_says_why(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    server = start_server()
    settings = SweepSettings(levels=(2, 4), requests=40, max_tokens=64, input_tokens=16, server_wait_s=2, idle_timeout_s=5)
    run = create_run(tmp_path / "campaign", RunMeta(profile="p", settings=settings.to_dict()))
    loadgen = loadgen_of(server.url, run.dir)
    wait_until(lambda: sum(e["type"] == "request" for e in _events(run.dir)) >= 3, timeout=60)
    os.killpg(server.proc.pid, signal.SIGKILL)  # the server dies in the middle of C=2
    assert loadgen.wait(timeout=120) == 3
    run = open_run(tmp_path / "campaign", run.name)
    run.finish()
    assert run.state == "partial" and run.stopped_because and run.stopped_because.startswith("C=2: ")
    assert "the server did not answer for 2 s" in run.stopped_because
    assert not run.measured() and run.levels()[0].failed
    # the server is back: --resume measures the failed level and the rest
    again = start_server()
    resumed = subprocess.run(
        [sys.executable, "-m", "console.sweep.loadgen", "--url", again.url, "--run-dir", str(run.dir), "--resume"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert resumed.returncode == 0, resumed.stderr
    run = open_run(tmp_path / "campaign", run.name)
    run.finish()
    assert run.state == "complete" and [level.c for level in run.measured()] == [2, 4]


@pytest.mark.parametrize("client", ["console", "host"])
def test_a_stalled_link_is_waited_for_and_the_level_measured_again(sim_host_process, tmp_path: Path, client: str) -> None:  # type: ignore[no-untyped-def]
    """Through an SSH forward the stalled requests fail, and the level is measured again once the link is back; a
    load generator on the host measures on, and what it sent waits for the link (never a stalled loop)."""
    from tests.conftest import free_port

    host = sim_host_process
    config_text = host.config_path.read_text()
    host.config_path.write_text(
        config_text.replace("[sweep]\n", f'[sweep]\nidle_timeout_s = 3\nserver_wait_s = 120\nclient = "{client}"\n')
    )
    profiles = host.config_path.parent / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "t.toml").write_text(f'extends = "demo-baseline"\nport = {free_port()}\n')
    started = pivot(host.config_path, "server", "start", "t")
    assert started.returncode == 0, started.stdout + started.stderr
    sweep = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "console",
            "--config",
            str(host.config_path),
            "sweep",
            "--levels",
            "2",
            "--requests",
            "200",
            "--max-tokens",
            "64",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    runs = host.config.campaign_dir / "runs"
    wait_until(lambda: runs.exists() and any(runs.iterdir()), timeout=60)
    run_dir = next(runs.iterdir())
    wait_until(lambda: sum(e["type"] == "request" for e in _events(run_dir)) >= 5, timeout=60)
    host.proc.send_signal(signal.SIGSTOP)  # the SSH server stops answering: the link stalls
    try:
        if client == "console":
            wait_until(lambda: any(e["type"] == "level_done" and e.get("failed") for e in _events(run_dir)), timeout=240)
        else:
            time.sleep(5)  # longer than idle_timeout_s: a request through the link would have failed by now
    finally:
        host.proc.send_signal(signal.SIGCONT)
    _, err = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, err
    events = _events(run_dir)
    assert events[0]["client"]["path"] == {"console": "ssh-forward", "host": "on-host"}[client]
    assert any(e["type"] == "level_retry" for e in events) == (client == "console")
    assert client == "console" or not any(e["type"] == "request" and e.get("error") for e in events)
    run = open_run(host.config.campaign_dir, run_dir.name)
    assert run.state == "complete" and [level.c for level in run.measured()] == [2]


def test_small_command_line_faults_are_one_line(campaign: Path, tmp_path: Path) -> None:
    shown = pivot(tmp_path / "pivot.toml", "runs", "show")
    assert shown.returncode == 2 and shown.stderr.strip() == "pivot: runs show: Missing argument 'RUN' (see pivot runs show --help)"
    zero = pivot(tmp_path / "pivot.toml", "sweep", "--url", "http://127.0.0.1:9", "--max-tokens", "0")
    assert zero.returncode == 2 and "--max-tokens: expected a positive integer, got 0" in zero.stderr
    eight = tmp_path / "eight.toml"
    eight.write_text('[sweep]\nmax_tokens = "eight"\n')
    bad = pivot(eight, "sweep", "--url", "http://127.0.0.1:9")
    assert bad.returncode == 2 and "sweep.max_tokens: expected a positive integer, got 'eight'" in bad.stderr
    levels = pivot(tmp_path / "pivot.toml", "sweep", "--url", "http://127.0.0.1:9", "--levels", "0,abc")
    assert levels.returncode == 2 and "Invalid value for '--levels': '0,abc': '0' is not a positive whole number" in levels.stderr
    resumed = pivot(tmp_path / "pivot.toml", "sweep", "--resume", "base", "--levels", "1", "--max-tokens", "64")
    assert resumed.returncode == 2 and resumed.stderr.strip() == (  # issue 34, L2: the flags were ignored without a word
        "pivot: --resume measures what run base still lacks with its own settings: --levels, --max-tokens would "
        "measure something else (a new sweep takes them)"
    )


def test_a_campaign_that_cannot_be_written_refuses_a_sweep_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "ro.toml"
    config.write_text('campaign_dir = "/proc/1/pivot-campaign"\n')  # not writable, not even by root
    refused = pivot(config, "sweep", "--url", "http://127.0.0.1:9")
    assert refused.returncode == 2 and "cannot create run" in refused.stderr and "Traceback" not in refused.stderr


def test_runs_listing_survives_a_run_without_metadata(campaign: Path) -> None:
    (campaign / "runs" / "empty-dir").mkdir()
    states = {r.name: r.state for r in list_runs(campaign)}
    assert states["empty-dir"] == "corrupt" and states["base"] == "complete"


def test_resume_on_another_server_is_refused(sim_host_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import free_port

    host = sim_host_process
    profiles = host.config_path.parent / "profiles"
    profiles.mkdir(exist_ok=True)
    for name in ("baseline", "eagle3"):
        (profiles / f"t-{name}.toml").write_text(f'extends = "demo-{name}"\nport = {free_port()}\n')
    assert pivot(host.config_path, "server", "start", "t-baseline").returncode == 0
    swept = pivot(host.config_path, "sweep", "--levels", "1", "--requests", "4", "--max-tokens", "8")
    assert swept.returncode == 0, swept.stderr
    assert pivot(host.config_path, "server", "switch", "t-eagle3").returncode == 0
    run = list_runs(host.config.campaign_dir)[-1].name
    refused = pivot(host.config_path, "sweep", "--resume", run)
    assert refused.returncode == 2 and "was measured on another server (profile t-baseline, now t-eagle3)" in refused.stderr


@pytest.mark.slow  # ten seconds and more on 2 cores
def test_a_long_first_wave_says_how_far_it_is_while_no_request_has_finished(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """Progress once a second on the load generator's output (requests in flight, tokens streamed), never kept with
    the run: the Sweep pane's line moves before the first request ends."""
    server = start_server("--time-scale", "1")  # real time: a 2,000-token request takes some 20 s
    settings = SweepSettings(levels=(2,), requests=2, max_tokens=2000, input_tokens=16)
    run = create_run(tmp_path / "campaign", RunMeta(profile="p", settings=settings.to_dict()))
    loadgen = subprocess.Popen(
        [sys.executable, "-m", "console.sweep.loadgen", "--url", server.url, "--run-dir", str(run.dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert loadgen.stdout is not None
        seen: list[dict] = []
        for line in loadgen.stdout:
            seen.append(json.loads(line))
            if seen[-1]["type"] == "requests_done" or (seen[-1]["type"] == "progress" and seen[-1]["streamed"] > 0):
                break
        assert seen[-1] == {"type": "progress", "c": 2, "in_flight": 2, "streamed": seen[-1]["streamed"]}
        assert not any(e["type"] == "requests_done" for e in seen)
    finally:
        loadgen.send_signal(signal.SIGTERM)
        loadgen.wait(timeout=60)
    assert "progress" not in (run.dir / EVENTS).read_text()


def test_last_and_previous_name_the_same_runs_for_every_command(campaign: Path, tmp_path: Path) -> None:
    """`runs show last` was refused while `compare last` worked: every command resolves them in one place."""
    shown = pivot(tmp_path / "pivot.toml", "runs", "show", "last")
    assert shown.returncode == 0 and shown.stdout.startswith("spec "), shown.stdout + shown.stderr
    before = pivot(tmp_path / "pivot.toml", "runs", "show", "previous")
    assert before.returncode == 0 and before.stdout.startswith("base "), before.stdout + before.stderr
    compared = pivot(tmp_path / "pivot.toml", "compare", "previous", "last")
    assert compared.returncode == 0 and "base" in compared.stdout and "spec" in compared.stdout


def test_a_repeat_aborted_after_a_complete_sweep_leaves_the_run_complete(tmp_path: Path) -> None:
    """`u`, then `A`: the repeat adds no level and takes none away; the run stays complete, its numbers as they were.
    A sweep aborted before its end is still partial."""
    write_run(tmp_path, "spec", "eagle3", EAGLE3, speculative=True)
    run = open_run(tmp_path, "spec")
    before = [(lv.c, lv.total_tok_s) for lv in run.levels()]
    with open(run.dir / EVENTS, "a") as f:
        f.write(json.dumps({"type": "sweep_started"}) + "\n")
        f.write(json.dumps({"type": "level_started", "c": 1, "requests": 40}) + "\n")
        f.write(json.dumps({"type": "sweep_done", "aborted": True, "stopped": False}) + "\n")
    run.finish()
    again = open_run(tmp_path, "spec")
    assert again.state == "complete" and [(lv.c, lv.total_tok_s) for lv in again.levels()] == before
    write_run(tmp_path, "cut", "eagle3", EAGLE3, speculative=True, complete=False)
    assert open_run(tmp_path, "cut").state == "partial"


@pytest.mark.slow  # ten seconds and more on 2 cores
def test_ctrl_c_on_a_sweep_keeps_the_finished_requests_and_a_resume_measures_only_the_rest(start_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """Ctrl-C on a headless `pivot sweep` (issue 36) exited 130 with nothing said; 13 finished requests stayed only in
    events.jsonl, the run read `empty`, and `--resume` measured the level again from nothing."""
    server = start_server()
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "{tmp_path / "campaign"}"\n[sweep]\nwarmup = 0\ndrift_check = false\n')
    sweep = subprocess.Popen(
        [sys.executable, "-m", "console", "--config", str(config), "sweep", "--url", server.url, "--levels", "2,4", "--requests", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: the test's Ctrl-C reaches it and its load generator, as a terminal's does
    )
    runs = tmp_path / "campaign" / "runs"
    wait_until(lambda: runs.is_dir() and any(sum(e["type"] == "request" for e in _events(d)) >= 5 for d in runs.iterdir()), timeout=60)
    os.killpg(sweep.pid, signal.SIGINT)
    out, err = sweep.communicate(timeout=120)
    assert sweep.returncode not in (0, None), out + err
    [run_dir] = list(runs.iterdir())
    run = open_run(tmp_path / "campaign", run_dir.name)
    [level] = run.levels()
    assert level.c == 2 and level.measured and level.lacking == 120 - level.requests > 0
    kept = f"interrupted: {level.requests} finished request(s) kept (C=2 cut short)"
    said = f"{kept}; `pivot --config {config} sweep --url {server.url} --resume {run.name}` measures what is missing"
    assert said in " ".join(out.split()), out + err
    assert f"cut short: {level.requests} of 120 requests" in out
    listed = pivot(config, "runs").stdout
    assert f"{run.name}" in listed and "partial" in listed and "empty" not in listed

    resumed = pivot(config, "sweep", "--url", server.url, "--resume", run.name)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    run = open_run(tmp_path / "campaign", run.name)
    assert run.state == "complete" and [(lv.c, lv.requests, lv.lacking) for lv in run.levels()] == [(2, 120, 0), (4, 120, 0)]
    started = [e for e in _events(run.dir) if e["type"] == "level_started"]
    assert [(e["c"], e["requests"], e.get("repeat", False)) for e in started] == [
        (2, 120, False),
        (2, 120 - level.requests, True),
        (4, 120, False),
    ]

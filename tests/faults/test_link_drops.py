"""A link that drops while the load generator runs on the GPU host (issue 21, F): the host measures the level in
progress to its end and begins no other; what it measured is fetched when the link is back (or by `--resume` when
it is not back in time), and the sweep ends saying how to measure the rest. Over a relay the test cuts
(tests/link.py), to the simulated host and to OpenSSH's sshd (whose commands run on this machine and reach the
simulated server on its loopback port): the SSH server sees the connection die and closes the command's pipes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run, open_run
from tests.conftest import HostProcess, host_process
from tests.link import Link
from tests.test_loadgen_on_host import server_port, wait_for_line


@pytest.fixture
def host(tmp_path: Path) -> Iterator[HostProcess]:
    yield from host_process(tmp_path, 30, server="baseline")


@dataclass
class Linked:
    """A host reached through a link the test can cut: its pivot.toml, and where its workdir is."""

    config: Path
    workdir: Path
    link: Link


@pytest.fixture(params=["sim", "openssh"])
def linked(request: pytest.FixtureRequest, host: HostProcess, tmp_path: Path) -> Iterator[Linked]:
    if request.param == "sim":
        demo = host.config.host("demo")
        assert demo.port is not None  # the demo's config names the port it listens on
        port, known, workdir = demo.port, host.root / "known_hosts", host.root / "home" / ".pivot"
        text = host.config_path.read_text()
    else:
        from tests.test_openssh import SSHD, start_sshd

        if SSHD is None:
            pytest.skip("OpenSSH sshd is not installed (CI installs openssh-server)")
        sshd = start_sshd(tmp_path / "sshd")

        def stop() -> None:
            sshd.proc.terminate()
            sshd.proc.wait()

        request.addfinalizer(stop)
        port, known, workdir, spec = sshd.port, Path(str(sshd.spec.known_hosts)), tmp_path / "work", sshd.spec
        text = (
            f'default_host = "demo"\ncampaign_dir = "{tmp_path / "campaign"}"\n[hosts.demo]\nhostname = "127.0.0.1"\n'
            f'port = {port}\nuser = "{spec.user}"\nidentity = "{spec.identity}"\nknown_hosts = "{known}"\n'
            f'python = "{sys.executable}"\nworkdir = "{workdir}"\n'
        )
    relay = Link(port)
    first = known.read_text().splitlines()[0]
    known.write_text(known.read_text() + first.replace(first.split()[0], f"[127.0.0.1]:{relay.port}") + "\n")
    config = tmp_path / "linked.toml"
    config.write_text(text.replace(f"port = {port}\n", f"port = {relay.port}\n", 1))
    yield Linked(config, workdir, relay)
    relay.close()


def loadgen(config: Path, port: int, run_dir: Path, *extra: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "console.sweep.loadgen",
        "--config",
        str(config),
        "--host",
        "demo",
        "--port",
        str(port),
        "--run-dir",
        str(run_dir),
        *extra,
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kept(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def new_run(tmp_path: Path) -> Path:
    settings = {"levels": [4, 8], "requests": 24, "max_tokens": 2048, "client": "host"}
    return create_run(tmp_path / "campaign", RunMeta(profile="t-baseline", settings=settings)).dir


def requests_of(events: list[dict[str, Any]], c: int) -> list[int]:
    """The request indices of level C's attempts (not of C measured again at the end, for the sweep's drift)."""
    found, again = [], False
    for e in events:
        if e["type"] == "level_started":
            again = bool(e.get("reference"))
        elif e["type"] == "request" and e["c"] == c and not again:
            found.append(e["i"])
    return sorted(found)


def test_a_drop_mid_level_keeps_what_the_host_measured_and_ends_with_the_resume_command(
    host: HostProcess, linked: Linked, tmp_path: Path
) -> None:
    run_dir = new_run(tmp_path)
    proc = loadgen(linked.config, server_port(host), run_dir)
    before = wait_for_line(proc, "requests_done")
    linked.link.cut()
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()  # through the same buffer as the lines read so far (communicate() would bypass it)
    err = proc.stderr.read()
    proc.wait(timeout=300)
    events = before + [json.loads(line) for line in out.splitlines()]
    assert proc.returncode == 3, err  # as a sweep that stopped on a failure ends
    said = [e["message"] for e in events if e["type"] in ("link_lost", "link_back")]
    assert said and "the load generator there measures the level in progress to its end" in said[0], said
    done = [e for e in events if e["type"] == "level_done"]
    assert [(e["c"], e["requests"], e["errors"]) for e in done] == [(4, 24, 0)]  # the whole level, no request lost
    end = events[-1]
    assert end["type"] == "sweep_done" and "the link to the console was lost during C=4" in end["failed"]
    on_disk = kept(run_dir)
    assert requests_of(on_disk, 4) == sorted(set(requests_of(on_disk, 4)))  # none kept twice
    assert "seq" not in on_disk[-1]
    run = open_run(tmp_path / "campaign", run_dir.name)
    assert run.state == "partial" and [level.c for level in run.measured()] == [4]
    assert not list((linked.workdir / "sweeps").iterdir())  # fetched, then removed from the host
    assert not (run_dir / "host-spool.json").exists()

    resumed = loadgen(linked.config, server_port(host), run_dir, "--resume")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    run = open_run(tmp_path / "campaign", run_dir.name)
    assert run.state == "complete" and [level.c for level in run.measured()] == [4, 8]


def test_a_link_not_back_in_time_leaves_the_host_s_measurements_to_resume(host: HostProcess, linked: Linked, tmp_path: Path) -> None:
    run_dir = new_run(tmp_path)
    proc = loadgen(linked.config, server_port(host), run_dir)
    wait_for_line(proc, "requests_done")
    linked.link.block()
    wait_for_line(proc, "link_lost")
    proc.send_signal(signal.SIGTERM)  # the operator gives up waiting
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert f"`pivot sweep --resume {run_dir.name}` fetches it and measures the rest" in err, err
    assert (run_dir / "host-spool.json").exists()
    assert kept(run_dir)[-1]["type"] != "sweep_done"  # the host's events go on where these end

    linked.link.unblock()
    resumed = loadgen(linked.config, server_port(host), run_dir, "--resume")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    on_disk = kept(run_dir)
    assert requests_of(on_disk, 4) == sorted(set(requests_of(on_disk, 4)))
    run = open_run(tmp_path / "campaign", run_dir.name)
    assert run.state == "complete" and [level.c for level in run.measured()] == [4, 8]
    assert [level.requests for level in run.levels()] == [24, 24]


def test_a_console_that_dies_mid_level_loses_nothing_the_host_measured(host: HostProcess, linked: Linked, tmp_path: Path) -> None:
    """The console closed with its tmux window (SIGHUP) during a level measured on the host (issue 34, H7): the host
    measured the level to its end into its spool, unattended; the run read `empty`, `--resume` measured the level again
    from nothing and the spool was never fetched. Now the resume fetches it: the level's requests are the host's."""
    run_dir = new_run(tmp_path)
    proc = loadgen(linked.config, server_port(host), run_dir)
    wait_for_line(proc, "requests_done")
    proc.send_signal(signal.SIGHUP)  # no handler of pivot's: it dies as a closed terminal leaves it
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGHUP
    pending = json.loads((run_dir / "host-spool.json").read_text())
    assert pending["host"] == "demo" and pending["base"] == 0
    (tmp_path / "runs.toml").write_text(f'campaign_dir = "{tmp_path / "campaign"}"\n')
    listed = subprocess.run(
        [sys.executable, "-m", "console", "--config", str(tmp_path / "runs.toml"), "runs"], capture_output=True, text=True
    )
    assert "more waits on demo: sweep --resume fetches it" in listed.stdout, listed.stdout

    resumed = loadgen(linked.config, server_port(host), run_dir, "--resume")
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    on_disk = kept(run_dir)
    assert [e["c"] for e in on_disk if e["type"] == "level_started" and not e.get("reference")] == [4, 8]  # C=4 once
    assert requests_of(on_disk, 4) == list(range(24))  # every request of it, none twice
    run = open_run(tmp_path / "campaign", run_dir.name)
    assert run.state == "complete" and [level.requests for level in run.levels()] == [24, 24]
    assert not (run_dir / "host-spool.json").exists() and not list((linked.workdir / "sweeps").iterdir())

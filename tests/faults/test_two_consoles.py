"""Issue 21, A: two consoles on one host. Every change of the server's record holds the host's lock and first checks
that the record is still the one the console acted on: two starts at once leave one server whose record names it, and
the other console is told why; a stop does not mark stopped a record another console wrote meanwhile. On the simulated
host and on OpenSSH's sshd."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from console.server.lifecycle import ServerLifecycle
from console.server.state import LifecycleError
from tests.conftest import free_port
from tests.faults.conftest import Host, pivot


def _profile(host: Host, tmp: Path) -> str:
    model = tmp / "m.gguf"
    model.write_bytes(b"GGUF")
    profiles = host.config_path.parent / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "race.toml").write_text(
        f'kind = "llamacpp"\nlauncher = ["{sys.executable}", "-m", "console.sim.llama_server"]\n'
        f'model_path = "{model}"\nport = {free_port()}\n'
    )
    return "race"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


async def test_two_starts_at_once_leave_one_server_whose_record_names_it(host: Host, tmp_path: Path) -> None:
    name = _profile(host, tmp_path)
    start = ("server", "start", name, "--no-wait", "--skip", "gpus-idle")
    first, second = await asyncio.gather(pivot(host.config_path, *start), pivot(host.config_path, *start))
    outcomes = sorted([first, second], key=lambda r: r[0])
    assert outcomes[0][0] == 0, outcomes
    refused = outcomes[1]
    assert refused[0] != 0 and ("changed meanwhile" in refused[1] + refused[2] or "already" in refused[1] + refused[2]), refused
    record = json.loads((host.workdir / "server.json").read_text())
    assert _alive(record["pid"]) and not record["stopped"]
    assert int((host.workdir / "server.pid").read_text()) == record["pid"]
    status, out, err = await pivot(host.config_path, "server", "stop")
    assert status == 0, out + err
    assert not _alive(record["pid"])


async def test_a_stop_does_not_overwrite_a_record_written_meanwhile(host: Host, tmp_path: Path) -> None:
    name = _profile(host, tmp_path)
    status, out, err = await pivot(host.config_path, "server", "start", name, "--no-wait", "--skip", "gpus-idle")
    assert status == 0, out + err
    spec = host.spec
    conn = Connection(spec)
    try:
        slow = ServerLifecycle(conn, spec, RemoteTelemetry(conn, spec), idle_threshold_mib=1024, grace_s=1)
        record = await slow.read_record()  # this console read the record, then its link stalled...
        (host.workdir / "server.json").write_text(  # ...while another console replaced the server
            (host.workdir / "server.json").read_text().replace(f'"pid": {record.pid}', f'"pid": {record.pid}, "x": 1')
        )
        try:
            await slow.write_record(record)
            raise AssertionError("a record written meanwhile was overwritten")
        except LifecycleError as e:
            assert "changed meanwhile" in str(e)
        assert '"x": 1' in (host.workdir / "server.json").read_text()
    finally:
        await conn.close()
    status, out, err = await pivot(host.config_path, "server", "stop")
    assert status == 0, out + err


async def test_a_server_serving_without_a_record_is_shown_as_what_it_is_and_adopted(host: Host, tmp_path: Path) -> None:
    name = _profile(host, tmp_path)
    start = ("server", "start", name, "--skip", "gpus-idle")
    assert (await pivot(host.config_path, *start))[0] == 0
    assert (await pivot(host.config_path, "server", "stop"))[0] == 0
    record = json.loads((host.workdir / "server.json").read_text())
    by_hand = subprocess.Popen(
        [sys.executable, "-m", "console.sim.llama_server", "-m", str(tmp_path / "m.gguf"), "--port", str(record["port"])],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # started behind pivot's back
    try:
        for _ in range(100):
            status, out, err = await pivot(host.config_path, "server", "status")
            if "unmanaged" in out:
                break
            await asyncio.sleep(0.2)
        assert status == 1 and f"unmanaged server on port {record['port']}: pid {by_hand.pid}" in out, out + err
        assert f"pivot server adopt {name} takes it over" in out
        status, out, err = await pivot(host.config_path, "server", "adopt", name, stdin=b"n\n")
        assert status == 1 and "nothing adopted" in out
        status, out, err = await pivot(host.config_path, "server", "adopt", name, stdin=b"y\n")
        assert status == 0 and f"adopted pid {by_hand.pid} as {name}" in out, out + err
        assert json.loads((host.workdir / "server.json").read_text())["pid"] == by_hand.pid
        status, out, err = await pivot(host.config_path, "server", "stop")
        assert status == 0, out + err
        assert by_hand.wait(timeout=30) is not None  # pivot's to stop now
    finally:
        if by_hand.poll() is None:
            by_hand.kill()
            by_hand.wait()


async def test_a_stop_cut_off_after_it_was_sent_still_marks_the_record(host: Host, tmp_path: Path) -> None:
    """The console is interrupted (or its link drops) once the stop reached the host: the host finishes it, the kill
    and the record marked stopped, so that the server never reads 'crashed without a stop'."""
    from dataclasses import asdict, replace

    from console.server.scripts import KILL_THEN_MARK
    from tests.conftest import wait_for

    name = _profile(host, tmp_path)
    assert (await pivot(host.config_path, "server", "start", name, "--no-wait", "--skip", "gpus-idle"))[0] == 0
    conn = Connection(host.spec)
    try:
        lifecycle = ServerLifecycle(conn, host.spec, RemoteTelemetry(conn, host.spec), idle_threshold_mib=1024, grace_s=1)
        record = await lifecycle.read_record()
        await lifecycle.agent.sample_once()  # the agent is on the host
        stopped = json.dumps(asdict(replace(record, stopped=True)), indent=1)
        argv = [
            "sh",
            "-c",
            KILL_THEN_MARK,
            "sh",
            lifecycle.record_text or "",
            stopped,
            *lifecycle.agent.argv("kill", "--grace", "1", f"{record.pid}:{record.start_ticks}:group"),
        ]
        stream = await conn.stream(argv, cwd=host.spec.workdir)
        await stream.stop(grace_s=0)  # cut off at once: the host is on its own now
        await wait_for(lambda: json.loads((host.workdir / "server.json").read_text()).get("stopped"), timeout=30)
        await wait_for(lambda: not _alive(record.pid), timeout=30)
    finally:
        await conn.close()
    status, out, err = await pivot(host.config_path, "server", "status")
    assert status == 0 and "stopped" in out and "crashed" not in out, out + err


async def test_ctrl_c_once_the_launch_began_leaves_a_record_naming_the_server(host: Host, tmp_path: Path) -> None:
    """Ctrl-C on `pivot server start` once the server's process exists (a start that seems to hang over a slow link):
    the host finishes the step it began, so the record and the pid file name the server that runs, and pivot
    follows and stops it."""
    from tests.conftest import wait_for

    name = _profile(host, tmp_path)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "console",
        "--config",
        str(host.config_path),
        "server",
        "start",
        name,
        "--skip",
        "gpus-idle",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    await wait_for(lambda: (host.workdir / "server.log").exists(), timeout=60)  # launched: the record is being written
    proc.send_signal(signal.SIGINT)
    await proc.communicate()
    await wait_for(lambda: (host.workdir / "server.pid").exists(), timeout=30)  # the host's step went on to its end
    record = json.loads((host.workdir / "server.json").read_text())
    assert _alive(record["pid"]) and not record["stopped"]
    assert int((host.workdir / "server.pid").read_text()) == record["pid"]
    status, out, err = await pivot(host.config_path, "server", "stop")
    assert status == 0 and "stopped" in out, out + err
    assert not _alive(record["pid"])


def test_two_starts_checking_the_same_engine_at_once_both_read_its_flags(tmp_path: Path) -> None:
    """Two consoles' preflights ask the agent for the same engine's --help at once: each writes the cache under a name
    of its own (a shared temporary name failed the second: `FileNotFoundError … help-cache/….txt.tmp`)."""
    engine = tmp_path / "engine.py"
    engine.write_text("import time\ntime.sleep(0.3)\nprint('usage: serve --port N')\n")
    argv = [sys.executable, "-m", "console.gpu.agent", "help", "--cache-dir", str(tmp_path / "cache"), "--", sys.executable, str(engine)]
    askers = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(16)]
    answers = [json.loads(p.communicate(timeout=120)[0].splitlines()[-1]) for p in askers]
    assert all(a["ok"] for a in answers), answers

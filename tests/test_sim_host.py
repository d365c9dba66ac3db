"""The simulated host end to end over SSH: the server's processes, the fake
nvidia-smi following them, and the leftovers of a kill that missed the group."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.remote import Connection
from tests.conftest import HostProcess, wait_for, wait_until

LAUNCH = "python3 -m console.sim.launch_server --model-path ~/models/kimi-k2.5-int4 --tp 8 --port {port}"


@pytest.fixture
async def conn(sim_host_process: HostProcess) -> AsyncIterator[Connection]:
    c = Connection(sim_host_process.config.host("demo"))
    yield c
    await c.close()


async def apps(conn: Connection) -> list[tuple[int, str, int]]:
    out = (await conn.run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits"])).stdout
    return [(int(p), name, int(mib)) for p, name, mib in (line.split(", ") for line in out.splitlines())]


async def used(conn: Connection) -> list[int]:
    out = (await conn.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"])).stdout
    return [int(v) for v in out.split()]


async def start_detached(conn: Connection, port: int) -> int:
    # what the server lifecycle will do: its own session, no inherited descriptors, a pid file
    script = f"setsid {LAUNCH.format(port=port)} </dev/null >~/sim-server.log 2>&1 & echo $!"
    result = await conn.run(["sh", "-c", script])
    return int(result.stdout)


async def test_a_started_server_holds_memory_on_every_gpu(conn: Connection) -> None:
    from tests.conftest import free_port

    await start_detached(conn, free_port())
    held = await wait_for(lambda: _apps_at_least(conn, 9), timeout=30)
    names = {name for _, name, _ in held}
    assert names == {f"sglang::scheduler_TP{i}" for i in range(8)} | {"sglang::scheduler_TP3_ipc"}
    assert all(mib > 100_000 for mib in (await used(conn)))
    util = (await conn.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"])).stdout.split()
    assert util == ["0"] * 8  # idle: nobody is sending requests


async def _apps_at_least(conn: Connection, n: int) -> list[tuple[int, str, int]] | None:
    found = await apps(conn)
    return found if len(found) >= n else None


async def test_killing_only_the_main_process_leaves_zombies_holding_memory(conn: Connection) -> None:
    from tests.conftest import free_port

    main_pid = await start_detached(conn, free_port())
    await wait_for(lambda: _apps_at_least(conn, 9), timeout=30)
    await wait_for(lambda: _log_has(conn, "ready to roll"), timeout=30)
    await conn.run(["kill", "-TERM", str(main_pid)])
    leftovers = await wait_for(lambda: _apps_named(conn, {"sglang::scheduler_TP3", "sglang::scheduler_TP7", "[Not Found]"}), timeout=15)
    by_name = {name: pid for pid, name, _ in leftovers}
    zombie = by_name["[Not Found]"]  # a zombie has no command line left
    stat = (await conn.run(["cat", f"/proc/{zombie}/stat"])).stdout
    assert stat[stat.rindex(")") + 2] == "Z"
    assert (await used(conn))[3] > 100_000 and (await used(conn))[0] == 0
    # the zombie cannot be killed; its parent can, and then the memory is free
    await conn.run(["kill", "-KILL", str(zombie)])
    await asyncio.sleep(0.5)
    assert zombie in {pid for pid, _, _ in await apps(conn)}
    killed = await conn.run(["kill", "-TERM", str(by_name["sglang::scheduler_TP3"]), str(by_name["sglang::scheduler_TP7"])])
    assert killed.ok, killed.stderr
    await wait_for(lambda: _no_apps(conn), timeout=15)
    assert await used(conn) == [0] * 8


async def test_killing_the_process_group_frees_everything(conn: Connection) -> None:
    from tests.conftest import free_port

    main_pid = await start_detached(conn, free_port())
    await wait_for(lambda: _apps_at_least(conn, 9), timeout=30)
    # procps kill reads "-PGID" as a signal unless "--" comes first
    killed = await conn.run(["kill", "-TERM", "--", f"-{main_pid}"])
    assert killed.ok, killed.stderr
    await wait_for(lambda: _no_apps(conn), timeout=15)
    assert await used(conn) == [0] * 8


async def _no_apps(conn: Connection) -> bool:
    return not await apps(conn)


async def _apps_named(conn: Connection, names: set[str]):  # type: ignore[no-untyped-def]
    found = await apps(conn)
    return found if {name for _, name, _ in found} == names else None


async def _log_has(conn: Connection, text: str) -> bool:
    return text in (await conn.run(["cat", "sim-server.log"], cwd="~")).stdout


def test_openssh_client_logs_in_with_the_printed_line(sim_host_process: HostProcess) -> None:
    argv = [*shlex.split(sim_host_process.ssh), "-o", "BatchMode=yes", "nvidia-smi -L | wc -l; echo $PIVOT_SIM_HOME"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    count, home = result.stdout.split()
    assert count == "8" and Path(home).is_dir()


def test_openssh_client_gets_a_terminal(sim_host_process: HostProcess) -> None:
    argv = [*shlex.split(sim_host_process.ssh), "-tt", "-o", "BatchMode=yes", "tty; stty size"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("/dev/pts/")


@pytest.mark.slow  # a demo host with traffic, and a sweep
def test_the_demos_own_traffic_makes_way_for_a_sweep(tmp_path: Path) -> None:
    """`pivot demo --serve`'s background requests keep its server busy; `pivot sweep` of it runs without
    --allow-busy: the simulated server ends and refuses its demo traffic while another client measures it, and its
    log says so."""
    import json
    import sys

    import httpx

    from console.sim.openai_app import TRAFFIC_HEADER
    from tests.conftest import host_process

    for host in host_process(tmp_path, 20, server="baseline"):
        record = host.root / "home" / ".pivot" / "server.json"

        def running(record: Path = record) -> float:  # as the traffic reads it (it does not pause); 0 while loading
            if not record.exists():
                return 0
            port = json.loads(record.read_text())["port"]
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", headers={TRAFFIC_HEADER: "1"}, timeout=10).text
            except httpx.TransportError:
                return 0
            return float(next((line.split()[-1] for line in text.splitlines() if line.startswith("sglang:num_running_reqs")), 0))

        # the server loads, and the traffic's pattern begins with a few idle seconds
        wait_until(lambda: running() != 0, timeout=120, interval=0.2, what="the demo's traffic")
        swept = subprocess.run(
            [
                sys.executable,
                "-m",
                "console",
                "--config",
                str(host.config_path),
                "sweep",
                "--levels",
                "1",
                "--max-tokens",
                "16",
                "--requests",
                "4",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert swept.returncode == 0, swept.stdout + swept.stderr
        assert "already serving" not in swept.stdout + swept.stderr
        log = (host.root / "home" / ".pivot" / "server.log").read_text()
        assert "pivot demo: its background traffic pauses while another client measures this server" in log
        assert running() == 0  # still paused just after the sweep's last read of /metrics


def test_each_demo_keeps_a_campaign_of_its_own_with_the_profiles_written_for_it(tmp_path: Path) -> None:
    """`pivot demo` keeps its campaign under the user's data directory (XDG), with a pivot.toml beside it; what `w`
    writes goes beside that file too, not into the demo's temporary directory, which ends with it."""
    import os
    import signal
    import sys

    from console import config

    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "demo", "--serve", "--no-traffic", "--server", "none"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(2)]
        path = Path(next(line for line in lines if line.startswith("config: ")).removeprefix("config: "))
        live = config.load(path)
        kept = live.campaign_dir.parent
        assert kept.parent == tmp_path / "data" / "pivot" / "demo" and live.profiles_dir == kept / "profiles"
        offline = config.load(kept / "pivot.toml")  # what `pivot --config …` reads once the demo has ended
        assert offline.campaign_dir == live.campaign_dir and kept / "profiles" in offline.profile_dirs
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)

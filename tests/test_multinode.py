"""A server across nodes: a profile's `nodes` start rank R on the R-th host with the engine's own flags, every node
is checked first, the server is ready when rank 0 answers, any rank's end is the server's crash (the other ranks'
leftovers then stray on their hosts), and a stop ends every rank with each host's release check. Against three
simulated hosts behind real SSH servers (`pivot demo --serve --hosts 3`), whose simulated SGLang rendezvous and fail
as SGLang does."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from console import config
from console.config import ConfigError, parse
from console.gpu.samples import Sample
from console.server.lifecycle import Lifecycle
from console.server.multinode import ranks
from console.server.profiles import ProfileError, load_profiles
from console.server.state import PreflightFailed, ServerState, ServerStatus
from console.session import Session
from tests.conftest import HostProcess, free_port, host_process, pid_alive, wait_for
from tests.faults.conftest import run_pivot

HOSTS = '[hosts.a]\nhostname = "10.0.0.1"\n[hosts.b]\nhostname = "10.0.0.2"\naddress = "192.168.1.2"\n[hosts.c]\n'


def write_profile(tmp: Path, name: str, text: str) -> Path:
    (tmp / "profiles").mkdir(exist_ok=True)
    path = tmp / "profiles" / f"{name}.toml"
    path.write_text('launcher = "python3 -m sglang.launch_server"\nmodel_path = "/m"\n' + text)
    return path


def test_a_profile_across_nodes_gets_each_ranks_own_flags_from_hosts_or_a_group(tmp_path: Path) -> None:
    config = parse(tmp_path / "pivot.toml", HOSTS + '[groups]\npair = ["b", "a"]\n')
    write_profile(tmp_path, "listed", 'nodes = ["a", "b"]\ndist_port = 5000\n[flags]\ntp-size = 16\n')
    write_profile(tmp_path, "grouped", 'nodes = "pair"\n')
    write_profile(tmp_path, "vllm", 'kind = "vllm"\nnodes = ["a", "c"]\nport = 8000\n')
    profiles = load_profiles(tmp_path / "profiles")
    listed = ranks(profiles.get("listed"), config)
    assert [(r.rank, r.host.name) for r in listed] == [(0, "a"), (1, "b")]
    assert listed[1].profile.argv()[-6:] == ["--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:5000"]
    assert [r.host.name for r in ranks(profiles.get("grouped"), config)] == ["b", "a"]
    first = ranks(profiles.get("grouped"), config)[0]  # b's `address`, not its SSH name, is where the ranks meet
    assert first.profile.flags["dist-init-addr"] == "192.168.1.2:50000"
    vllm = ranks(profiles.get("vllm"), config)
    assert vllm[0].profile.argv()[-8:] == ["--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1", "--master-port", "50000"]
    assert vllm[1].profile.argv()[-1] == "--headless" and not vllm[1].serves_http and vllm[1].host.name == "c"


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ('kind = "llamacpp"\nnodes = ["a", "b"]\n', "nodes", "pivot knows the multi-node flags of sglang, vllm only"),
        ('nodes = ["a", "a"]\n', "nodes", "names a host twice"),
        ("nodes = []\n", "nodes", "names no host"),
        ('nodes = ["a", "b"]\n[flags]\nnode-rank = 1\n', "flags.node-rank", "pivot sets it on each node"),
    ],
)
def test_a_profile_that_cannot_span_nodes_says_why_in_one_line(tmp_path: Path, text: str, key: str, problem: str) -> None:
    path = write_profile(tmp_path, "bad", text)
    error = load_profiles(tmp_path / "profiles").broken["bad"]
    assert error.path == path and error.key == key and problem in error.problem


def test_nodes_that_pivot_toml_does_not_name_are_refused_naming_the_profile(tmp_path: Path) -> None:
    config = parse(tmp_path / "pivot.toml", HOSTS + '[groups]\npair = ["a", "b"]\n')
    write_profile(tmp_path, "far", 'nodes = ["a", "gpu9"]\n')
    write_profile(tmp_path, "one", 'nodes = "a"\n')
    profiles = load_profiles(tmp_path / "profiles")
    with pytest.raises(ProfileError) as far:
        ranks(profiles.get("far"), config)
    assert far.value.key == "nodes" and "'gpu9'" in far.value.problem and "groups: pair" in far.value.problem
    with pytest.raises(ProfileError, match="'a' is one host"):
        ranks(profiles.get("one"), config)
    with pytest.raises(ConfigError, match=r"groups\.pair: names no host in \[hosts\]: 'z'"):
        parse(tmp_path / "pivot.toml", HOSTS + '[groups]\npair = ["a", "z"]\n')


# -- across three simulated hosts ----------------------------------------------------------------------------------


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[HostProcess]:
    served = host_process(tmp_path, 20, hosts=3)
    try:
        yield next(served)
    finally:
        served.close()


@pytest.fixture
async def gpu01(fleet: HostProcess) -> AsyncIterator[Session]:
    async with Session(config.load(fleet.config_path), "gpu01") as session:
        await session.connect()
        yield session


def server_pid(fleet: HostProcess, host: str) -> int:
    return int((fleet.root / host / "home" / ".pivot" / "server.pid").read_text())


def log_of(fleet: HostProcess, host: str) -> str:
    return (fleet.root / host / "home" / ".pivot" / "server.log").read_text()


async def stray_on(session: Session, host: str) -> list[int]:
    sample = await session.node_lifecycle(host).agent.sample_once()
    assert isinstance(sample, Sample)
    return sorted(p.pid for p in sample.stray)


@pytest.mark.slow  # a fleet of demo hosts
async def test_two_ranks_start_on_two_hosts_serve_when_both_are_up_and_stop_together(fleet: HostProcess, gpu01: Session) -> None:
    lifecycle = gpu01.lifecycle
    assert lifecycle is not None
    checks = await lifecycle.start(gpu01.profiles().get("demo-2node"))
    assert {c.name for c in checks} >= {
        "GPUs idle on gpu01",
        "GPUs idle on gpu02",
        "model path on gpu02",
        "rendezvous port free on gpu01",
        "port free on gpu02",
    }
    status = await wait_for(lambda: _ready(lifecycle), timeout=90)
    assert status.headline() == "ready demo-2node (2 nodes)" and status.nodes == ("gpu01", "gpu02")
    assert "--node-rank 1 --dist-init-addr 127.0.0.1:" in " ".join(
        json.loads((fleet.root / "gpu02/home/.pivot/server.json").read_text())["argv"]
    )
    assert "node_rank 1 joined the process group" in log_of(fleet, "gpu01")  # rank 0 served only once rank 1 was in
    peer = await gpu01.node_lifecycle("gpu02").poll()
    assert peer.state == ServerState.READY and peer.headline() == "ready demo-2node (rank 1/2)"

    async with await lifecycle.follow_log(50) as stream:  # every rank's log, each line led by its host
        seen: set[str] = set()
        async for line in stream:
            seen.add(line.split("│")[0])
            if seen == {"gpu01 r0", "gpu02 r1"}:
                break

    os.kill(server_pid(fleet, "gpu02"), signal.SIGTERM)  # SGLang's rank above 0 waits for rank 0's word
    await wait_for(lambda: "SIGTERM received on node_rank 1; waiting for the rank-0" in log_of(fleet, "gpu02"), timeout=20)
    assert (await lifecycle.poll()).state == ServerState.READY

    report = await lifecycle.stop()
    assert report.describe() == (
        "gpu01: stopped; no process of its group holds GPU memory; gpu02: stopped; no process of its group holds GPU memory"
    )
    assert (await lifecycle.poll()).state == ServerState.STOPPED
    assert (await gpu01.node_lifecycle("gpu02").poll()).state == ServerState.STOPPED
    assert await stray_on(gpu01, "gpu01") == [] and await stray_on(gpu01, "gpu02") == []
    events = run_pivot(fleet.config_path, "events").stdout
    assert events.count(" stop ") == 1 and "gpu02: stopped" in events


async def _ready(lifecycle: Lifecycle) -> ServerStatus | None:
    status = await lifecycle.poll()
    return status if status.state == ServerState.READY else None


@pytest.mark.slow  # a fleet of demo hosts
async def test_killing_one_rank_crashes_the_server_and_leaves_the_others_leftovers_stray(fleet: HostProcess, gpu01: Session) -> None:
    lifecycle = gpu01.lifecycle
    assert lifecycle is not None
    await lifecycle.start(gpu01.profiles().get("demo-2node"))
    await wait_for(lambda: _ready(lifecycle), timeout=90)
    rank0 = server_pid(fleet, "gpu01")
    os.kill(server_pid(fleet, "gpu02"), signal.SIGKILL)  # behind the console's back

    async def crashed() -> ServerStatus | None:
        status = await lifecycle.poll()
        return status if status.state == ServerState.CRASHED else None

    status = await wait_for(crashed, timeout=30)
    assert status.detail.startswith("rank 1 on gpu02 ended without a stop")
    await wait_for(lambda: not pid_alive(rank0), timeout=30)  # rank 0 fails once its peer is gone, as SGLang's does
    assert "the process group lost node_rank 1" in log_of(fleet, "gpu01")
    left0 = await wait_for(lambda: stray_on(gpu01, "gpu01"), timeout=30)
    left1 = await stray_on(gpu01, "gpu02")
    assert len(left0) >= 4 and len(left1) == 4  # each rank's workers, holding their GPUs' memory
    with pytest.raises(Exception, match="stop it first"):  # its ranks may still run: nothing new starts over them
        await lifecycle.start(gpu01.profiles().get("demo-2node"))

    killed = run_pivot(fleet.config_path, "--host", "gpu02", "kill", "--stray", "--yes")
    assert killed.returncode == 0, killed.stderr
    assert await stray_on(gpu01, "gpu02") == []


@pytest.mark.slow  # a fleet of demo hosts
async def test_a_node_that_fails_its_checks_starts_no_rank_anywhere(fleet: HostProcess, gpu01: Session) -> None:
    shutil.rmtree(fleet.root / "gpu02" / "home" / "models" / "kimi-k2.5-int4")
    lifecycle = gpu01.lifecycle
    assert lifecycle is not None
    with pytest.raises(PreflightFailed) as refused:
        await lifecycle.start(gpu01.profiles().get("demo-2node"))
    failed = [c for c in refused.value.checks if not c.ok]
    assert [c.name for c in failed] == ["model path on gpu02"] and "does not exist on the host" in failed[0].detail
    assert not (fleet.root / "gpu01" / "home" / ".pivot" / "server.pid").exists()
    assert not (fleet.root / "gpu02" / "home" / ".pivot" / "server.pid").exists()
    from_gpu02 = run_pivot(fleet.config_path, "--host", "gpu02", "server", "start", "demo-2node")
    assert from_gpu02.returncode != 0 and "runs rank 0 on gpu01: start it from there" in from_gpu02.stderr


@pytest.mark.slow  # a fleet of demo hosts
async def test_a_vllm_server_across_two_hosts_runs_its_second_rank_headless(fleet: HostProcess, gpu01: Session) -> None:
    (fleet.root / "gpu01" / "profiles" / "vllm-2node.toml").write_text(
        f'extends = "demo-vllm-baseline"\nnodes = ["gpu01", "gpu02"]\nport = {free_port()}\ndist_port = {free_port()}\n'
    )
    lifecycle = gpu01.lifecycle
    assert lifecycle is not None
    checks = await lifecycle.start(gpu01.profiles().get("vllm-2node"))
    assert next(c for c in checks if c.name == "port free on gpu02").detail == "rank 1 runs headless: it binds no port"
    await wait_for(lambda: _ready(lifecycle), timeout=90)
    argv = json.loads((fleet.root / "gpu02/home/.pivot/server.json").read_text())["argv"]
    assert argv[-1] == "--headless" and "--master-addr" in argv
    assert "headless multiproc executor" in log_of(fleet, "gpu02")
    assert (await lifecycle.stop()).describe().endswith("gpu02: stopped; no process of its group holds GPU memory")


@pytest.mark.slow  # a fleet of demo hosts
async def test_a_restart_needs_no_force_and_a_stop_leaves_another_servers_rank_alone(fleet: HostProcess, gpu01: Session) -> None:
    lifecycle = gpu01.lifecycle
    assert lifecycle is not None
    await lifecycle.start(gpu01.profiles().get("demo-2node"))
    await wait_for(lambda: _ready(lifecycle), timeout=90)
    swept = run_pivot(fleet.config_path, "--host", "gpu02", "sweep", "--levels", "1")  # rank 1 serves no API
    assert swept.returncode != 0 and "runs rank 1 of demo-2node: sweep it on gpu01" in swept.stderr
    await lifecycle.restart(gpu01.profiles())  # every node's GPUs and ports are the old ranks': the stop frees them
    await wait_for(lambda: _ready(lifecycle), timeout=90)

    record = fleet.root / "gpu02" / "home" / ".pivot" / "server.json"
    theirs = json.loads(record.read_text())
    record.write_text(json.dumps({**theirs, "nodes": [], "rank": 0, "profile": "someone-else"}))  # another server now
    report = await lifecycle.stop()
    assert not report.ok and "gpu02: not stopped: gpu02 runs another server now, left alone" in report.describe()
    stopped = run_pivot(fleet.config_path, "--host", "gpu02", "server", "stop")  # its own host stops it
    assert stopped.returncode == 0, stopped.stderr


@pytest.mark.slow  # a fleet of demo hosts
async def test_a_second_host_whose_clock_is_behind_is_still_the_servers_rank(fleet: HostProcess, gpu01: Session) -> None:
    """gpu02's clock an hour behind gpu01's (issue 34, H6): its rank's record was taken for an older server's
    (`rank 1 on gpu02 is gone`), and start, stop and gpu02's own stop sent the operator to each other in a loop. The
    ranks of one start share a token; no host's time is compared with another's."""
    lifecycle = gpu01.lifecycle
    assert lifecycle is not None
    await lifecycle.start(gpu01.profiles().get("demo-2node"))
    await wait_for(lambda: _ready(lifecycle), timeout=90)
    record = fleet.root / "gpu02" / "home" / ".pivot" / "server.json"
    theirs = json.loads(record.read_text())
    assert theirs["launch"] and theirs["launch"] == json.loads((fleet.root / "gpu01/home/.pivot/server.json").read_text())["launch"]
    record.write_text(json.dumps({**theirs, "started": theirs["started"] - 3600}, indent=1))  # as a clock behind writes it
    assert (await lifecycle.poll()).state == ServerState.READY
    report = await lifecycle.stop()
    assert report.ok, report.describe()
    assert (await gpu01.node_lifecycle("gpu02").poll()).state == ServerState.STOPPED

"""A Slurm login node (`role = "slurm"`) runs a profile as a job on a real one-machine Slurm (tests/slurm_cluster.py):
pivot writes the batch script, submits it, follows the job to ready through squeue and an SSH forward to its first
node, sweeps it, and stops it with scancel; a job cancelled behind pivot's back is the server's crash, and a job that
waits for nodes says why. The login node is the simulated host behind its real SSH server; the job runs the
simulated SGLang across both Slurm nodes."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from console import config
from console.engines import ENGINES, MULTINODE
from console.server.lifecycle import Lifecycle
from console.server.profiles import Profile, load_profiles
from console.server.slurm import batch_script
from console.server.state import ServerState, ServerStatus
from console.session import Session
from console.sim.fleet import write_two_node_profile
from tests.conftest import HostProcess, free_port, host_process, wait_for
from tests.faults.conftest import run_pivot
from tests.slurm_cluster import slurm_cluster

pytestmark = pytest.mark.slow  # a Slurm cluster of demo hosts


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as conf:
        yield conf


@pytest.fixture
def login(cluster: Path, tmp_path: Path) -> Iterator[HostProcess]:
    """The simulated host as a Slurm login node, with demo-2node as `pivot demo --hosts` writes it (the demo baseline
    across two named hosts: on Slurm, as many nodes as it names) and slurm-2node (`nodes = 2`)."""
    served = host_process(tmp_path, 20)
    try:
        host = next(served)
        text = host.config_path.read_text()
        host.config_path.write_text(text.replace('role = "gpu"', 'role = "slurm"\ngpus = false'))
        (host.root / "profiles" / "slurm-2node.toml").write_text(
            f'extends = "demo-baseline"\nnodes = 2\nport = {free_port()}\ndist_port = {free_port()}\n'
        )
        write_two_node_profile(host.root / "profiles", "gpu01", "gpu02")  # the fleet demo's own (names Slurm ignores)
        yield host
    finally:
        served.close()


@pytest.fixture
async def session(login: HostProcess) -> AsyncIterator[Session]:
    async with Session(config.load(login.config_path), "demo") as session:
        await session.connect()
        yield session


def slurm(conf: Path, *argv: str) -> str:
    """A Slurm command on the test's cluster, as its operator would type it; its output."""
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=30, env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"}
    ).stdout.strip()


def squeue(conf: Path) -> str:
    return slurm(conf, "squeue", "-h", "-o", "%i %T %R")


async def _state(lifecycle: Lifecycle, wanted: ServerState) -> ServerStatus | None:
    status = await lifecycle.poll()
    return status if status.state == wanted else None


def test_the_batch_script_quotes_every_word_and_takes_each_ranks_flags_from_slurm(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(
        'launcher = "python3 -m sglang.launch_server"\nmodel_path = "/m; rm -rf ~"\n'
        'nodes = 2\ndist_port = 5000\n[env]\nNCCL_DEBUG = "$(reboot)"\n'
    )
    profile = load_profiles(tmp_path).get("p")
    script = batch_script(profile, profile.argv())
    assert "'/m; rm -rf ~'" in script and "'NCCL_DEBUG=$(reboot)'" in script  # words, never shell
    assert "export PIVOT_NNODES=2 PIVOT_DIST_PORT=5000" in script
    assert f"bash -c {shlex.quote(ENGINES['sglang'].rank_shell or '')} pivot-rank env 'NCCL_DEBUG=$(reboot)' python3 -m sglang" in script


@pytest.mark.parametrize(
    ("kind", "rank", "address"),
    [(kind, rank, address) for kind in MULTINODE for rank in (0, 1) for address in ("10.0.0.7", "fd00::7")],
)
def test_each_task_of_the_job_adds_the_same_flags_a_rank_gets_on_named_hosts(kind: str, rank: int, address: str) -> None:
    """The job's rank snippet, run by bash as srun runs it, against the engine's node_flags."""
    env = {"PIVOT_NNODES": "2", "PIVOT_DIST_PORT": "5000", "SLURM_NODEID": str(rank), "SLURM_LAUNCH_NODE_IPADDR": address}
    shell = ENGINES[kind].rank_shell or ""
    ran = subprocess.run(
        ["bash", "-c", shell.replace("exec ", "", 1), "pivot-rank", "echo"], capture_output=True, text=True, env=env, timeout=10
    )
    flags = Profile("p", Path("p.toml"), kind, ("x",), "/m", flags=ENGINES[kind].node_flags(2, rank, address, 5000)).flag_args()
    assert ran.stdout.split() == flags


async def test_a_profile_runs_as_a_job_across_two_nodes_is_swept_and_stopped_with_scancel(
    cluster: Path, login: HostProcess, session: Session
) -> None:
    lifecycle = session.lifecycle
    assert lifecycle is not None
    checks = await lifecycle.start(session.profiles().get("demo-2node"))
    assert {c.name for c in checks} >= {"sbatch", "launcher", "model path", "flags known"}
    status = await wait_for(lambda: _state(lifecycle, ServerState.READY), timeout=120)
    assert status.job is not None and status.describe().startswith(f"ready demo-2node (job {status.job})")
    assert f"{status.job} RUNNING n[1-2]" in squeue(cluster)
    log = (login.root / "home" / ".pivot" / "server.log").read_text()
    assert "0: " in log and "1: " in log and "node_rank 1 joined the process group" in log  # both ranks, labelled

    gpus = run_pivot(login.config_path, "gpus")  # each node's GPUs, read in a step overlapping the job
    assert gpus.returncode == 0, gpus.stderr
    assert [line.split(":")[0] for line in gpus.stdout.splitlines()] == ["rank 0 n1", "rank 1 n2"]
    assert all("GPUs hold" in line for line in gpus.stdout.splitlines())  # the ranks' workers hold their memory

    swept = run_pivot(login.config_path, "sweep", "--levels", "1,2", "--max-tokens", "16")
    assert swept.returncode == 0, swept.stderr
    run = re.search(r"saved: (\S+)", swept.stdout)
    assert run and f"slurm_job = {status.job}" in (Path(run[1]) / "run.toml").read_text()

    report = await lifecycle.stop()
    assert report.describe() == f"stopped: job {status.job} ended CANCELLED"
    assert (await lifecycle.poll()).state == ServerState.STOPPED
    assert str(status.job) not in squeue(cluster)


async def test_a_job_cancelled_behind_pivots_back_is_a_crash_and_a_waiting_job_says_why(
    cluster: Path, login: HostProcess, session: Session
) -> None:
    lifecycle = session.lifecycle
    assert lifecycle is not None
    blocker = slurm(cluster, "sbatch", "--parsable", "-N2", "--output=/dev/null", "--wrap", "sleep 300")
    try:
        await lifecycle.start(session.profiles().get("slurm-2node"))

        async def waiting() -> str | None:
            status = await lifecycle.poll()
            return status.detail if status.state == ServerState.STARTING and ": " in status.detail else None

        assert await wait_for(waiting, timeout=60) in ("job pending: Resources", "job pending: Priority")
    finally:
        slurm(cluster, "scancel", blocker)
    status = await wait_for(lambda: _state(lifecycle, ServerState.READY), timeout=120)
    slurm(cluster, "scancel", str(status.job))  # behind pivot's back

    async def ended() -> ServerStatus | None:
        status = await lifecycle.poll()
        return status if status.state == ServerState.CRASHED and status.detail.startswith("the job ended") else None

    crashed = await wait_for(ended, timeout=60)  # "is ending (COMPLETING)" first, while Slurm ends its steps
    assert crashed.detail.startswith("the job ended CANCELLED, exit code ")
    await lifecycle.start(replace(session.profiles().get("slurm-2node"), node_count=3))  # more nodes than Slurm has
    assert await wait_for(waiting, timeout=60) == "job pending: PartitionConfig"  # Slurm's own word for why
    assert (await lifecycle.stop()).describe().startswith("stopped: job ")

"""A real one-machine Slurm for the tests: Debian's slurm-wlm and munge (`.ci/run` installs them), munged if none
answers, then slurmctld and two slurmd (node names n1 and n2, both on loopback) from a private slurm.conf whose ports,
state, spool and logs are under a temporary directory. As root only (SlurmUser=root); where that cannot be, the tests
that need it fail in CI and are skipped elsewhere, with the reason. Stopped with `scontrol shutdown`, and munged (if
these tests started it) by its PID."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import wait_until

NODES = ("n1", "n2")
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_PID = Path("/run/munge/munged.pid")


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _munge_answers() -> bool:
    if not shutil.which("munge"):
        return False
    made = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
    return made.returncode == 0 and subprocess.run(["unmunge"], input=made.stdout, capture_output=True, timeout=10).returncode == 0


def _start_munged() -> int | None:
    """munged started here (its pid), or None when one already answers."""
    if _munge_answers():
        return None
    if not MUNGE_KEY.exists():
        MUNGE_KEY.parent.mkdir(parents=True, exist_ok=True)
        MUNGE_KEY.write_bytes(os.urandom(1024))
        MUNGE_KEY.chmod(0o400)
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    subprocess.run(["munged", "--force"], check=True, capture_output=True, timeout=30)
    wait_until(_munge_answers, timeout=60, interval=0.2, what="munged to answer")
    return int(MUNGE_PID.read_text()) if MUNGE_PID.exists() else None


def write_conf(root: Path) -> Path:
    for d in ("state", "log", *(f"spool-{n}" for n in NODES)):
        (root / d).mkdir(parents=True, exist_ok=True)
    nodes = "\n".join(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={_port()} CPUs=1 State=UNKNOWN" for n in NODES)
    conf = root / "slurm.conf"
    conf.write_text(f"""ClusterName=pivot
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmctldPort={_port()}
AuthType=auth/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool-%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
ReturnToService=2
MpiDefault=none
KillWait=5
MinJobAge=600
{nodes}
PartitionName=main Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
""")
    return conf


@contextmanager
def slurm_cluster(root: Path) -> Iterator[Path]:
    """The cluster up (both nodes idle), its slurm.conf in $SLURM_CONF while it lasts."""
    missing = [b for b in ("slurmctld", "slurmd", "sbatch", "munged") if not shutil.which(b)]
    if missing:
        _unavailable(f"no one-machine Slurm here: {', '.join(missing)} not installed (apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        _unavailable("the one-machine Slurm runs as root (SlurmUser=root)")
    munged = _start_munged()
    conf = write_conf(root)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    try:
        subprocess.run(["slurmctld"], env=env, check=True, capture_output=True, timeout=60)
        for node in NODES:
            subprocess.run(["slurmd", "-N", node], env=env, check=True, capture_output=True, timeout=60)

        def idle() -> bool:
            out = subprocess.run(["sinfo", "-h", "-o", "%t %D"], env=env, capture_output=True, text=True, timeout=20).stdout
            return out.split() == ["idle", str(len(NODES))]

        wait_until(idle, timeout=60, interval=0.2, what=f"the nodes to be idle (see {root}/log)")
        yield conf
    finally:  # every job ended first: a node shut down under a running job would leave its steps behind
        jobs = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=20).stdout.split()
        if jobs:
            subprocess.run(["scancel", *jobs], env=env, capture_output=True, timeout=30)
        wait_until(
            lambda: not subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=20).stdout.split(),
            timeout=120,
            interval=0.2,
            what="the queue to empty",
        )
        subprocess.run(["scontrol", "shutdown"], env=env, capture_output=True, timeout=60)
        for pidfile in [root / "slurmctld.pid", *(root / f"slurmd-{n}.pid" for n in NODES)]:
            wait_until(functools.partial(_ended, pidfile), timeout=30, interval=0.2, what=f"{pidfile.name}'s process to end")
        if munged is not None:
            os.kill(munged, signal.SIGTERM)
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before


def _ended(pidfile: Path) -> bool:
    return not _alive(pidfile)


def _alive(pidfile: Path) -> bool:
    try:
        os.kill(int(pidfile.read_text()), 0)
    except (OSError, ValueError):
        return False
    return True

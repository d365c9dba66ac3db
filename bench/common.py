"""What the benchmarks share: the tree under test, medians, the load average, an OpenSSH sshd on loopback in front
of the simulated GPU host, processes' CPU time."""

from __future__ import annotations

import compileall
import functools
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def tree_env(tree: Path) -> dict[str, str]:
    """The environment that runs the console of `tree` (a checkout: this one, or an older one to compare with), with
    its bytecode cached as an installed wheel's is: a PYTHONDONTWRITEBYTECODE set where the bench runs would have every
    command compile pivot's modules from source, a cost no user's command pays."""
    _compiled(tree)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@functools.cache
def _compiled(tree: Path) -> None:
    """The tree's bytecode written once, before its first figure (pip compiles a wheel's as it installs it)."""
    compileall.compile_dir(tree / "console", quiet=1)


def median(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def load() -> float:
    return round(os.getloadavg()[0], 2)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_mib(pid: int | str, field: str = "VmRSS") -> float | None:
    """A field of /proc/PID/status (VmRSS, VmHWM: the peak) in MiB; None once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round((len(ordered) - 1) * q / 100))]


class SimHost:
    """`pivot demo --serve` (this tree's): 8 simulated GPUs and a simulated server, behind its own SSH server."""

    def __init__(self, root: Path, *, time_scale: float = 1.0, server: str = "baseline", traffic: bool = True):
        self.root = root
        argv = [
            sys.executable,
            "-m",
            "console",
            "demo",
            "--serve",
            "--dir",
            str(root),
            "--time-scale",
            str(time_scale),
            "--server",
            server,
            *([] if traffic else ["--no-traffic"]),
        ]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=tree_env(ROOT), cwd=ROOT)
        assert self.proc.stdout is not None
        lines = [self.proc.stdout.readline() for _ in range(2)]
        self.config = Path(next(line for line in lines if line.startswith("config: ")).split(": ", 1)[1].strip())
        self.workdir = root / "home" / ".pivot"
        deadline = time.monotonic() + 60
        while not (self.workdir / "server.json").exists():
            assert time.monotonic() < deadline, "the simulated server did not start"
            time.sleep(0.1)
        import json

        from console.sim.launch_server import READY_LINE

        self.server_port = json.loads((self.workdir / "server.json").read_text())["port"]
        while READY_LINE not in (self.workdir / "server.log").read_text(errors="replace"):  # loaded: it answers
            assert time.monotonic() < deadline, "the simulated server did not become ready"
            time.sleep(0.1)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class OpenSshHost:
    """OpenSSH's sshd on a loopback port whose sessions see the simulated host (its nvidia-smi, its GPU state, its
    server's files): a real OpenSSH host, with only the GPU faked. Its log counts the sessions opened."""

    def __init__(self, root: Path, sim: SimHost):
        with warnings.catch_warnings():  # cryptography 51 warns of DSA at asyncssh's import (as console/__init__.py says)
            warnings.simplefilter("ignore")
            import asyncssh

        root.mkdir(mode=0o700, parents=True)
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        host_key.write_private_key(str(root / "host_key"))
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key.write_private_key(str(root / "client_key"))
        (root / "host_key").chmod(0o600)
        (root / "client_key").chmod(0o600)
        (root / "authorized_keys").write_bytes(client_key.export_public_key())
        self.port = free_port()
        (root / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_key.export_public_key().decode().strip()}\n")
        path = os.pathsep.join([str(sim.root / "bin"), str(Path(sys.executable).parent), "/usr/bin", "/bin"])
        (root / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\nPidFile none\n"
            f"AuthorizedKeysFile {root / 'authorized_keys'}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nAllowTcpForwarding yes\n"
            "Subsystem sftp internal-sftp\nLogLevel VERBOSE\nMaxSessions 100\nMaxStartups 100\n"
            f"SetEnv PATH={path} PIVOT_SIM_HOME={sim.root / 'sim'} PYTHONPATH={ROOT}\n"
        )
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.log = root / "sshd.log"
        self.proc = subprocess.Popen([SSHD, "-D", "-E", str(self.log), "-f", str(root / "sshd_config")])
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "sshd did not listen"
                time.sleep(0.05)
        self.root, self.sim = root, sim

    def config(self, path: Path, campaign: Path, sweep: str = "") -> Path:
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
        path.write_text(
            f'default_host = "gpu"\ncampaign_dir = "{campaign}"\n\n[hosts.gpu]\nhostname = "127.0.0.1"\nport = {self.port}\n'
            f'user = "{user}"\nidentity = "{self.root / "client_key"}"\nknown_hosts = "{self.root / "known_hosts"}"\n'
            f'python = "{sys.executable}"\nworkdir = "{self.sim.workdir}"\nrole = "gpu"\n\n[sweep]\n{sweep}'
        )
        return path

    def sessions(self) -> int:
        """Sessions opened so far (each exec, shell or subsystem: 'Starting session' in sshd's verbose log)."""
        return self.log.read_text(errors="replace").count("Starting session") if self.log.exists() else 0

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)

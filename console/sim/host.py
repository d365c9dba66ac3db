"""The simulated GPU host: a real SSH server on loopback whose commands run as
real processes, with a fake `nvidia-smi` on their PATH and the simulated
SGLang server available to start, so that pivot reaches it through exactly
the code it uses for a real host.

`python -m console.sim.host DIR` (or `pivot demo --serve`) runs it until
SIGTERM or Ctrl-C and prints an `ssh ...` line and a `config: ...` line.
Everything lives under DIR:

    DIR/client_key, DIR/known_hosts, DIR/pivot.toml   what a client needs
    DIR/home/                                         the remote user's $HOME
    DIR/home/models/...                               the simulated model weights
    DIR/sim/                                          GPU state (see sim/state.py)
    DIR/bin/nvidia-smi                                the fake nvidia-smi
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import dataclasses
import json
import os
import pwd
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import asyncssh

from console.config import shipped
from console.sim import state
from console.sim.shell import Sessions
from console.sim.state import GpuSpec

PR_SET_CHILD_SUBREAPER = 36
MODELS = {"kimi-k2.5-int4": "DeepseekV3ForCausalLM", "kimi-k2.5-eagle3": "LlamaForCausalLMEagle3"}


def demo_profiles() -> Path:
    """The simulated host's shipped profiles (profiles/demo): offered only where a simulated host writes them."""
    return shipped("profiles") / "demo"


def import_root() -> Path:
    """The directory `console` is imported from (site-packages, or a source tree), for the host's processes."""
    return Path(__file__).resolve().parents[2]


class SimHost:
    def __init__(
        self, root: Path, *, gpus: GpuSpec = GpuSpec(), time_scale: float = 1.0, subreaper: bool = False, campaign_dir: Path | None = None
    ):
        """campaign_dir: where the console's runs, tasks and events go (default: inside root, gone with it)."""
        self.root = root
        self.campaign_dir = campaign_dir or root / "campaign"
        self.gpus = gpus
        self.time_scale = time_scale
        self.subreaper = subreaper
        self.home = root / "home"
        self.sim = root / "sim"
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.port = 0
        self.server_ports: dict[int, int] = {}  # the shipped demo profiles' port -> the one this host's copies use
        self._server: asyncssh.SSHAcceptor | None = None
        self.sessions = Sessions(self.env, self.home)
        self._reaper: asyncio.Task[None] | None = None
        self._clients: set[asyncssh.SSHServerConnection] = set()
        self.siblings: list[SimHost] = []  # other hosts served by this process (pivot demo --hosts): one reaper for all
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")

    # -- set-up ---------------------------------------------------------------
    def _prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        state.init_home(self.sim, self.gpus)
        bin_dir = self.root / "bin"
        bin_dir.mkdir(exist_ok=True)
        smi = bin_dir / "nvidia-smi"
        smi.write_text(f"#!{sys.executable}\nfrom console.sim.nvidia_smi import main\nraise SystemExit(main())\n")
        smi.chmod(0o755)
        for name, arch in MODELS.items():
            model = self.home / "models" / name
            model.mkdir(parents=True, exist_ok=True)
            (model / "config.json").write_text(json.dumps({"architectures": [arch], "simulated": True}))
        key_path = self.root / "client_key"
        self.client_key.write_private_key(str(key_path))
        key_path.chmod(0o600)

    def env(self) -> dict[str, str]:
        path = os.pathsep.join([str(self.root / "bin"), str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")])
        pythonpath = os.pathsep.join(p for p in (str(import_root()), os.environ.get("PYTHONPATH")) if p)
        return {
            "PATH": path,
            "HOME": str(self.home),
            "USER": self.user,
            "LOGNAME": self.user,
            "SHELL": "/bin/bash",
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "PYTHONPATH": pythonpath,
            "PYTHONUNBUFFERED": "1",
            state.ENV: str(self.sim),
            "PIVOT_SIM_TIME_SCALE": repr(self.time_scale),
            "PIVOT_SIM_HOST_PID": str(os.getpid()),
            # a Slurm login node's clients find their cluster's config here (the tests' one-machine cluster)
            **{k: v for k, v in os.environ.items() if k == "SLURM_CONF"},
        }

    async def start(self) -> None:
        self._prepare()
        if self.subreaper:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            self._reaper = asyncio.create_task(self._reap_adopted())
        authorized = asyncssh.import_authorized_keys(self.client_key.export_public_key().decode())
        host = self

        class _Sftp(asyncssh.SFTPServer):
            def map_path(self, path: bytes) -> bytes:  # relative paths start at the remote $HOME, as with sshd
                return path if path.startswith(b"/") else os.path.join(bytes(host.home), path)

        class _Server(asyncssh.SSHServer):
            def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
                self.conn = conn
                host._clients.add(conn)

            def connection_lost(self, exc: Exception | None) -> None:
                host._clients.discard(self.conn)

            def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
                return dest_host in ("127.0.0.1", "localhost", "::1")  # port forwards stay on loopback

        self._server = await asyncssh.listen(
            "127.0.0.1",
            self.port,
            server_factory=_Server,
            server_host_keys=[self.host_key],
            authorized_client_keys=authorized,
            process_factory=self.sessions,
            sftp_factory=_Sftp,
            allow_scp=False,
            encoding=None,
            line_editor=False,
            keepalive_interval=15,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._write_client_files()

    def _write_client_files(self) -> None:
        public = self.host_key.export_public_key().decode().strip()
        (self.root / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {public}\n")
        (self.root / "pivot.toml").write_text(
            "# written by pivot demo: the simulated GPU host\n"
            'default_host = "demo"\n'
            "simulated = true\n"
            f"campaign_dir = {json.dumps(str(self.campaign_dir))}\n"
            # a kept campaign keeps the profiles written for it (w), beside its own pivot.toml (console/cli/demo.py)
            + (
                f"profiles_dir = {json.dumps(str(self.campaign_dir.parent / 'profiles'))}\n"
                if self.root not in self.campaign_dir.parents
                else ""
            )
            + "\n"
            "[hosts.demo]\n"
            'hostname = "127.0.0.1"\n'
            f"port = {self.port}\n"
            f"user = {json.dumps(self.user)}\n"
            f"identity = {json.dumps(str(self.root / 'client_key'))}\n"
            f"known_hosts = {json.dumps(str(self.root / 'known_hosts'))}\n"
            f"python = {json.dumps(sys.executable)}\n"
            'workdir = "~/.pivot"\n'
            'role = "gpu"\n'
        )
        with open(self.root / "pivot.toml", "a") as f:
            # a whole sweep in about two minutes at the real calibration: one wave of short answers per level
            f.write('\n[sweep]\nmax_tokens = 64\nrequests = "c"\nmin_requests = 16\n')
        self._write_demo_profiles()

    def _write_demo_profiles(self) -> None:
        """The shipped demo profiles beside pivot.toml (where they win), on ports free on this machine: the simulated
        host shares the machine's loopback, so another demo may already serve on the shipped 30000 or 8000."""
        directory = self.root / "profiles"
        directory.mkdir(exist_ok=True)
        ports: dict[int, int] = {}
        for path in sorted(demo_profiles().glob("demo-*.toml")):
            text = path.read_text(encoding="utf-8")
            default_port = 8000 if "vllm" in path.stem else 30000
            port = ports.setdefault(default_port, free_port(default_port))
            head, table, rest = text.partition("\n[")  # top-level keys go before the first table
            (directory / path.name).write_text(f"{head}\nport = {port}\n{table}{rest}", encoding="utf-8")
        self.server_ports = ports

    @property
    def config_path(self) -> Path:
        return self.root / "pivot.toml"

    @property
    def ssh_command(self) -> str:
        return shlex.join(
            [
                "ssh",
                "-i",
                str(self.root / "client_key"),
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                f"UserKnownHostsFile={self.root / 'known_hosts'}",
                "-p",
                str(self.port),
                f"{self.user}@127.0.0.1",
            ]
        )

    def drop_clients(self) -> None:
        """Cut every client connection from the server side, as a network failure or a reboot would."""
        for conn in list(self._clients):
            conn.abort()
        self._clients.clear()

    # -- processes ------------------------------------------------------------
    def start_server(self, profile_name: str, port: int | None = None) -> int:
        """Start a server from a launch profile, detached, as an earlier console would have: with the
        same pid file, log and record in ~/.pivot, so that the console finds and adopts it.

        The reaper, not Popen, collects it when it dies (it is adopted like any orphan).
        """
        from console.server.profiles import load_profiles
        from console.server.scripts import LOG, PIDFILE, RECORD
        from console.server.state import ServerRecord

        profile = load_profiles(shipped("profiles"), demo_profiles(), self.root / "profiles").get(profile_name)
        port = port or profile.port
        profile = dataclasses.replace(profile, port=port)
        argv = [f"{self.home}/{a[2:]}" if a.startswith("~/") else a for a in profile.argv()]
        workdir = self.home / ".pivot"
        workdir.mkdir(mode=0o700, exist_ok=True)  # as the earlier console's first contact left it
        with open(workdir / LOG, "ab") as log:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env(), cwd=self.home, start_new_session=True
            )
        (workdir / PIDFILE).write_text(f"{proc.pid}\n")
        record = ServerRecord(
            profile.name,
            argv,
            proc.pid,
            state.proc_start_ticks(proc.pid),
            time.time(),
            profile.host,
            port,
            profile.kind,
            health=profile.health_paths,
        )
        (workdir / RECORD).write_text(json.dumps(dataclasses.asdict(record), indent=1))
        return proc.pid

    async def _reap_adopted(self) -> None:
        """As a subreaper we adopt the simulated server's orphans; reap them when they die."""
        me = os.getpid()
        while True:
            await asyncio.sleep(0.25)
            hosts = [self, *self.siblings]
            if any(h.sessions.spawning for h in hosts):
                continue  # a session's process may have ended before it was registered: look next time
            running = {pid for h in hosts for pid in h.sessions.running}  # each session waits for its own
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) in running:
                    continue
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                fields = stat[stat.rindex(")") + 2 :].split()
                if fields[0] == "Z" and int(fields[1]) == me:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(int(entry.name), os.WNOHANG)

    def _simulated_pids(self) -> set[int]:
        pids = {c["pid"] for c in state.live_claims(self.sim)} | {s["pid"] for s in state.live_servers(self.sim)}
        for pidfile in (self.home / ".pivot").rglob("*.pid") if (self.home / ".pivot").is_dir() else ():
            with contextlib.suppress(OSError, ValueError, IndexError):
                pids.add(int(pidfile.read_text().split()[0]))
        return pids

    async def close(self) -> None:
        """Stop serving and end every process this host started: sessions, servers, workers."""
        if self._server:
            self._server.close()
        for child in list(self.sessions.running.values()):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        for pid in self._simulated_pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.3)
        if self._reaper:
            self._reaper.cancel()


def free_port(preferred: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def serve_forever(host: SimHost, announce: bool = True, initial_server: str = "none", traffic: bool = False) -> None:
    from console.sim import traffic as demo_traffic

    await host.start()
    background = None
    if initial_server != "none":
        pid = host.start_server(f"demo-{initial_server}")
        port = host.server_ports[30000]
        if traffic:
            ticks = state.proc_start_ticks(pid)
            background = asyncio.create_task(demo_traffic.run(port, lambda: state.alive(pid, ticks)))
    if announce:
        print(host.ssh_command, flush=True)
        print(f"config: {host.config_path}", flush=True)
        print(
            f"a simulated GPU host of its own: `pivot --config {host.config_path}` opens a console on it, the ssh line "
            f"logs in; its campaign is {host.campaign_dir}",
            flush=True,
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        if background:
            background.cancel()
        await host.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pivot-sim-host", description="the simulated GPU host behind pivot demo")
    parser.add_argument("dir", type=Path)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--gpu-memory-mib", type=int, default=GpuSpec().memory_mib)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--server", choices=["none", "baseline", "eagle3"], default="none")
    args = parser.parse_args(argv)
    host = SimHost(args.dir, gpus=GpuSpec(count=args.gpus, memory_mib=args.gpu_memory_mib), time_scale=args.time_scale, subreaper=True)
    asyncio.run(serve_forever(host, initial_server=args.server))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

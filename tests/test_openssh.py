"""The SSH layer against OpenSSH's own sshd on a loopback port (CI installs openssh-server)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import stat
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncssh
import pytest

from console.config import HostSpec
from console.remote import Connection
from console.remote.errors import Disconnected, HostKeyUnknown, RemoteError
from console.remote.loop import RemoteLoop
from tests.conftest import free_port, wait_for, wait_until

SSHD = shutil.which("sshd") or next((p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.path.exists(p)), None)
if SSHD is None and os.environ.get("CI"):
    raise RuntimeError("CI must install openssh-server: the OpenSSH tests may not be skipped there")
pytestmark = [pytest.mark.sshd, pytest.mark.skipif(SSHD is None, reason="OpenSSH sshd is not installed (CI installs openssh-server)")]


class Sshd:
    def __init__(self, root: Path, port: int, proc: subprocess.Popen[bytes], spec: HostSpec):
        self.root, self.port, self.proc, self.spec = root, port, proc, spec


def start_sshd(root: Path, name: str = "openssh", log_level: str = "ERROR", rsa_too: bool = False) -> Sshd:
    """OpenSSH's sshd on a free loopback port, with a fresh host key pinned in its own known_hosts and a client key
    (rsa_too: an RSA host key besides, listed first)."""
    root.mkdir(mode=0o700)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(str(root / "host_key"))
    (root / "host_key").chmod(0o600)
    host_keys = f"HostKey {root / 'host_key'}\n"
    if rsa_too:
        asyncssh.generate_private_key("ssh-rsa", key_size=2048).write_private_key(str(root / "host_key_rsa"))
        (root / "host_key_rsa").chmod(0o600)
        host_keys = f"HostKey {root / 'host_key_rsa'}\n" + host_keys
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key.write_private_key(str(root / "client_key"))
    (root / "client_key").chmod(0o600)
    (root / "authorized_keys").write_bytes(client_key.export_public_key())
    port = free_port()
    (root / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode().strip()}\n")
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\n{host_keys}PidFile none\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nAllowTcpForwarding yes\n"
        f"Subsystem sftp internal-sftp\nLogLevel {log_level}\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    assert SSHD is not None  # the module is skipped without it
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(root / "sshd_config")], stderr=subprocess.PIPE)

    def listening() -> bool:
        try:
            with __import__("socket").create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "sshd exited"
            return False

    wait_until(listening, timeout=10, what="sshd to listen")
    import pwd

    spec = HostSpec(
        name=name,
        hostname="127.0.0.1",
        port=port,
        user=pwd.getpwuid(os.getuid()).pw_name,
        identity=str(root / "client_key"),
        known_hosts=str(root / "known_hosts"),
    )
    return Sshd(root, port, proc, spec)


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    server = start_sshd(tmp_path / "sshd")
    yield server
    server.proc.terminate()
    server.proc.wait(timeout=10)


@pytest.fixture
async def conn(sshd: Sshd) -> AsyncIterator[Connection]:
    c = Connection(sshd.spec)
    yield c
    await c.close()


async def test_run_against_openssh(conn: Connection) -> None:
    result = await conn.run(["sh", "-c", "echo out; echo err >&2; exit 4"])
    assert (result.exit_status, result.stdout, result.stderr) == (4, "out\n", "err\n")
    hostile = "a b; $(echo pwned) 'q' \"d\" \n`id`"
    assert (await conn.run(["printf", "[%s]", hostile])).stdout == f"[{hostile}]"


async def test_the_first_commands_of_a_connection_make_a_new_workdir_themselves(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Commands that start together on a new connection (a headless command's, a host without telemetry's first
    ones) make the workdir in their own sessions, with no look before them, and it is said once."""
    server = start_sshd(tmp_path / "sshd", log_level="VERBOSE")  # its log names each session it starts
    workdir = tmp_path / "work"
    try:
        c = Connection(dataclasses.replace(server.spec, workdir=str(workdir)))
        try:
            done = await asyncio.gather(*(c.run(["pwd"], cwd=str(workdir)) for _ in range(3)))
            await c.round_trip()  # its session reached sshd
        finally:
            await c.close()
    finally:
        server.proc.terminate()
        log = server.proc.communicate(timeout=10)[1].decode(errors="replace")
    assert [(r.exit_status, r.stdout.strip(), r.stderr) for r in done] == [(0, str(workdir), "")] * 3
    assert caplog.text.count("created its workdir") == 1
    sessions = log.count("Starting session")
    assert sessions == 4  # the three commands and the link's round trip (`cat`); a look before them would be one
    # more, a look for each three


@contextlib.asynccontextmanager
async def workdir_link(tmp_path: Path, workdir: Path) -> AsyncIterator[Connection]:
    """A connection to a fresh sshd whose host spec names `workdir`; closed, and the sshd ended, after."""
    server = start_sshd(tmp_path / "sshd")
    try:
        c = Connection(dataclasses.replace(server.spec, workdir=str(workdir)))
        try:
            yield c
        finally:
            await c.close()
    finally:
        server.proc.terminate()
        server.proc.wait(timeout=10)


async def test_a_stream_makes_a_new_workdir_and_keeps_its_stderr_its_own(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The telemetry's stream is a console's first command: it makes the workdir itself, and the guard's word that
    it did is the log's, not a line of the command's stderr."""
    workdir = tmp_path / "work"
    async with workdir_link(tmp_path, workdir) as c:
        stream = await c.stream(["sh", "-c", "pwd; echo its own >&2"], cwd=str(workdir))
        lines = [line async for line in stream]
        assert await stream.finished() == 0
        await stream.stop()
    assert lines == [str(workdir)] and list(stream.stderr_tail) == ["its own"]
    assert stat.S_IMODE(workdir.stat().st_mode) == 0o700
    assert caplog.text.count(f"created its workdir {workdir}") == 1


async def test_a_probe_in_a_workdir_that_cannot_be_made_says_why(tmp_path: Path) -> None:
    """The server's poll is a shell kept open in the workdir (RemoteLoop): where the workdir cannot be made, the poll
    says so with mkdir's reason, not as a link that dropped."""
    blocker = tmp_path / "host"
    blocker.write_text("not a directory")
    workdir = blocker / "work"
    async with workdir_link(tmp_path, workdir) as c:
        with pytest.raises(RemoteError, match=r"cannot create the workdir .*Not a directory") as raised:
            await RemoteLoop(c, "echo hi", cwd=str(workdir)).ask()
        assert not isinstance(raised.value, Disconnected)


async def test_a_workdir_that_could_not_be_made_is_tried_again(tmp_path: Path) -> None:
    """A workdir that cannot be made (a file in its place) fails the commands that needed it, each with mkdir's
    reason; the next command tries again, and works once the way is clear."""
    blocker = tmp_path / "host"
    blocker.write_text("not a directory")
    workdir = blocker / "work"
    async with workdir_link(tmp_path, workdir) as c:
        failed = await asyncio.gather(*(c.run(["pwd"], cwd=str(workdir)) for _ in range(2)), return_exceptions=True)
        assert all(isinstance(e, RemoteError) and "cannot create the workdir" in str(e) for e in failed), failed
        assert all("Not a directory" in str(e) for e in failed), failed  # mkdir's own reason
        blocker.unlink()
        assert (await c.run(["pwd"], cwd=str(workdir))).stdout.strip() == str(workdir)


async def test_stream_and_stop_against_openssh(conn: Connection) -> None:
    stream = await conn.stream(["sh", "-c", "echo $$; while true; do echo tick; sleep 0.05; done"])
    pid = int(await stream.readline() or 0)
    assert [await stream.readline() for _ in range(3)] == ["tick"] * 3
    await stream.stop()
    await wait_for(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid))


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


async def test_forward_and_upload_against_openssh(conn: Connection) -> None:
    async def hello(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello from behind the forward\n")
        writer.close()

    server = await asyncio.start_server(hello, "127.0.0.1", 0)
    forward = await conn.forward("127.0.0.1", server.sockets[0].getsockname()[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", forward.local_port)
    assert await reader.readline() == b"hello from behind the forward\n"
    writer.close()
    forward.close()
    server.close()
    target = f"/tmp/pivot-openssh-upload-{os.getpid()}"
    await conn.upload(b"payload", target, mode=0o600)
    assert (await conn.run(["cat", target])).stdout == "payload"
    await conn.run(["rm", "-f", target])


async def test_openssh_unknown_key_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("")
    import dataclasses

    conn = Connection(dataclasses.replace(sshd.spec, known_hosts=str(tmp_path / "empty")))
    with pytest.raises(HostKeyUnknown):
        await conn.connected(timeout=10)
    await conn.close()


def test_a_host_behind_a_configured_jump_host_is_reached_the_same_way_headless_and_in_the_console(tmp_path: Path) -> None:
    """`jump = "jump"` names another configured host: every command tunnels through that host's connection (it used to
    work only in the console; headless, "jump" was taken as a hostname)."""
    import sys

    from console import config
    from console.session import Session

    jump, target = start_sshd(tmp_path / "jump", "jump", "DEBUG1"), start_sshd(tmp_path / "gpu", "gpu")
    try:
        (tmp_path / "pivot.toml").write_text(
            f'default_host = "gpu"\ncampaign_dir = "{tmp_path / "campaign"}"\n'
            f'[hosts.jump]\nhostname = "127.0.0.1"\nport = {jump.port}\nuser = "{jump.spec.user}"\n'
            f'identity = "{jump.root / "client_key"}"\nknown_hosts = "{jump.root / "known_hosts"}"\n'
            f'[hosts.gpu]\nhostname = "127.0.0.1"\nport = {target.port}\nuser = "{target.spec.user}"\njump = "jump"\n'
            f'identity = "{target.root / "client_key"}"\nknown_hosts = "{target.root / "known_hosts"}"\n'
        )
        ping = subprocess.run(
            [sys.executable, "-m", "console", "--config", str(tmp_path / "pivot.toml"), "-v", "ping", "gpu"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ping.returncode == 0, ping.stderr
        assert ping.stdout.startswith("gpu: up") and "Opening SSH connection to jump" not in ping.stderr

        async def console_way() -> str:
            async with Session(config.load(tmp_path / "pivot.toml"), "gpu", via="console") as session:
                await session.connect()
                return (await session.conn.run(["sh", "-c", "echo $SSH_CONNECTION"])).stdout

        assert asyncio.run(console_way()).split()[0] == "127.0.0.1"
    finally:
        for server in (jump, target):
            server.proc.terminate()
            server.proc.wait(timeout=10)
    assert jump.proc.stderr is not None
    forwarded = jump.proc.stderr.read().decode(errors="replace")
    # both ways went through the jump host: it forwarded a connection to the target each time
    assert forwarded.count(f"target 127.0.0.1 port {target.port}") >= 2, forwarded[-2000:]


def test_trust_reaches_a_host_behind_a_configured_jump_and_pins_its_ed25519_key(tmp_path: Path) -> None:
    """The host offers RSA first and ed25519 too: the key pinned is the one OpenSSH's client prefers (it used to pin
    RSA), fetched through the jump host's own connection (it used to take "jump" for a hostname)."""
    import sys

    jump, target = start_sshd(tmp_path / "jump", "jump"), start_sshd(tmp_path / "gpu", "gpu", rsa_too=True)
    fresh = tmp_path / "gpu_known_hosts"  # the target's key is not known yet
    try:
        (tmp_path / "pivot.toml").write_text(
            f'[hosts.jump]\nhostname = "127.0.0.1"\nport = {jump.port}\nuser = "{jump.spec.user}"\n'
            f'identity = "{jump.root / "client_key"}"\nknown_hosts = "{jump.root / "known_hosts"}"\n'
            f'[hosts.gpu]\nhostname = "127.0.0.1"\nport = {target.port}\nuser = "{target.spec.user}"\njump = "jump"\n'
            f'identity = "{target.root / "client_key"}"\nknown_hosts = "{fresh}"\n'
        )
        trust = subprocess.run(
            [sys.executable, "-m", "console", "--config", str(tmp_path / "pivot.toml"), "trust", "gpu"],
            input="yes\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        for server in (jump, target):
            server.proc.terminate()
            server.proc.wait(timeout=10)
    assert trust.returncode == 0, trust.stderr
    assert "offers a ssh-ed25519 key" in trust.stdout
    # the test's own known_hosts for the target holds its ed25519 key: trust pinned exactly that line
    assert fresh.read_text() == (target.root / "known_hosts").read_text()

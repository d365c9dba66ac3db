"""Item 2: remote output is bytes. One invalid UTF-8 byte in the server log must not drop the SSH link."""

from __future__ import annotations

from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection, ConnState
from console.remote.streams import RemoteStream
from console.server.lifecycle import ServerLifecycle
from console.server.state import ServerState
from tests.conftest import wait_for
from tests.faults.conftest import FakeServer, Host, pivot

BAD = b"bad \xff\xfe\n"
SHOWN = "bad \ufffd\ufffd"


async def test_an_invalid_byte_in_the_log_keeps_the_link_and_the_state(host: Host, managed_server: FakeServer) -> None:
    with open(managed_server.log, "ab") as f:
        f.write(BAD)
    spec = host.spec
    conn = Connection(spec)
    try:
        lifecycle = ServerLifecycle(conn, spec, RemoteTelemetry(conn, spec), idle_threshold_mib=1024, grace_s=1)
        status = await lifecycle.poll()  # its probe reads the log's last line: the bad one
        assert status.state == ServerState.READY and status.last_line == SHOWN
        assert (await lifecycle.log_tail(5))[-1] == SHOWN
        async with await lifecycle.follow_log(5) as stream:
            assert isinstance(stream, RemoteStream)  # a host's log: its remote `tail -F`
            assert [await stream.readline() for _ in range(2)] == ["The server is fired up and ready to roll!", SHOWN]
        # still the first connection: nothing dropped it
        assert conn.state == ConnState.UP and (await conn.run(["echo", "still here"])).stdout == "still here\n"
    finally:
        await conn.close()


async def test_server_logs_and_status_over_a_log_with_an_invalid_byte(host: Host, managed_server: FakeServer) -> None:
    with open(managed_server.log, "ab") as f:
        f.write(BAD)
    status, out, err = await pivot(host.config_path, "server", "logs")
    assert status == 0 and out.splitlines()[-1] == SHOWN, err
    status, out, err = await pivot(host.config_path, "server", "status")
    assert status == 0 and out.startswith("ready baseline"), out + err


async def test_a_split_multibyte_character_and_a_bad_byte_in_one_stream(host: Host) -> None:
    conn = Connection(host.spec)
    try:
        # 'é' cut between two writes, then an invalid byte, then more output on the same channel
        script = "printf '\\303'; sleep 0.2; printf '\\251 ok\\n\\377 next\\n'; echo done"
        async with await conn.stream(["sh", "-c", script]) as stream:
            lines = [await stream.readline() for _ in range(3)]
        assert lines == ["é ok", "\ufffd next", "done"]
        await wait_for(lambda: conn.state == ConnState.UP)
    finally:
        await conn.close()

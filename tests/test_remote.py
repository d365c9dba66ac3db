"""The SSH layer against the simulated host's in-process asyncssh server."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import asyncssh
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console import config
from console.remote import Connection, ConnectionEvent, ConnState
from console.remote.errors import (
    AuthFailed,
    CommandTimeout,
    ConnectionRefused,
    DnsError,
    HostKeyMismatch,
    HostKeyUnknown,
    UnknownHost,
)
from console.sim.host import SimHost
from tests.conftest import free_port, wait_for


@pytest.fixture
async def conn(sim_config: config.Config) -> AsyncIterator[Connection]:
    c = Connection(sim_config.host("demo"))
    yield c
    await c.close()


async def test_run_returns_exit_status_stdout_and_stderr(conn: Connection) -> None:
    result = await conn.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok


async def test_run_sees_the_simulated_host(conn: Connection) -> None:
    result = await conn.run(["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"])
    assert result.ok
    assert result.stdout.splitlines() == [f"{i}, NVIDIA H200" for i in range(8)]


async def test_run_in_a_directory_with_environment(conn: Connection) -> None:
    result = await conn.run(["sh", "-c", 'pwd; echo "$GREETING"'], cwd="~/models", env={"GREETING": "hello $(world)"})
    assert result.stdout.splitlines()[0].endswith("/home/models")
    assert result.stdout.splitlines()[1] == "hello $(world)"


async def test_run_timeout_raises_and_ends_the_remote_command(conn: Connection) -> None:
    with pytest.raises(CommandTimeout, match=r"did not finish within 0\.5 s"):
        await conn.run(["sleep", "37.25"], timeout=0.5)
    ps = lambda: conn.run(["sh", "-c", "ps -eo args | grep -c '^sleep 37.25' || true"])
    await wait_for(lambda: _no_match(ps))


async def _no_match(ps) -> bool:  # type: ignore[no-untyped-def]
    return (await ps()).stdout.strip() == "0"


async def test_stream_yields_lines_and_stop_ends_the_remote_command(conn: Connection) -> None:
    script = 'echo $$; i=0; while true; do echo "line $i"; i=$((i+1)); sleep 0.02; done'
    stream = await conn.stream(["sh", "-c", script])
    pid = int(await stream.readline() or 0)
    lines = [await stream.readline() for _ in range(5)]
    assert lines == [f"line {i}" for i in range(5)]
    await stream.stop()
    check = lambda: conn.run(["sh", "-c", f"kill -0 {pid} 2>/dev/null && echo alive || echo gone"])
    await wait_for(lambda: _says(check, "gone"))


async def _says(check, word: str) -> bool:  # type: ignore[no-untyped-def]
    return (await check()).stdout.strip() == word


async def test_stream_as_async_iterator_ends_with_the_command(conn: Connection) -> None:
    async with await conn.stream(["sh", "-c", "printf 'a\\nb\\nc\\n'"]) as stream:
        assert [line async for line in stream] == ["a", "b", "c"]


async def test_upload_writes_the_file_atomically_with_its_mode(conn: Connection) -> None:
    await conn.upload(b"#!/bin/sh\necho uploaded\n", "~/.pivot/agent/run.sh", mode=0o755)
    result = await conn.run(["sh", "-c", "stat -c %a ~/.pivot/agent/run.sh; ~/.pivot/agent/run.sh; ls ~/.pivot/agent"])
    assert result.stdout.splitlines() == ["755", "uploaded", "run.sh"]


async def test_forward_carries_a_local_port_to_a_remote_service(conn: Connection) -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"echo:" + await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        forward = await conn.forward("127.0.0.1", port)
        reader, writer = await asyncio.open_connection("127.0.0.1", forward.local_port)
        writer.write(b"ping\n")
        assert await reader.readline() == b"echo:ping\n"
        writer.close()
        forward.close()
    finally:
        server.close()


async def test_reconnects_after_the_server_drops_the_connection(conn: Connection, sim_host: SimHost) -> None:
    events: list[ConnectionEvent] = []
    conn.add_listener(events.append)
    assert await conn.round_trip() is not None
    assert conn.last_event.state == ConnState.UP and conn.last_event.rtt_s is not None

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readline())
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    forward = await conn.forward("127.0.0.1", server.sockets[0].getsockname()[1])
    sim_host.drop_clients()
    await wait_for(lambda: any(e.state == ConnState.DOWN for e in events))
    await wait_for(lambda: events[-1].state == ConnState.UP, timeout=15)
    states = [e.state for e in events]
    assert states.index(ConnState.DOWN) < len(states) - 1 - states[::-1].index(ConnState.UP)
    assert (await conn.run(["echo", "back"])).stdout == "back\n"
    # the forward came back on the same local port
    reader, writer = await asyncio.open_connection("127.0.0.1", forward.local_port)
    writer.write(b"still here\n")
    assert await reader.readline() == b"still here\n"
    writer.close()
    server.close()


async def test_unknown_host_key_is_refused_and_not_retried(sim_config: config.Config, tmp_path) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    spec = dataclasses.replace(sim_config.host("demo"), known_hosts=str(empty))
    conn = Connection(spec)
    with pytest.raises(HostKeyUnknown, match="pivot trust demo"):
        await conn.connected(timeout=10)
    assert conn.state == ConnState.FAILED
    assert empty.read_text() == ""  # nothing was accepted
    await conn.close()


async def test_changed_host_key_is_refused(sim_config: config.Config, sim_host: SimHost, tmp_path) -> None:  # type: ignore[no-untyped-def]
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sim_host.port} {other}\n")
    conn = Connection(dataclasses.replace(sim_config.host("demo"), known_hosts=str(known)))
    with pytest.raises(HostKeyMismatch, match="HOST KEY CHANGED"):
        await conn.connected(timeout=10)
    await conn.close()


async def test_authentication_failure_is_one_clear_error(sim_config: config.Config, tmp_path) -> None:  # type: ignore[no-untyped-def]
    stranger = tmp_path / "stranger_key"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(stranger))
    conn = Connection(dataclasses.replace(sim_config.host("demo"), identity=str(stranger)))
    with pytest.raises(AuthFailed, match="authentication failed"):
        await conn.connected(timeout=10)
    assert conn.state == ConnState.FAILED
    await conn.close()


async def test_connection_refused_is_retried_with_backoff(sim_config: config.Config) -> None:
    conn = Connection(dataclasses.replace(sim_config.host("demo"), port=free_port()))
    events: list[ConnectionEvent] = []
    conn.add_listener(events.append)
    with pytest.raises(ConnectionRefused, match="connection refused"):
        await conn.connected(timeout=10, fail_fast=True)
    assert events[-1].state == ConnState.RECONNECTING and events[-1].retry_in_s == 1.0
    assert "reconnecting in 1 s" in events[-1].describe()
    await conn.close()


async def test_dns_failure_is_named(sim_config: config.Config) -> None:
    conn = Connection(dataclasses.replace(sim_config.host("demo"), hostname="no-such-host.invalid"))
    with pytest.raises(DnsError, match=r"cannot resolve 'no-such-host\.invalid'"):
        await conn.connected(timeout=10, fail_fast=True)
    await conn.close()


def test_unknown_host_name_lists_the_configured_ones(sim_config: config.Config) -> None:
    with pytest.raises(UnknownHost, match=r"unknown host 'gpu9' \(configured: demo\)"):
        sim_config.host("gpu9")


hostile = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=40) | st.sampled_from(
    ["$(touch /tmp/pwned)", "`id`", "a; rm -rf ~", "'\"'\"'", "line1\nline2", "*", "~", "-n", "$HOME", "a b  c", "\\"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=hostile)
async def test_hostile_values_arrive_verbatim_as_one_argument(conn: Connection, value: str) -> None:
    result = await conn.run(["printf", "[%s]", value], env={"PIVOT_VALUE": value})
    assert result.stdout == f"[{value}]"
    echoed = await conn.run(["sh", "-c", 'printf "[%s]" "$PIVOT_VALUE"'], env={"PIVOT_VALUE": value})
    assert echoed.stdout == f"[{value}]"

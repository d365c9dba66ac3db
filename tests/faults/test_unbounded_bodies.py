"""Issue 21, C: what a server sends is read within bounds. A health endpoint whose body never ends answers a poll by
its status alone; a model name inside a gzip bomb is not read past a MiB; a completions endpoint that redirects fails
its requests with the reason (no client of pivot's follows a redirect); a stream of chunks without content ends at the
stream's bound."""

from __future__ import annotations

import asyncio
import zlib

from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from console.server.lifecycle import ServerLifecycle
from console.server.state import ServerState
from console.untrusted import visible
from tests.faults.conftest import Host, serving
from tests.faults.test_hostile_server import errors, hostile, sweep  # noqa: F401  (hostile: a fixture)


def _bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip
    zeros = b"0" * (1 << 20)
    return b"".join([packer.compress(b'{"model_path": "'), *(packer.compress(zeros) for _ in range(64)), packer.flush()])


async def test_endless_and_inflating_answers_neither_hang_nor_grow_a_poll(host: Host) -> None:
    bomb = _bomb()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                if head.startswith("GET /ready"):
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    while True:  # a body that never ends
                        writer.write(b"400\r\n" + b"x" * 1024 + b"\r\n")
                        await writer.drain()
                        await asyncio.sleep(0.001)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Type: application/json\r\n"
                    b"Content-Length: " + str(len(bomb)).encode() + b"\r\n\r\n" + bomb
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async with serving(host, answer, profile="hostile", health=["/ready"]):
        conn = Connection(host.spec)
        try:
            lifecycle = ServerLifecycle(conn, host.spec, RemoteTelemetry(conn, host.spec), idle_threshold_mib=1024, grace_s=1)
            status = await asyncio.wait_for(lifecycle.poll(), 60)
            assert status.state == ServerState.READY  # by its status: the endless body was never read
            assert status.model is None  # the bomb was not inflated past the bound
            await lifecycle.close()
        finally:
            await conn.close()


def test_a_redirect_from_the_completions_endpoint_fails_the_request(hostile, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    status, events, _ = sweep(hostile("redirect"), tmp_path)
    assert status == 3 and errors(events) and all(e.startswith("HTTP 307") for e in errors(events))


def test_chunks_without_content_end_at_the_streams_bound(hostile, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    status, events, _ = sweep(hostile("empty_endless"), tmp_path)
    assert errors(events) and all("went on past 80 chunks" in visible(e) for e in errors(events))
    assert status == 3

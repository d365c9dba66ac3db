"""The simulated llama-server (console/sim/llama_server.py) does what the real one does to a client (issue 20):
it closes a kept-alive connection after a stream, and drafts in bursts of one-token chunks with its own timings.
pivot's load generator loses no request to the first and measures the second per token, with its acceptance."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from console.settings import SweepSettings
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run
from tests.conftest import free_port


@pytest.fixture
def llama_server(tmp_path: Path) -> Iterator[object]:
    procs: list[subprocess.Popen[bytes]] = []
    (tmp_path / "m.gguf").write_bytes(b"GGUF")

    def start(*flags: str) -> str:
        port = free_port()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "console.sim.llama_server",
                "-m",
                str(tmp_path / "m.gguf"),
                "--port",
                str(port),
                "-np",
                "8",
                "--metrics",
                "--time-scale",
                "5",
                *flags,
            ],
            stdout=subprocess.PIPE,
        )
        procs.append(proc)
        assert proc.stdout is not None
        while b"listening on" not in proc.stdout.readline():
            assert proc.poll() is None
        return f"http://127.0.0.1:{port}"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


async def _plain_client(url: str, c: int, n: int) -> list[str]:
    """A client that leaves each stream at [DONE] and reuses its connections, as aiohttp's pool does."""
    async with aiohttp.ClientSession(url) as session:
        failures: list[str] = []
        todo = iter(range(n))

        async def slot() -> None:
            for _ in todo:
                try:
                    async with session.post("/v1/completions", json={"prompt": "x", "max_tokens": 8, "stream": True}) as r:
                        async for line in r.content:
                            if line.strip() == b"data: [DONE]":
                                break
                except aiohttp.ClientError as e:
                    failures.append(type(e).__name__)

        await asyncio.gather(*(slot() for _ in range(c)))
        return failures


def sweep(url: str, tmp_path: Path, settings: SweepSettings) -> list[dict]:
    run = create_run(tmp_path / "campaign", RunMeta(profile="ls", kind="llamacpp", settings=settings.to_dict()))
    done = subprocess.run(
        [sys.executable, "-m", "console.sweep.loadgen", "--url", url, "--run-dir", str(run.dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in (run.dir / "events.jsonl").read_text().splitlines()]  # as kept


async def test_it_closes_a_kept_alive_connection_under_the_next_request(llama_server) -> None:  # type: ignore[no-untyped-def]
    failures = await _plain_client(llama_server(), 2, 12)
    assert failures and set(failures) <= {"ClientOSError", "ServerDisconnectedError"}


def test_the_load_generator_sends_such_a_request_again_once_and_loses_none(llama_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    events = sweep(llama_server(), tmp_path, SweepSettings(levels=(1, 2, 4), requests=8, max_tokens=16, input_tokens=16))
    requests = [e for e in events if e["type"] == "request"]
    assert len(requests) == 32 and not [e["error"] for e in requests if e["error"]]  # C = 1 again at the end: 8 more
    assert any(e.get("retried") for e in requests)
    levels = [e for e in events if e["type"] == "level_done"]
    assert sum(e["retried"] for e in levels) == sum(bool(e.get("retried")) for e in requests)


def test_a_drafting_server_is_measured_per_token_with_its_acceptance(llama_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    events = sweep(
        llama_server("--spec-type", "ngram-simple"), tmp_path, SweepSettings(levels=(1, 2), requests=6, max_tokens=32, input_tokens=16)
    )
    started = next(e for e in events if e["type"] == "sweep_started")
    assert started["prompts"]["counted_by"] == "the server's /tokenize"  # as long as asked, in its own tokens
    for level in (e for e in events if e["type"] == "level_done"):
        assert not level["lagging"]  # its bursts are the server's doing, not a late client
        assert level["itl_p50"] > 0.001  # per token over arrivals, not the microseconds inside a burst
        assert 0.5 < level["server"]["spec_accept_rate"] <= 1.0
    chunks = next(e for e in events if e["type"] == "request")["chunks"]
    # bursts: several chunks at once (those of one read are kept as one, of their tokens together)
    assert any(n > 1 for _, n in chunks) or len({round(t, 3) for t, _ in chunks}) < len(chunks)

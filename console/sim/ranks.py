"""The simulated engines across nodes: rank 0 listens on the rendezvous address and serves only once every other
rank has reached it; a rank above 0 connects to it, runs its share of the workers and serves no API. As the real
engines do (console/server/multinode.py says where each was read):

- rank 0 stopped: it tells every other rank to shut down, and they end (SGLang's ShutdownReq broadcast);
- any other rank gone without that: rank 0 fails (the collective's peer is gone), as does a rank whose rank 0
  is gone; a failed rank ends without stopping its workers, which stay behind holding GPU memory;
- SGLang's rank above 0 ignores SIGTERM (it waits for rank 0) and answers /health from a dummy server on
  --host/--port when that port is free (a daemon thread: a port in use only ends that thread); vLLM's is headless.

The rendezvous is one TCP connection per rank to rank 0: `rank R` from the rank, `shutdown` from rank 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from console.sim.openai_app import dummy_health_app

RETRY_S = 1.0


def split_address(address: str) -> tuple[str, int]:
    """HOST:PORT, or [IPV6]:PORT."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass
class Leader:
    """Rank 0's side: the other ranks' connections."""

    nnodes: int
    log: Callable[[str], None]
    peers: dict[int, asyncio.StreamWriter] = field(default_factory=dict)
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    lost_rank: int | None = None
    all_in: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.Server | None = None
    _shutting_down: bool = False

    async def listen(self, address: str) -> None:
        host, port = split_address(address)
        self._server = await asyncio.start_server(self._joined, host or "0.0.0.0", port)
        if self.nnodes == 1:
            self.all_in.set()

    async def _joined(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        words = (await reader.readline()).decode(errors="replace").split()
        if len(words) != 2 or words[0] != "rank" or not words[1].isdigit():
            writer.close()
            return
        rank = int(words[1])
        self.peers[rank] = writer
        self.log(f"node_rank {rank} joined the process group ({len(self.peers) + 1} of {self.nnodes} nodes)")
        if len(self.peers) == self.nnodes - 1:
            self.all_in.set()
        await reader.read()  # until the rank's end
        if not self._shutting_down:
            self.lost_rank = rank
            self.lost.set()

    def shutdown(self) -> None:
        """Tell every other rank to end (SGLang's ShutdownReq, vLLM's executor shutdown)."""
        self._shutting_down = True
        for writer in self.peers.values():
            with contextlib.suppress(OSError, RuntimeError):
                writer.write(b"shutdown\n")
                writer.close()
        if self._server is not None:
            self._server.close()


async def follow_leader(address: str, rank: int, log: Callable[[str], None]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to rank 0, again every second until it listens (torch.distributed's store waits the same way)."""
    host, port = split_address(address)
    said = 0.0
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(f"rank {rank}\n".encode())
            await writer.drain()
            return reader, writer
        except OSError:
            if time.monotonic() - said > 10:
                log(f"waiting for node_rank 0 at {address}")
                said = time.monotonic()
            await asyncio.sleep(RETRY_S)


async def run_follower(
    address: str, rank: int, *, engine: str, host: str, port: int, ready_lines: list[str], load_s: float, log: Callable[[str], None]
) -> str:
    """A rank above 0, once its workers run: joined to rank 0 until it says shutdown ("shutdown") or is gone
    ("leader-lost"). engine: "sglang" (dummy /health, SIGTERM ignored) or "vllm" (headless, SIGTERM ends it)."""
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    if engine == "sglang":
        loop.add_signal_handler(
            signal.SIGTERM,
            log,
            f"SIGTERM received on node_rank {rank}; waiting for the rank-0 ShutdownReq broadcast to stop the schedulers.",
        )
    else:
        loop.add_signal_handler(signal.SIGTERM, ended.set)
    if engine == "vllm":  # vllm/entrypoints/cli/serve.py run_headless
        log(
            f"Launching vLLM (v0.33.0-pivot-sim) headless multiproc executor, with head node address {address} for "
            "torch.distributed process group."
        )
    reader, writer = await follow_leader(address, rank, log)
    log(f"node_rank {rank} joined the process group at {address}")
    await asyncio.sleep(load_s)
    health = asyncio.create_task(dummy_health_app(host, port, log)) if engine == "sglang" else None
    for line in ready_lines:
        log(line)
    said = asyncio.create_task(reader.readline())
    terminated = asyncio.create_task(ended.wait())
    await asyncio.wait({said, terminated}, return_when=asyncio.FIRST_COMPLETED)
    for task in (health, terminated, said):
        if task is not None:
            task.cancel()
    writer.close()
    if terminated.done() and not terminated.cancelled():
        return "SIGTERM"
    return "shutdown" if said.done() and not said.cancelled() and said.result().strip() == b"shutdown" else "leader-lost"

"""A server across nodes, as its rank 0's host manages it: every node checked before anything starts, a rank
started on each, the other ranks watched at each poll (any rank's end without a stop is the server's crash), every
rank stopped with its own host's group kill and release check, and every rank's log followed as one.

Each rank is an ordinary managed server on its own host (its record says its rank and the nodes), reached through
that host's own lifecycle from `Peers`; the engines' flags are console/server/multinode.py's."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from console.remote.errors import RemoteError
from console.remote.streams import LineStream
from console.server.checks import Check
from console.server.multinode import Rank
from console.server.profiles import Profile
from console.server.state import LifecycleError, PreflightFailed, ServerRecord, ServerState, StopReport

if TYPE_CHECKING:
    from console.server.lifecycle import ServerLifecycle

CRASH_LINES = 25  # of each ended rank's log, in a crash's tail


class Peers(Protocol):
    """The hosts of pivot.toml, as a server across nodes needs them (console/session.py gives them)."""

    def ranks(self, profile: Profile) -> list[Rank]: ...
    def lifecycle_of(self, host: str) -> ServerLifecycle: ...


def _peers(leader: ServerLifecycle, names: tuple[str, ...]) -> list[ServerLifecycle]:
    assert leader.peers is not None
    return [leader.peers.lifecycle_of(name) for name in names]


async def preflight_ranks(leader: ServerLifecycle, ranks: list[Rank], *, skip: frozenset[str]) -> list[Check]:
    """Every node's checks at once, each named with its node: the launcher, the model path, the GPUs, the flags with
    the rank's own, the ports the rank binds, and on the first node the ranks' rendezvous port."""
    lifecycles = [leader, *_peers(leader, tuple(r.host.name for r in ranks[1:]))]

    async def check(lifecycle: ServerLifecycle, rank: Rank) -> list[Check]:
        p = rank.profile
        binds: tuple[tuple[str, str, int], ...] = (("port free", p.host, p.port),) if rank.serves_http else ()
        if rank.rank == 0:
            binds += (("rendezvous port free", "0.0.0.0", p.dist_port),)
        checks = await lifecycle.rank_preflight(p, skip=skip, binds=binds)
        if not rank.serves_http and "port-free" not in skip:
            checks.append(Check("port free", True, f"rank {rank.rank} runs headless: it binds no port"))
        return checks

    found = await asyncio.gather(*(check(lc, r) for lc, r in zip(lifecycles, ranks, strict=True)))
    return [replace(c, name=f"{c.name} on {r.host.name}", node=r.host.name)
            for r, checks in zip(ranks, found, strict=True) for c in checks]


async def start_ranks(leader: ServerLifecycle, ranks: list[Rank], *, force: bool, skip: frozenset[str]) -> list[Check]:
    """Check every node, then start rank 0 here and each other rank on its node. A rank that cannot start stops the
    ranks already started."""
    if ranks[0].host.name != leader.spec.name:
        raise LifecycleError(f"{ranks[0].profile.name} runs rank 0 on {ranks[0].host.name}: start it from there "
                             f"(pivot --host {ranks[0].host.name})")
    peers = _peers(leader, tuple(r.host.name for r in ranks[1:]))
    for peer in peers:
        status = await peer.poll()
        if status.state.running:
            raise LifecycleError(f"{peer.spec.name}: a server is already {status.state} ({status.profile}, pid "
                                 f"{status.pid}): stop it there first")
    checks = await preflight_ranks(leader, ranks, skip=skip)
    if not force and not all(c.ok for c in checks):
        raise PreflightFailed(checks)
    nodes = tuple(r.host.name for r in ranks)
    started: list[ServerLifecycle] = []
    try:
        for lifecycle, rank in zip([leader, *peers], ranks, strict=True):
            await lifecycle.launch(rank.profile, rank=rank.rank, nodes=nodes)
            started.append(lifecycle)
    except (LifecycleError, RemoteError):
        for lifecycle in started:
            with contextlib.suppress(LifecycleError, RemoteError):
                await lifecycle.stop_rank()
        raise
    return checks


@dataclass(frozen=True)
class Crashed:
    detail: str
    log_tail: tuple[str, ...]


async def crashed_rank(leader: ServerLifecycle, record: ServerRecord) -> Crashed | None:
    """The first other rank that ended without a stop (or whose record is gone or another server's), with its log's
    last lines; None while every rank runs. A node that does not answer is not taken for a crash: its link is shown."""
    peers = _peers(leader, record.nodes[1:])
    statuses = await asyncio.gather(*(p.poll() for p in peers), return_exceptions=True)
    for rank, (peer, status) in enumerate(zip(peers, statuses, strict=True), start=1):
        if isinstance(status, BaseException):
            if not isinstance(status, RemoteError | OSError | TimeoutError):
                raise status
            continue
        theirs = peer.record
        if theirs is None or theirs.nodes != record.nodes or theirs.rank != rank or theirs.started < record.started:
            return Crashed(f"rank {rank} on {peer.spec.name} is gone (no record of it there)", ())
        if status.state == ServerState.CRASHED:
            return Crashed(f"rank {rank} on {peer.spec.name} ended without a stop",
                           tuple(f"{peer.spec.name} r{rank}│ {line}" for line in status.log_tail))
        if status.state == ServerState.STOPPED:
            return Crashed(f"rank {rank} on {peer.spec.name} was stopped", ())
    return None


async def crash_of(leader: ServerLifecycle, record: ServerRecord, own_tail: tuple[str, ...] | None) -> dict[str, Any]:
    """The crashed server's detail and log tail: the first rank to end (another rank's, when one ended: rank 0 fails
    after it), whether rank 0 ended too (own_tail: its log's last lines; None: it still runs), and which ranks still
    run (a stop ends them). Each log line is led by its rank's host."""
    crashed = await crashed_rank(leader, record)
    own = f"rank 0 on {leader.spec.name}"
    tail = tuple(f"{leader.spec.name} r0│ {line}" for line in own_tail or ())
    if crashed is None:
        detail, tail = f"{own} ended without a stop", tail
    else:
        detail = crashed.detail + (f"; {own} ended too" if own_tail is not None else "")
        tail = tail[-CRASH_LINES:] + crashed.log_tail[-CRASH_LINES:]  # the cause's last, where the eye ends
    running = [] if own_tail is not None else [own]
    peers = _peers(leader, record.nodes[1:])
    for rank, peer in enumerate(peers, start=1):
        if peer.status.state == ServerState.READY:  # as crashed_rank's poll just found it
            running.append(f"rank {rank} on {peer.spec.name} (pid {peer.status.pid})")
    if running:
        detail += f"; still running: {', '.join(running)} (a stop ends them)"
    return {"detail": detail, "log_tail": tail}


async def stop_peers(leader: ServerLifecycle, record: ServerRecord) -> list[tuple[str, StopReport]]:
    """Every other rank stopped on its own host, at once; a rank that cannot be stopped says why in its report."""
    peers = _peers(leader, record.nodes[1:])

    async def stop(peer: ServerLifecycle) -> StopReport:
        try:
            return await peer.stop_rank()
        except (LifecycleError, RemoteError) as e:
            return StopReport((), (), problem=f"not stopped: {e}")

    return list(zip(record.nodes[1:], await asyncio.gather(*(stop(p) for p in peers)), strict=True))


def whole_report(host: str, own: StopReport, others: list[tuple[str, StopReport]]) -> StopReport:
    """One report of every rank's stop: the outcomes and leftovers of all, each node's own said in turn."""
    reports = [(host, own), *others]
    return StopReport(tuple(o for _, r in reports for o in r.outcomes), tuple(p for _, r in reports for p in r.leftovers),
                      own.gpus, ranks=tuple(reports))


async def follow_logs(leader: ServerLifecycle, record: ServerRecord, lines: int) -> LineStream:
    """Every rank's log at once, each line led by `HOST rR│`."""
    streams: list[tuple[str, LineStream]] = [(f"{leader.spec.name} r0", await leader.own_log(lines))]
    for rank, peer in enumerate(_peers(leader, record.nodes[1:]), start=1):
        with contextlib.suppress(RemoteError):  # a node not answering: the others' logs still come
            streams.append((f"{peer.spec.name} r{rank}", await peer.own_log(lines)))
    return MergedLines(streams)


class MergedLines:
    """Lines of several streams as they come, each led by its label."""

    def __init__(self, streams: list[tuple[str, LineStream]]):
        self.streams = streams
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []

    async def _pump(self, label: str, stream: LineStream) -> None:
        try:
            async for line in stream:
                await self._queue.put(f"{label}│ {line}")
        except RemoteError:
            pass  # that node's link: the others' lines still come, and the whole is followed again once all end
        finally:
            await self._queue.put(None)

    async def __aenter__(self) -> MergedLines:
        self._tasks = [asyncio.create_task(self._pump(label, s)) for label, s in self.streams]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        for _, stream in self.streams:
            with contextlib.suppress(Exception):
                await stream.__aexit__(None, None, None)

    async def __aiter__(self) -> AsyncIterator[str]:
        ended = 0
        while ended < len(self.streams):
            line = await self._queue.get()
            if line is None:
                ended += 1
            else:
                yield line

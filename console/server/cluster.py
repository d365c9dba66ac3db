"""A server across nodes, as its rank 0's host manages it: every node checked before anything starts, a rank
started on each, the other ranks watched at each poll (any rank's end without a stop is the server's crash), every
rank stopped with its own host's group kill and release check, and every rank's log followed as one.

Each rank is an ordinary managed server on its own host (its record says its rank and the nodes), reached through
that host's own lifecycle from `Peers`; the engines' flags are console/server/multinode.py's."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any, Protocol

from console.config import ConfigError, HostSpec
from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from console.remote.errors import RemoteError
from console.remote.streams import LineStream, RemoteStream
from console.server.checks import Check
from console.server.decide import Seen
from console.server.lifecycle import CRASH_TAIL, ServerLifecycle
from console.server.multinode import Rank
from console.server.profiles import Profile, ProfileError
from console.server.state import LifecycleError, PreflightFailed, ServerRecord, ServerState, ServerStatus, StopReport
from console.untrusted import visible

CRASH_LINES = 25  # of each ended rank's log, in a crash's tail
PEER_POLL_S = 3.0  # how long rank 0's poll waits for another node's: one node's slow link does not hold it up


class Peers(Protocol):
    """The hosts of pivot.toml, as a server across nodes needs them (console/session.py gives them)."""

    def ranks(self, profile: Profile) -> list[Rank]: ...
    def node_lifecycle(self, host: str) -> Node: ...


class Node(Protocol):
    """Another node's lifecycle, as a server across nodes drives it (console/server/lifecycle.py ServerLifecycle)."""

    spec: HostSpec
    record: ServerRecord | None
    status: ServerStatus

    async def poll(self) -> ServerStatus: ...
    async def read_record(self) -> ServerRecord: ...
    async def own_log(self, lines: int = 200) -> RemoteStream: ...
    async def rank_preflight(
        self, profile: Profile, *, skip: frozenset[str] = frozenset(), binds: tuple[tuple[str, str, int], ...] | None = None
    ) -> list[Check]: ...
    async def launch(self, profile: Profile, *, rank: int = 0, nodes: tuple[str, ...] = (), launch: str = "") -> ServerRecord: ...
    async def stop_rank(self, record: ServerRecord | None = None) -> StopReport: ...


def _peers(leader: ClusterLeader, names: tuple[str, ...]) -> list[Node]:
    return [leader.peers.node_lifecycle(name) for name in names]


def _peer(leader: ClusterLeader, name: str) -> Node | None:
    """Another node's lifecycle; None when pivot.toml (now) names no such host: a record read from a host may name
    hosts of another config."""
    try:
        return leader.peers.node_lifecycle(name)
    except ConfigError:
        return None


def owned(theirs: ServerRecord | None, leader: ServerRecord, rank: int) -> bool:
    """Whether a node's record is rank `rank` of the server whose rank 0's record is `leader` (not an older or
    another server's): both hold the token of one start. Each record's time is its own host's clock, so two are
    compared only where records of an older pivot hold no token."""
    if theirs is None or theirs.nodes != leader.nodes or theirs.rank != rank:
        return False
    if theirs.launch or leader.launch:
        return theirs.launch == leader.launch
    return theirs.started >= leader.started


async def preflight_ranks(leader: ClusterLeader, ranks: list[Rank], *, skip: frozenset[str]) -> list[Check]:
    """Every node's checks at once, each named with its node: the launcher, the model path, the GPUs, the flags with
    the rank's own, the ports the rank binds, and on the first node the ranks' rendezvous port."""
    lifecycles = [leader, *_peers(leader, tuple(r.host.name for r in ranks[1:]))]

    async def check(lifecycle: Node, rank: Rank) -> list[Check]:
        p = rank.profile
        binds: tuple[tuple[str, str, int], ...] = (("port free", p.host, p.port),) if rank.serves_http else ()
        if rank.rank == 0:
            binds += (("rendezvous port free", "0.0.0.0", p.dist_port),)
        checks = await lifecycle.rank_preflight(p, skip=skip, binds=binds)
        if not rank.serves_http and "port-free" not in skip:
            checks.append(Check("port free", True, f"rank {rank.rank} runs headless: it binds no port"))
        return checks

    found = await asyncio.gather(*(check(lc, r) for lc, r in zip(lifecycles, ranks, strict=True)))
    return [replace(c, name=f"{c.name} on {r.host.name}", node=r.host.name) for r, checks in zip(ranks, found, strict=True) for c in checks]


async def start_ranks(leader: ClusterLeader, ranks: list[Rank], *, force: bool, skip: frozenset[str]) -> list[Check]:
    """Check every node, then start rank 0 here and each other rank on its node. A rank that cannot start stops the
    ranks already started."""
    if ranks[0].host.name != leader.spec.name:
        raise LifecycleError(
            f"{ranks[0].profile.name} runs rank 0 on {ranks[0].host.name}: start it from there (pivot --host {ranks[0].host.name})"
        )
    peers = _peers(leader, tuple(r.host.name for r in ranks[1:]))
    for peer in peers:
        status = await peer.poll()
        if status.state.running or (status.state == ServerState.CRASHED and status.nodes):
            raise LifecycleError(
                f"{peer.spec.name}: a server is already {status.state} ({status.profile}, {status.process})"
                + (": stop it from its first node" if status.nodes else ": stop it there first")
            )
    checks = await preflight_ranks(leader, ranks, skip=skip)
    if not force and not all(c.ok for c in checks):
        raise PreflightFailed(checks)
    nodes = tuple(r.host.name for r in ranks)
    token = secrets.token_hex(8)  # the start's, in every rank's record: how the ranks of one server know each other
    started: list[Node] = []
    leader.launching = True  # no rank is missing a crash while the others are still being started
    try:
        for lifecycle, rank in zip([leader, *peers], ranks, strict=True):
            await lifecycle.launch(rank.profile, rank=rank.rank, nodes=nodes, launch=token)
            started.append(lifecycle)
    except (LifecycleError, RemoteError):
        for lifecycle in started:
            with contextlib.suppress(LifecycleError, RemoteError):
                await lifecycle.stop_rank()
        raise
    finally:
        leader.launching = False
    return checks


@dataclass(frozen=True)
class Crashed:
    detail: str
    log_tail: tuple[str, ...]


async def crashed_rank(leader: ClusterLeader, record: ServerRecord) -> Crashed | None:
    """The first other rank that ended without a stop (or whose record is gone or another server's), with its log's
    last lines; None while every rank runs. A node that does not answer within PEER_POLL_S is not taken for a crash
    (its link is shown; its poll goes on, and the next poll reads it), nor is a host pivot.toml does not name."""
    statuses = await _peer_statuses(leader, record)
    for rank, (name, status) in enumerate(zip(record.nodes[1:], statuses, strict=True), start=1):
        peer = _peer(leader, name)
        if status is None or peer is None:
            continue
        if not owned(peer.record, record, rank):
            return Crashed(f"rank {rank} on {name} is gone (no record of it there)", ())
        if status.state == ServerState.CRASHED:
            return Crashed(f"rank {rank} on {name} ended without a stop", _labelled(f"{name} r{rank}", status.log_tail))
        if status.state == ServerState.STOPPED:
            return Crashed(f"rank {rank} on {name} was stopped", ())
    return None


async def _peer_statuses(leader: ClusterLeader, record: ServerRecord) -> list[ServerStatus | None]:
    """Each other node's status, as far as it answers within PEER_POLL_S (None: not known now). A poll not finished
    in time runs on, never cancelled (its channel answers in turn), and the next poll waits for it again."""
    tasks = []
    for name in record.nodes[1:]:
        peer = _peer(leader, name)
        task = leader.peer_polls.get(name)
        if peer is not None and (task is None or task.done()):
            task = leader.peer_polls[name] = asyncio.create_task(peer.poll())
        tasks.append(task)
    pending = [t for t in tasks if t is not None]
    if pending:
        await asyncio.wait(pending, timeout=PEER_POLL_S)
    return [t.result() if t is not None and t.done() and not t.cancelled() and t.exception() is None else None for t in tasks]


def _labelled(label: str, lines: tuple[str, ...]) -> tuple[str, ...]:
    """A rank's log lines, each led by its host and rank (blank ones left out: they say nothing of which rank)."""
    return tuple(f"{label}│ {line}" for line in lines if line.strip())


async def crash_of(
    leader: ClusterLeader, record: ServerRecord, own_tail: tuple[str, ...] | None, crashed: Crashed | None = None
) -> dict[str, Any]:
    """The crashed server's detail and log tail: the first rank to end (another rank's, when one ended: rank 0 fails
    after it), whether rank 0 ended too (own_tail: its log's last lines; None: it still runs), and which ranks still
    run (a stop ends them). Each log line is led by its rank's host."""
    crashed = crashed or await crashed_rank(leader, record)
    own = f"rank 0 on {leader.spec.name}"
    tail = _labelled(f"{leader.spec.name} r0", own_tail or ())
    if crashed is None:
        detail = f"{own} ended without a stop"
    else:
        detail = crashed.detail + (f"; {own} ended too" if own_tail is not None else "")
        tail = tail[-CRASH_LINES:] + crashed.log_tail[-CRASH_LINES:]  # the cause's last, where the eye ends
    running = [] if own_tail is not None else [own]
    for rank, name in enumerate(record.nodes[1:], start=1):
        peer = _peer(leader, name)
        if peer is not None and peer.status.state == ServerState.READY and owned(peer.record, record, rank):
            running.append(f"rank {rank} on {name} ({peer.status.process})")
    if running:
        detail += f"; still running: {', '.join(running)} (a stop ends them)"
    return {"detail": detail, "log_tail": tail}


async def stop_peers(leader: ClusterLeader, record: ServerRecord) -> list[tuple[str, StopReport]]:
    """Every other rank of this server stopped on its own host, at once; a rank that cannot be stopped, or whose host
    now runs another server, says so in its report (and is left alone)."""

    async def stop(rank: int, name: str) -> StopReport:
        peer = _peer(leader, name)
        if peer is None:
            return StopReport((), (), problem=f"not stopped: {name} is not in pivot.toml")
        try:
            theirs = await peer.read_record()
            if not owned(theirs, record, rank):
                return StopReport((), (), problem=f"not stopped: {name} runs another server now, left alone")
            return await peer.stop_rank(theirs)
        except (LifecycleError, RemoteError) as e:
            return StopReport((), (), problem=f"not stopped: {e}")

    names = record.nodes[1:]
    return list(zip(names, await asyncio.gather(*(stop(r, n) for r, n in enumerate(names, start=1))), strict=True))


def whole_report(host: str, own: StopReport, others: list[tuple[str, StopReport]]) -> StopReport:
    """One report of every rank's stop: the outcomes and leftovers of all, each node's own said in turn."""
    reports = [(host, own), *others]
    return StopReport(
        tuple(o for _, r in reports for o in r.outcomes), tuple(p for _, r in reports for p in r.leftovers), own.gpus, ranks=tuple(reports)
    )  # ok only when every node's is


async def follow_logs(leader: ClusterLeader, record: ServerRecord, lines: int) -> LineStream:
    """Every rank's log at once, each line led by `HOST rR│` (a node not answering now is left out until the whole
    is followed again)."""
    streams: list[tuple[str, LineStream]] = []
    try:
        streams.append((f"{leader.spec.name} r0", await leader.own_log(lines)))
        for rank, name in enumerate(record.nodes[1:], start=1):
            if (peer := _peer(leader, name)) is not None:
                with contextlib.suppress(RemoteError):
                    streams.append((f"{name} r{rank}", await peer.own_log(lines)))
    except BaseException:  # cancelled (the pane follows anew) or failed: no tail -F is left open
        await MergedLines(streams).__aexit__(None, None, None)
        raise
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
        await asyncio.gather(*self._tasks, return_exceptions=True)
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


class ClusterLeader(ServerLifecycle):
    """A GPU host's lifecycle that can lead a server across nodes (rank 0 here): what ServerLifecycle does for one host,
    and for the others, through `peers` (the session): every node checked and a rank started on each, the other
    ranks watched at each poll, all stopped, their logs followed as one."""

    def __init__(self, conn: Connection, spec: HostSpec, agent: RemoteTelemetry, *, peers: Peers, **options: Any):
        super().__init__(conn, spec, agent, **options)
        self.peers = peers
        self.launching = False  # its ranks are being started (none is missing yet)
        self.peer_polls: dict[str, asyncio.Task[ServerStatus]] = {}  # the other nodes' polls, never cancelled mid-way
        self._crash_final = False  # its crash was said once rank 0 had ended too

    def _ranks(self, profile: Profile) -> list[Rank]:
        try:
            return self.peers.ranks(profile)
        except ProfileError as e:
            raise LifecycleError(str(e)) from None

    async def preflight(self, profile: Profile, *, skip: frozenset[str] = frozenset()) -> list[Check]:
        """Of a server across nodes, every node's checks, each named with its node."""
        if profile.nodes:
            return await preflight_ranks(self, self._ranks(profile), skip=skip)
        return await super().preflight(profile, skip=skip)

    async def _checked_launch(self, profile: Profile, *, force: bool, skip: frozenset[str]) -> list[Check]:
        if profile.nodes:
            return await start_ranks(self, self._ranks(profile), force=force, skip=skip)
        return await super()._checked_launch(profile, force=force, skip=skip)

    async def _other_ranks(self, record: ServerRecord, seen: Seen) -> ServerStatus | None:
        """Any rank's end without a stop is the server's crash: the first rank to end is the cause, said again (with
        rank 0's own tail) once rank 0 has ended too."""
        if not record.nodes or record.rank != 0:
            return None
        crashed = ServerStatus(
            ServerState.CRASHED,
            visible(record.profile),
            record.pid,
            record.started,
            None,
            seen.last_line,
            model=self.status.model,
            nodes=record.nodes,
            rank=record.rank,
        )
        if not seen.alive:
            if record.stopped or self._stopping or (self._crash_for == record.pid and self._crash_final):
                return None
            self._crash_for, self._crash_final = record.pid, True
            tail = tuple(await self.log_tail(CRASH_TAIL))
            return replace(crashed, **await crash_of(self, record, tail))
        if self._stopping or self.launching or not (other := await crashed_rank(self, record)):
            return None
        if self._crash_for != record.pid:  # the first cause stays the server's, whatever rank 0 does next
            self._crash_for, self._crash_final = record.pid, False
            return replace(crashed, **await crash_of(self, record, None, other))
        return replace(self.status, state=ServerState.CRASHED, ready_at=None, last_line=seen.last_line, at=time.time())

    async def _stop_other_ranks(self, record: ServerRecord, own: StopReport) -> StopReport:
        if not record.nodes:
            return own
        return whole_report(self.spec.name, own, await stop_peers(self, record))

    async def follow_log(self, lines: int = 200) -> LineStream:
        """Of a server across nodes (as the last poll found it), every rank's log, each line led by its host."""
        record = self.record
        if record is not None and record.nodes and record.rank == 0:
            return await follow_logs(self, record, lines)
        return await super().follow_log(lines)

    async def close(self) -> None:
        for task in self.peer_polls.values():
            task.cancel()
        await super().close()

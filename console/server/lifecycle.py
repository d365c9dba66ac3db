"""The server pivot manages on a host: start, stop, restart, switch, and a state that is always true.

On the host, in the workdir: server.pid, server.log, server.json and server.lock (console/server/scripts.py, with the
scripts that read and change them). A console started later reads these and adopts the server. Every observation
is one run of a constant script (no data in it) over a long-lived SSH channel,
plus one HTTP request through a port forward to the server's own health
endpoint, on a kept-alive connection: a 1 s poll opens no SSH session.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Protocol

from console.config import HostSpec
from console.events import EventLog, Restart, Start, Stop, Switch
from console.gpu.kill import KillOutcome
from console.gpu.samples import AgentError, GpuProcess, Sample
from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection, PortForward
from console.remote.loop import RemoteLoop
from console.remote.streams import LineStream, RemoteStream
from console.server.decide import Fetch, Seen, next_status, runs_as_recorded
from console.server.health import HealthProbe
from console.server.multinode import Rank
from console.server.preflight import Check, after_stop, preflight
from console.server.profiles import Profile, ProfileSet
from console.server.scripts import (
    KILL_THEN_MARK,
    LOG,
    MARK,
    PID_STANDIN,
    PROBE,
    RECORD,
    REWRITE,
    START,
    TICKS_STANDIN,
)
from console.server.state import (
    LifecycleError,
    NoHealthRoute,
    PreflightFailed,
    RecordError,
    ServerRecord,
    ServerState,
    ServerStatus,
    StopReport,
)
from console.untrusted import visible

if TYPE_CHECKING:  # imported where a health check needs it: `pivot --help` and the first screen do not wait
    import httpx

CRASH_TAIL = 50


class Lifecycle(Protocol):
    """What the panes, the runbooks and the commands use of a host's managed server: ServerLifecycle, or a test's
    fake."""

    status: ServerStatus
    runs_jobs: bool  # the server runs as a batch job on other nodes (a Slurm login node): its GPUs are job_gpus()'s
    last_stop: StopReport | None  # the last stop's report (of a switch or a restart too): what the commands print
    looked_at: float  # time.monotonic() of the last look at the host

    def add_listener(self, callback: Callable[[ServerStatus], None]) -> None: ...
    async def job_gpus(self) -> list[tuple[str, Sample | AgentError]]: ...
    async def poll(self) -> ServerStatus: ...
    def unreachable(self, why: str) -> ServerStatus: ...
    async def log_tail(self, lines: int = CRASH_TAIL) -> list[str]: ...
    async def follow_log(self, lines: int = 200) -> LineStream: ...
    async def preflight(self, profile: Profile, *, skip: frozenset[str] = frozenset()) -> list[Check]: ...
    async def start(
        self, profile: Profile, *, force: bool = False, skip: frozenset[str] = frozenset(), via: str | None = None
    ) -> list[Check]: ...
    async def stop(self, *, during: str | None = None, via: str | None = None) -> StopReport: ...
    async def switch(
        self, profile: Profile, *, force: bool = False, skip: frozenset[str] = frozenset(), via: str | None = None
    ) -> list[Check]: ...
    async def restart(
        self, profiles: ProfileSet, *, force: bool = False, skip: frozenset[str] = frozenset(), via: str | None = None
    ) -> list[Check]: ...
    async def close(self) -> None: ...


class ServerLifecycle(HealthProbe):
    runs_jobs = False  # the server is a process of this host; its GPUs are the host's own

    def __init__(
        self,
        conn: Connection,
        spec: HostSpec,
        agent: RemoteTelemetry,
        *,
        idle_threshold_mib: float,
        grace_s: float,
        events: EventLog | None = None,
        via: str = "cli",
    ):
        """events: the campaign's log, where every start, switch and stop is written (a stop alone, or inside a switch
        or a restart), with `via`: who acted ("console", "cli", "runbook"). A server across nodes is led by
        console/server/cluster.py's ClusterLeader, which extends this with the other hosts."""
        self.conn, self.spec, self.agent = conn, spec, agent
        self.idle_threshold_mib, self.grace_s = idle_threshold_mib, grace_s
        self.events, self.via = events, via
        self.record: ServerRecord | None = None  # what the last poll found in server.json
        self.record_text: str | None = None  # and its text, as read
        self.status = ServerStatus(ServerState.UNKNOWN, detail=f"{spec.name} not reached yet")
        self.looked_at = 0.0  # time.monotonic() of the last look at the host (a poll, a start's, a stop's)
        self._listeners: list[Callable[[ServerStatus], None]] = []
        self._probe = RemoteLoop(conn, PROBE, cwd=spec.workdir)
        self._forward: PortForward | None = None
        self._http: httpx.AsyncClient | None = None  # one per forward, kept alive across polls
        self._http_lock = asyncio.Lock()  # a poll and a stop (in another worker) never share a client being closed
        self._health_failures = 0
        self._stopping = False
        self._crash_for: int | None = None  # pid whose crash tail was already read
        self.last_stop: StopReport | None = None

    # -- observation ----------------------------------------------------------
    def add_listener(self, callback: Callable[[ServerStatus], None]) -> None:
        self._listeners.append(callback)

    def _set(self, status: ServerStatus) -> ServerStatus:
        changed = (status.state, status.profile, status.pid, status.last_line, status.detail) != (
            self.status.state,
            self.status.profile,
            self.status.pid,
            self.status.last_line,
            self.status.detail,
        )
        self.status, self.looked_at = status, time.monotonic()
        if changed:
            for callback in list(self._listeners):
                callback(status)
        return status

    async def _server_process(self, record: ServerRecord, stat_text: str) -> bool:
        """Whether the record's process runs (not a zombie) with the record's start time. The probe read the stat of
        the pid file's process; when that is not the record's pid (a stale or hand-written pid file, or the moment
        between a start's two writes), the record's own pid is asked."""
        if (alive := runs_as_recorded(record, stat_text)) is None:
            alive = runs_as_recorded(record, (await self.conn.run(["cat", f"/proc/{int(record.pid)}/stat"], timeout=20)).stdout)
        return bool(alive)

    async def poll(self) -> ServerStatus:
        """Look at the host once and update the state."""
        out = await self._probe.ask(timeout=20)
        record_text, stat_text, last_line, host_now = (out.split(f"{MARK}\n") + ["", "", "", ""])[:4]
        self.record_text = record_text.rstrip("\n")  # what a change of the record compares with on the host
        try:
            self.record = record = ServerRecord.read(record_text)
        except RecordError as e:  # the host's file, not pivot's: say so rather than "stopped"
            self.record = None
            return self._set(ServerStatus(ServerState.UNKNOWN, detail=str(e)))
        seen = Seen(record, last_line=visible(last_line.strip()), host=self.spec.name, clock_ahead=_clock_ahead(host_now))
        if record is None:
            return self._set(next_status(self.status, seen, stopping=self._stopping, crash_known=False, failures=0, now=time.time()).status)
        seen = replace(seen, alive=await self._server_process(record, stat_text))
        if not seen.alive:
            await self._forget_forward()
        if (across := await self._other_ranks(record, seen)) is not None:
            return self._set(across)
        if seen.alive and record.rank == 0 and not self._stopping:
            try:
                healthy, why = await self._health(record)
                seen = replace(seen, healthy=healthy, why=why)
            except NoHealthRoute as e:  # it will not change by waiting: said while it starts
                seen = replace(seen, healthy=False, why=str(e), no_health_route=True)
        decided = next_status(
            self.status,
            seen,
            stopping=self._stopping,
            crash_known=self._crash_for == record.pid,
            failures=self._health_failures,
            now=time.time(),
        )
        self._health_failures, status = decided.failures, decided.status
        if decided.fetch == Fetch.CRASH_TAIL:
            self._crash_for = record.pid
            status = replace(status, log_tail=tuple(await self.log_tail(CRASH_TAIL)))
        elif decided.fetch == Fetch.MODEL:
            status = replace(status, model=await self._model_name(record))
        return self._set(status)

    async def _other_ranks(self, record: ServerRecord, seen: Seen) -> ServerStatus | None:
        """What the other ranks of a server across nodes make of this poll (a crash of theirs); None: nothing. Here, with
        no other host to ask: nothing (console/server/cluster.py ClusterLeader asks them)."""
        return None

    async def job_gpus(self) -> list[tuple[str, Sample | AgentError]]:
        """No job's nodes: this host's GPUs are sampled by its telemetry (SlurmLifecycle's are its job's)."""
        return []

    def unreachable(self, why: str) -> ServerStatus:
        """A poll that could not reach the host: the state is unknown, not what it was (nor "stopped")."""
        return self._set(replace(self.status, state=ServerState.UNKNOWN, detail=why))

    async def close(self) -> None:
        """The probe's channel, the health check's client and forward."""
        await self._forget_forward()
        await self._probe.close()

    async def log_tail(self, lines: int = CRASH_TAIL) -> list[str]:
        """The log's last lines, safe to show."""
        result = await self.conn.run(["tail", "-n", str(lines), LOG], cwd=self.spec.workdir, timeout=20)
        return [visible(line) for line in result.stdout.splitlines()]

    async def follow_log(self, lines: int = 200) -> LineStream:
        """A stream of the log's raw lines (`tail -F`: it survives the rotation at the next start); show them through
        `visible`. (Of a server across nodes, ClusterLeader follows every rank's.)"""
        return await self.own_log(lines)

    async def own_log(self, lines: int = 200) -> RemoteStream:
        return await self.conn.stream(["tail", "-n", str(lines), "-F", LOG], cwd=self.spec.workdir)

    # -- checks ---------------------------------------------------------------
    async def resolved_argv(self, profile: Profile) -> list[str]:
        """The profile's argv with the remote home put in for a leading ~/ in the program and paths."""
        return [await self.conn.expand(a) if a.startswith("~/") else a for a in profile.argv()]

    async def preflight(self, profile: Profile, *, skip: frozenset[str] = frozenset()) -> list[Check]:
        """Every check of the profile (of a server across nodes, ClusterLeader checks every node's)."""
        if profile.nodes:
            self._ranks(profile)
        return await self.rank_preflight(profile, skip=skip)

    async def rank_preflight(
        self, profile: Profile, *, skip: frozenset[str] = frozenset(), binds: tuple[tuple[str, str, int], ...] | None = None
    ) -> list[Check]:
        """This host's checks (binds: what must be free to bind, as (check, host, port); default: the profile's)."""
        return await preflight(
            self.conn,
            self.agent,
            profile,
            await self.resolved_argv(profile),
            idle_threshold_mib=self.idle_threshold_mib,
            gpus=self.spec.gpus,
            skip=skip,
            binds=binds,
        )

    # -- actions --------------------------------------------------------------
    async def start(
        self, profile: Profile, *, force: bool = False, skip: frozenset[str] = frozenset(), via: str | None = None
    ) -> list[Check]:
        checks = await self._start(profile, force=force, skip=skip)
        if self.events is not None:
            self.events.append(Start(via=via or self.via, host=self.spec.name, profile=profile.name, pid=self.status.pid))
        return checks

    async def _start(self, profile: Profile, *, force: bool, skip: frozenset[str]) -> list[Check]:
        current = await self.poll()
        if current.state.running:
            raise LifecycleError(f"a server is already {current.state} ({current.profile}, pid {current.pid}): stop it or switch")
        if current.state == ServerState.CRASHED and current.nodes:
            raise LifecycleError(
                f"{current.profile} crashed, and ranks of it may still run on {', '.join(current.nodes)}: "
                "stop it first (a stop ends every rank)"
            )
        if profile.node_count:
            raise LifecycleError(
                f"{profile.name} asks for nodes = {profile.node_count}, a number: Slurm chooses them, "
                f'on a host of role "slurm"; {self.spec.name} is a GPU host (name the hosts instead)'
            )
        return await self._checked_launch(profile, force=force, skip=skip)

    async def _checked_launch(self, profile: Profile, *, force: bool, skip: frozenset[str]) -> list[Check]:
        """The profile's checks, then its launch unless one failed (or `force`); ClusterLeader starts every rank."""
        checks = await self.preflight(profile, skip=skip)
        if not force and not all(c.ok for c in checks):
            raise PreflightFailed(checks)
        await self.launch(profile)
        return checks

    def _ranks(self, profile: Profile) -> list[Rank]:
        raise LifecycleError(f"{profile.name} runs across nodes ({', '.join(profile.nodes)}): pivot.toml must name them")

    async def launch(self, profile: Profile, *, rank: int = 0, nodes: tuple[str, ...] = (), launch: str = "") -> ServerRecord:
        """Start the profile's command line here, detached, with its record, in one remote step under the host's lock,
        if the record is still the one the last poll read (rank, nodes, launch: of a server across nodes, the start's
        token every rank's record holds). Nothing checked: see start."""
        argv = await self.resolved_argv(profile)
        if profile.env:
            argv = ["env", *(f"{k}={v}" for k, v in profile.env.items()), *argv]
        template = ServerRecord(
            profile.name,
            argv,
            PID_STANDIN,
            TICKS_STANDIN,
            time.time(),
            profile.host,
            profile.port,
            profile.kind,
            health=profile.health_paths,
            rank=rank,
            nodes=nodes,
            launch=launch,
        )
        text = json.dumps(asdict(template), indent=1)
        pre, rest = text.split(str(PID_STANDIN), 1)
        mid, post = rest.split(str(TICKS_STANDIN), 1)
        result = await self.conn.run(
            ["sh", "-c", START, "sh", self.record_text or "", pre, mid, post, *argv], cwd=self.spec.workdir, timeout=30
        )
        words = result.stdout.split()
        if not result.ok or len(words) != 2 or not all(w.isdigit() for w in words):
            raise LifecycleError(
                f"could not start {profile.name} on {self.spec.name}: {visible(result.stderr.strip()) or result.exit_status}"
            )
        record = replace(template, pid=int(words[0]), start_ticks=int(words[1]))
        self.record, self.record_text = record, f"{pre}{record.pid}{mid}{record.start_ticks}{post}"
        self._stopping, self._health_failures, self._crash_for = False, 0, None
        self.status = ServerStatus(ServerState.STOPPED)  # so that ready_at and model are learnt afresh
        self._set(ServerStatus(ServerState.STARTING, profile.name, record.pid, record.started, nodes=nodes, rank=rank))
        return record

    async def stop(self, *, during: str | None = None, via: str | None = None) -> StopReport:
        """SIGTERM the server's group, SIGKILL after the grace; written in the event log (`during`: the switch it is
        part of). A server across nodes is stopped from its rank 0's host: rank 0 first (SGLang's other ranks wait
        for its shutdown), then every other rank on its own host, each with its release check."""
        record = await self.read_record()
        if record.rank > 0:
            raise LifecycleError(
                f"this host runs rank {record.rank} of {visible(record.profile)}, whose rank 0 runs on "
                f"{record.nodes[0]}: stop it there (a stop ends every rank)"
            )
        self._stopping = True
        self._set(replace(self.status, state=ServerState.STOPPING))

        def said(outcome: str) -> None:
            if self.events is not None:
                self.events.append(
                    Stop(
                        via=via or self.via,
                        host=self.spec.name,
                        profile=visible(record.profile),
                        pid=record.pid,
                        outcome=outcome,
                        during=during,
                    )
                )

        try:
            try:
                report = await self.stop_rank(record)
            except (asyncio.CancelledError, KeyboardInterrupt):  # the kill may have been sent: the log says so
                said("interrupted once the stop was sent to the host: pivot server status shows whether it ended")
                raise
            report = self.last_stop = await self._stop_other_ranks(record, report)
            said(report.describe())
            await self.poll()
            self._set(replace(self.status, state=ServerState.STOPPED, detail="" if report.ok else report.describe()))
            return report
        finally:
            self._stopping = False

    async def _stop_other_ranks(self, record: ServerRecord, own: StopReport) -> StopReport:
        """Of a server across nodes, every other rank stopped too, and the whole said (ClusterLeader); here: this one."""
        return own

    async def read_record(self) -> ServerRecord:
        text = (await self.conn.run(["head", "-c", "262145", RECORD], cwd=self.spec.workdir)).stdout
        self.record_text = text.rstrip("\n")
        try:
            record = ServerRecord.read(text)
        except RecordError as e:
            raise LifecycleError(f"{self.spec.name}: {e}") from None
        if record is None:
            raise LifecycleError(f"no server started by pivot on {self.spec.name}")
        return record

    async def write_record(self, record: ServerRecord) -> None:
        """Replace the record read last with this one, under the host's lock, if it is still the one read."""
        text = json.dumps(asdict(record), indent=1)
        result = await self.conn.run(["sh", "-c", REWRITE, "sh", self.record_text or "", text], cwd=self.spec.workdir, timeout=30)
        if not result.ok:
            raise LifecycleError(f"{self.spec.name}: the record was not written: {visible(result.stderr.strip()) or result.exit_status}")
        self.record_text = text

    async def stop_rank(self, record: ServerRecord | None = None) -> StopReport:
        """This host's part of a stop: the group's kill, the record marked stopped, and the GPUs read until the group
        holds no memory (at most ~5 s). Not written in the event log (stop is)."""
        record = record or await self.read_record()
        was_stopping, self._stopping = self._stopping, True
        try:
            stopped = json.dumps(asdict(replace(record, stopped=True)), indent=1)
            mark = ("sh", "-c", KILL_THEN_MARK, "sh", self.record_text or "", stopped)
            outcomes = tuple(
                KillOutcome.from_agent(d)
                for d in await self.agent.kill([f"{record.pid}:{record.start_ticks}:group"], self.grace_s, via=mark)
            )
            if outcomes and outcomes[0].outcome == "unknown":  # the link dropped: whether it was marked is the host's
                raise LifecycleError(f"{self.spec.name}: {outcomes[0].describe()}")
            before = self.record_text
            if (await self.read_record()).stopped is not True:
                if self.record_text == before:  # the record is the one the kill read: it could not be written
                    raise LifecycleError(
                        f"{self.spec.name}: the server was stopped ({'; '.join(o.describe() for o in outcomes)}), but its "
                        f"record could not be marked stopped: is {self.spec.workdir} full? Until it is marked, pivot reads "
                        "the server as crashed"
                    )
                raise LifecycleError(
                    f"{self.spec.name}: the record was not marked stopped: another console acted on "
                    "this host meanwhile (pivot server status shows what runs)"
                )
            await self._forget_forward()
            leftovers: tuple[GpuProcess, ...] = ()
            gpus = "read" if self.spec.gpus else "none"
            for _ in range(10 if self.spec.gpus else 0):  # the driver frees memory shortly after the processes end
                sample = await self.agent.sample_once()
                if isinstance(sample, AgentError):
                    gpus = f"cannot read the GPUs ({sample.message})"
                    break
                leftovers = tuple(p for p in sample.procs if p.pgid == record.pid)
                if not leftovers:
                    break
                await asyncio.sleep(0.5)
            return StopReport(outcomes, leftovers, gpus)
        finally:
            self._stopping = was_stopping

    async def switch(
        self, profile: Profile, *, force: bool = False, skip: frozenset[str] = frozenset(), via: str | None = None
    ) -> list[Check]:
        """Check the profile, stop whatever runs, check that the GPUs are idle, start the profile: one action.

        A profile that cannot start stops nothing: every preflight check runs before the stop, but for those the stop
        itself makes true (the GPUs idle when only the server holds them, and the port when the server holds it).
        """
        current = await self._replace(profile, force=force, skip=skip, during=f"switch to {profile.name}", via=via)
        checks = await self._start(profile, force=force, skip=skip)
        if self.events is not None:
            self.events.append(
                Switch(
                    via=via or self.via,
                    host=self.spec.name,
                    profile=profile.name,
                    replaced=visible(current.profile) if current.profile else None,
                )
            )
        return checks

    async def restart(
        self, profiles: ProfileSet, *, force: bool = False, skip: frozenset[str] = frozenset(), via: str | None = None
    ) -> list[Check]:
        """The running server's profile, stopped and started again (its profile file as it is now)."""
        current = await self.poll()
        if current.profile is None:
            raise LifecycleError("no server to restart")
        profile = profiles.get(current.profile)
        await self._replace(profile, force=force, skip=skip, during="restart", via=via)
        checks = await self._start(profile, force=force, skip=skip)
        if self.events is not None:
            self.events.append(Restart(via=via or self.via, host=self.spec.name, profile=profile.name, pid=self.status.pid))
        return checks

    async def _replace(self, profile: Profile, *, force: bool, skip: frozenset[str], during: str, via: str | None) -> ServerStatus:
        """Stop the running server for `profile`, once its preflight passes; the status it had."""
        current = await self.poll()
        if current.state in (ServerState.STARTING, ServerState.READY, ServerState.UNHEALTHY):
            if not force:
                record = self.record
                checks = after_stop(
                    await self.preflight(profile, skip=skip),
                    profile,
                    await self.agent.sample_once(),
                    (record.host, record.port) if record is not None else None,
                    self.spec.name,
                    record.nodes if record is not None else (),
                )
                if not all(c.ok for c in checks):
                    raise PreflightFailed(checks, still_running=f"{current.profile} (pid {current.pid})")
            report = await self.stop(during=during, via=via)
            if not report.ok and not force:
                raise LifecycleError(report.describe())
        return current


def _clock_ahead(host_now: str) -> float:
    """The host's clock less this one's, from the `date +%s` its probe just read (0 where it said nothing readable);
    the link's delay is within the second an uptime is shown to."""
    try:
        return int(host_now.strip()) - time.time()
    except ValueError:
        return 0.0

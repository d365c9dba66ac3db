"""A server run as a Slurm job, from a login node (a host of `role = "slurm"`): there is no setsid to run there,
the server is a job, its state is the job's, its log is the job's output, and stop is scancel.

pivot writes the batch script (one `srun` step of one task per node: task R runs rank R with the engine's own
multi-node flags, its rank from SLURM_NODEID, the rendezvous on the first node: SLURM_LAUNCH_NODE_IPADDR, the address
of the node srun runs on, which is the batch host, the allocation's first node), submits it with `sbatch`, follows
it with `squeue` and, once it has left the queue, `scontrol show job` (Slurm keeps a finished job there for
MinJobAge, 300 s by default; `sacct` needs accounting storage, which many small clusters and CI lack), and reaches
the server through an SSH forward from the login node to the first node's address (`scontrol show node`).

Every value from the profile reaches sbatch and srun as an argv word, quoted for the script's shell; the rank's
shell snippet is constant text of pivot's own, the command line its arguments.

The job's GPUs are read by the telemetry agent in a step that overlaps the job (`srun --overlap --jobid`), one task
per node: no SSH to the compute nodes (many clusters allow none, and pivot.toml need not name them), nothing
allocated beyond the job, and the agent found where the login node keeps it (a home shared with the nodes, as
clusters have). One sample per node each time it is asked, not a stream: an srun step is a second or so of Slurm's
work, so the console asks every few seconds. Read-only: kills stay with the GPU hosts' panes.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from dataclasses import dataclass, field, replace
from typing import Any

from console.config import HostSpec
from console.events import Stop
from console.gpu.format import idle_line
from console.gpu.samples import AgentError, Sample, SampleParseError
from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from console.server.checks import Check
from console.server.cluster import ClusterLeader, Peers
from console.server.lifecycle import ServerLifecycle
from console.server.preflight import check_flags
from console.server.profiles import Profile
from console.server.scripts import LOG, MARK
from console.server.state import (
    ADDRESS,
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

SCRIPT = "server.sbatch"
PENDING = {
    "PENDING",
    "CONFIGURING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESV_DEL_HOLD",
    "SUSPENDED",
    "STOPPED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
}
JOB_POLL_S = 5.0  # squeue at most this often (each is slurmctld's work): the health check still runs at each poll
STOP_WAIT_S = 120.0  # scancel's SIGTERM, then Slurm's own SIGKILL after KillWait (30 s by default)


def batch_script(profile: Profile, argv: list[str]) -> str:
    """The job's script: one srun step, a task per node, each rank's output led by its task number (`--label`)."""
    nnodes = profile.nodes_needed
    words = shlex.join(["env", *(f"{k}={v}" for k, v in profile.env.items()), *argv] if profile.env else argv)
    # the rank's command line, run by srun in each task: "$@" is the profile's argv (env included), the rest constant
    rank = (profile.engine.rank_shell or 'exec "$@"') if nnodes > 1 else 'exec "$@"'
    return "\n".join(
        [
            "#!/bin/bash",
            f"# written by pivot: {' '.join(visible(profile.name).split())}, {nnodes} node(s), a task per node; task R runs",
            "# rank R (SLURM_NODEID), rank 0's node (the batch host, where srun runs) is the ranks' rendezvous",
            f"export PIVOT_NNODES={nnodes} PIVOT_DIST_PORT={profile.dist_port}",
            f"exec srun --label --kill-on-bad-exit=1 --ntasks-per-node=1 --nodes={nnodes} bash -c {shlex.quote(rank)} pivot-rank {words}",
            "",
        ]
    )


@dataclass(frozen=True)
class Job:
    """A job as Slurm last said it: its state (one of Slurm's words, else "" once Slurm has forgotten it), why it
    waits, its nodes, its first node, and ", exit code X" once it has ended."""

    state: str
    reason: str = ""
    nodelist: str = ""
    first: str = ""
    ended: str = ""
    at: float = field(default_factory=time.monotonic)


def _facts(text: str) -> dict[str, str]:
    """scontrol -o's KEY=VALUE words."""
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


class SlurmLifecycle(ServerLifecycle):
    """The managed server of a Slurm login node: a job. Records, log and forward as ServerLifecycle's; the process
    is the job, reached at its first node's address (scontrol's NodeAddr of its batch host)."""

    runs_jobs = True

    job: Job | None = None  # as Slurm last said it, asked again after JOB_POLL_S (squeue is slurmctld's work)
    _job_id: int | None = None  # the job `job` is of
    _address: tuple[int, str] | None = None  # (job, its first node's address)

    @property
    def nodelist(self) -> str:
        return self.job.nodelist if self.job is not None else ""

    @property
    def server_address(self) -> str:
        record = self.record
        return self._address[1] if self._address and record is not None and self._address[0] == record.job else "127.0.0.1"

    async def poll(self) -> ServerStatus:
        out = await self._probe.ask(timeout=20)
        record_text, _, last_line = (out.split(f"{MARK}\n") + ["", "", ""])[:3]
        self.record_text = record_text.rstrip("\n")  # what a change of the record compares with on the host
        try:
            self.record = record = ServerRecord.read(record_text)
        except RecordError as e:
            self.record = None
            return self._set(ServerStatus(ServerState.UNKNOWN, detail=str(e)))
        if record is None or record.job is None:
            return self._set(ServerStatus(ServerState.STOPPED))
        base = ServerStatus(
            ServerState.STOPPED,
            visible(record.profile),
            None,
            record.started,
            self.status.ready_at,
            visible(last_line.strip()),
            model=self.status.model,
            job=record.job,
        )
        job = await self._job(record.job)
        if job is None:  # neither squeue nor scontrol answered: nothing new is known
            return self.status
        state = job.state
        if state in PENDING:
            why = f"{state.lower()}: {job.reason}" if job.reason and job.reason != "None" else state.lower()
            return self._set(replace(base, state=ServerState.STARTING, ready_at=None, detail=f"job {why}"))
        if state == "RUNNING" and not record.stopped and not self._stopping:
            if self._address is None or self._address[0] != record.job:
                await self._note_address(record.job, job.first)
            return await self._serving(record, base)
        if record.stopped or self._stopping:
            return self._set(
                replace(
                    base,
                    state=ServerState.STOPPING if state in ("RUNNING", "COMPLETING") else ServerState.STOPPED,
                    ready_at=None,
                    detail=f"job {state.lower()}" if state else "",
                )
            )
        await self._forget_forward()
        if state == "COMPLETING":  # ending without a stop: its final state and exit code come once it has ended
            return self._set(
                replace(base, state=ServerState.CRASHED, ready_at=None, detail="the job is ending without a stop (COMPLETING)")
            )
        if self._crash_for != record.job:
            self._crash_for = record.job
            tail = tuple(await self.log_tail())
            why = f"the job ended {state or 'and left Slurm'}{job.ended}"
            return self._set(replace(base, state=ServerState.CRASHED, ready_at=None, log_tail=tail, detail=why))
        return self._set(replace(base, state=ServerState.CRASHED, ready_at=None, log_tail=self.status.log_tail, detail=self.status.detail))

    async def _serving(self, record: ServerRecord, base: ServerStatus) -> ServerStatus:
        try:
            healthy, why = await self._health(record)
        except NoHealthRoute as e:
            healthy, why = False, str(e)
        if healthy:
            ready_at = self.status.ready_at if self.status.state == ServerState.READY else time.time()
            model = self.status.model or await self._model_name(record)
            return self._set(replace(base, state=ServerState.READY, ready_at=ready_at, model=model, detail=f"on {self.nodelist}"))
        return self._set(replace(base, state=ServerState.STARTING, ready_at=None, detail=f"job running; {why}"))

    async def _job(self, job: int, *, fresh: bool = False) -> Job | None:
        """The job as Slurm says it: squeue while it is queued or running, then scontrol; asked at most every
        JOB_POLL_S unless `fresh`; None when neither answers (slurmctld busy, the link down)."""
        known = self.job
        if not fresh and known is not None and time.monotonic() - known.at < JOB_POLL_S and self._job_id == job:
            return known
        queued = await self.conn.run(["squeue", "-h", "-j", str(job), "-o", "%T|%r|%N|%B"], timeout=20)
        fields = queued.stdout.strip().split("|") if queued.ok else []
        if len(fields) == 4 and fields[0]:
            found = Job(visible(fields[0]), visible(fields[1]), visible(fields[2]), fields[3] if fields[3] not in ("", "(null)") else "")
        else:
            shown = await self.conn.run(["scontrol", "-o", "show", "job", str(job)], timeout=20)
            if not shown.ok and not queued.ok:
                return None
            facts = _facts(shown.stdout) if shown.ok else {}
            found = Job(
                visible(facts.get("JobState", "")),
                visible(facts.get("Reason", "")),
                visible(facts.get("NodeList", "")),
                facts.get("BatchHost", ""),
                f", exit code {visible(facts['ExitCode'])}" if "ExitCode" in facts else "",
            )
        self.job, self._job_id = found, job
        return found

    async def _note_address(self, job: int, node: str) -> None:
        """The first node's address (its NodeAddr), kept for the job: where the forward goes. Asked of Slurm, never
        taken from a file on the host."""
        if not node:
            return
        shown = await self.conn.run(["scontrol", "-o", "show", "node", node], timeout=20)
        address = _facts(shown.stdout).get("NodeAddr", "") if shown.ok else ""
        if ADDRESS.fullmatch(address):
            self._address = (job, address)

    async def job_gpus(self) -> list[tuple[str, Sample | AgentError]]:
        """Each node of the running job ("rank R NODE") with one sample of its GPUs, or why it could not be read; []
        when no job of pivot's runs."""
        record = self.record
        if (
            record is None
            or record.job is None
            or record.stopped
            or not self.nodelist
            or self.status.state not in (ServerState.STARTING, ServerState.READY)
        ):
            return []
        names = await self.conn.run(["scontrol", "show", "hostnames", self.nodelist], timeout=20)
        nodes = [visible(n) for n in names.stdout.split()] if names.ok else []
        if not nodes:
            return []
        return list(
            zip(
                [f"rank {r} {node}" for r, node in enumerate(nodes)],
                await asyncio.gather(*(self._node_sample(record.job, node) for node in nodes)),
                strict=True,
            )
        )

    async def _node_sample(self, job: int, node: str) -> Sample | AgentError:
        """One step on one node (a step of one task: srun's --label would cut the agent's long lines into labelled
        pieces, and tasks sharing a step may interleave theirs)."""
        try:
            return await self.agent.sample_once(
                via=("srun", "--overlap", f"--jobid={job}", "--nodes=1", "--ntasks=1", f"--nodelist={node}", "--quiet")
            )
        except SampleParseError as e:  # a line of the node's own on the step's output: said on the node's line
            return AgentError("query-failed", visible(str(e)))

    # -- checks and actions ---------------------------------------------------
    async def preflight(self, profile: Profile, *, skip: frozenset[str] = frozenset()) -> list[Check]:
        """What the login node can tell: sbatch, the partition, the launcher and the model path where the login node
        sees them (the nodes may see more: a warning, not a failure), the flags known to the launcher's --help."""
        checks = []
        sbatch = await self.conn.run(["sh", "-c", "command -v sbatch"])
        checks.append(Check("sbatch", sbatch.ok, visible(sbatch.stdout.strip()) or "sbatch not found on the login node"))
        if self.spec.partition:
            part = await self.conn.run(["sinfo", "-h", "-p", self.spec.partition, "-o", "%a %D"])
            known = part.ok and bool(part.stdout.strip())
            checks.append(
                Check(
                    "partition",
                    known,
                    f"{self.spec.partition}: " + (visible(part.stdout.strip()) + " (avail, nodes)" if known else "no such partition"),
                )
            )
        argv = await self.resolved_argv(profile)
        which = await self.conn.run(["sh", "-c", 'command -v "$1"', "sh", argv[0]])
        checks.append(
            Check(
                "launcher",
                True,
                visible(which.stdout.strip()) if which.ok else f"{argv[0]} not found on the login node: the nodes may have it",
                warning=not which.ok,
            )
        )
        model = await self.conn.expand(profile.model_path)
        seen = (await self.conn.run(["test", "-e", model])).ok
        checks.append(
            Check("model path", True, model if seen else f"{model} not seen from the login node: the nodes may see it", warning=not seen)
        )
        if which.ok and "flags-known" not in skip:  # with the ranks' own flags, as the job will add them
            ranked = (
                replace(profile, flags={**profile.flags, **profile.engine.node_flags(2, 1, "node0", profile.dist_port)})
                if profile.nodes_needed > 1
                else profile
            )
            checks.append((await check_flags(self.agent, ranked, argv))[0])
        if profile.host in ("127.0.0.1", "localhost", "::1"):
            checks.append(
                Check(
                    "host",
                    True,
                    f"the server binds {profile.host} on its node: only a login node that is "
                    'that node reaches it (host = "0.0.0.0" in the profile)',
                    warning=True,
                )
            )
        return checks

    async def _start(self, profile: Profile, *, force: bool, skip: frozenset[str]) -> list[Check]:
        current = await self.poll()
        if current.state.running:
            raise LifecycleError(f"a server is already {current.state} ({current.profile}, job {current.job}): stop it or switch")
        checks = await self.preflight(profile, skip=skip)
        if not force and not all(c.ok for c in checks):
            raise PreflightFailed(checks)
        workdir = await self.conn.expand(self.spec.workdir.rstrip("/"))
        argv = await self.resolved_argv(profile)
        await self.conn.upload(batch_script(profile, argv).encode(), f"{workdir}/{SCRIPT}")
        await self.conn.run(["sh", "-c", f"[ -f {LOG} ] && mv -f {LOG} {LOG}.1; :"], cwd=self.spec.workdir)
        options = [
            f"--job-name=pivot-{profile.name}",
            f"--nodes={profile.nodes_needed}",
            "--ntasks-per-node=1",
            f"--output={workdir}/{LOG}",
            f"--chdir={workdir}",
            *([f"--partition={self.spec.partition}"] if self.spec.partition else []),
            *self.spec.sbatch_args,
        ]
        submitted = await self.conn.run(["sbatch", "--parsable", *options, f"{workdir}/{SCRIPT}"], cwd=self.spec.workdir, timeout=60)
        job = submitted.stdout.strip().split(";")[0]
        if not submitted.ok or not job.isdigit():
            raise LifecycleError(f"sbatch refused {profile.name}: {visible(submitted.stderr.strip()) or submitted.exit_status}")
        record = ServerRecord(
            profile.name, argv, 0, None, time.time(), profile.host, profile.port, profile.kind, health=profile.health_paths, job=int(job)
        )
        await self.write_record(record)
        self.record = record
        self._stopping, self._health_failures, self._crash_for, self.job = False, 0, None, None
        self.status = ServerStatus(ServerState.STOPPED)
        self._set(ServerStatus(ServerState.STARTING, profile.name, None, record.started, job=record.job, detail="job submitted"))
        return checks

    async def stop(self, *, during: str | None = None, via: str | None = None) -> StopReport:
        """scancel, then the job followed until Slurm says it ended (its nodes are Slurm's to clean)."""
        record = await self.read_record()
        if record.job is None:
            raise LifecycleError(f"no Slurm job started by pivot on {self.spec.name}")
        self._stopping = True
        self._set(replace(self.status, state=ServerState.STOPPING))
        try:
            cancelled = await self.conn.run(["scancel", str(record.job)], timeout=30)
            if not cancelled.ok:
                raise LifecycleError(f"scancel {record.job}: {visible(cancelled.stderr.strip()) or cancelled.exit_status}")
            await self.write_record(replace(record, stopped=True))
            await self._forget_forward()
            deadline, state = time.monotonic() + STOP_WAIT_S, "RUNNING"
            while time.monotonic() < deadline:
                job = await self._job(record.job, fresh=True)
                state = job.state if job is not None else state  # no answer: as it was
                if state not in PENDING | {"RUNNING", "COMPLETING"}:
                    break
                await asyncio.sleep(1.0)
            if state in PENDING | {"RUNNING", "COMPLETING"}:
                report = StopReport((), (), problem=f"scancel sent, but job {record.job} is still {state} after {STOP_WAIT_S:.0f} s")
            else:
                report = StopReport((), (), note=f"stopped: job {record.job} " + (f"ended {state}" if state else "left Slurm"))
            self.last_stop = report
            if self.events is not None:
                self.events.append(
                    Stop(
                        via=via or self.via,
                        host=self.spec.name,
                        profile=visible(record.profile),
                        pid=0,
                        outcome=report.describe(),
                        during=during,
                    )
                )
            await self.poll()
            return report
        finally:
            self._stopping = False


def node_line(name: str, sample: Sample | AgentError, threshold_mib: float) -> str:
    """One node of a job: "rank 0 n1: 4 of 8 GPUs hold 477.4 GiB, 5 processes; utilization 12 %"."""
    if isinstance(sample, AgentError):
        return f"{name}: cannot read its GPUs ({sample.message})"
    util = [g.util_pct for g in sample.gpus if g.util_pct is not None]
    return f"{name}: {idle_line(sample, threshold_mib)}" + (f"; utilization {sum(util) / len(util):.0f} %" if util else "")


def lifecycle_of(
    conn: Connection, spec: HostSpec, agent: RemoteTelemetry, *, peers: Peers | None = None, **options: Any
) -> ServerLifecycle:
    """The host's server lifecycle: a Slurm login node's runs its servers as jobs; a GPU host's, given the other hosts
    (`peers`), can lead a server across nodes."""
    if spec.role == "slurm":
        return SlurmLifecycle(conn, spec, agent, **options)
    if peers is not None:
        return ClusterLeader(conn, spec, agent, peers=peers, **options)
    return ServerLifecycle(conn, spec, agent, **options)

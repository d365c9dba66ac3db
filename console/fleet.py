"""Every GPU host of the config at a glance: one look per host (link, GPUs, stray processes, the managed server),
all hosts at once on one event loop, a host that does not answer in time said so without holding up the others."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from console.config import Config
from console.gpu.samples import AgentError, Sample
from console.remote.errors import RemoteError
from console.session import Session
from console.untrusted import visible

COLUMNS = ("HOST", "LINK", "RTT", "GPUS BUSY", "MEM GiB", "STRAY", "SERVER", "NOTE")
LOOK_TIMEOUT_S = 20.0  # per host: connect, one sample, one look at its server


@dataclass(frozen=True)
class HostView:
    host: str
    state: str  # "up" or "unreachable"
    rtt_ms: float | None = None
    gpus: int | None = None  # None: not read (no GPUs, or the GPUs could not be read: see problem)
    busy: int | None = None  # GPUs holding more than the idle threshold
    mem_used_gib: float | None = None
    mem_total_gib: float | None = None
    stray: int | None = None  # processes holding GPU memory outside the managed server
    server: str | None = None  # the managed server's state and profile ("ready demo-eagle3")
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": "host", **dataclasses.asdict(self)}

    def sampled(self, sample: Sample, threshold_mib: float) -> HostView:
        """This view with a sample's figures."""
        used = sum(g.mem_used_mib or 0 for g in sample.gpus)
        total = sum(g.mem_total_mib or 0 for g in sample.gpus)
        return dataclasses.replace(
            self,
            gpus=len(sample.gpus),
            busy=len(sample.busy_gpus(threshold_mib)),
            mem_used_gib=round(used / 1024, 1),
            mem_total_gib=round(total / 1024, 1),
            stray=len({p.pid for p in sample.stray}),
        )

    def cells(self) -> tuple[Text | str, ...]:
        """One line of COLUMNS, for `pivot gpus --all` and the fleet screen."""
        return (
            Text(self.host),
            Text(self.state, style="green" if self.state == "up" else "bold red"),
            f"{self.rtt_ms:.0f} ms" if self.rtt_ms is not None else "—",
            f"{self.busy}/{self.gpus}" if self.gpus is not None else "—",
            f"{self.mem_used_gib:.0f}/{self.mem_total_gib:.0f}" if self.mem_total_gib else "—",
            Text(str(self.stray), style="yellow" if self.stray else "") if self.stray is not None else "—",
            Text(self.server or "—"),
            Text(self.problem or "", style="dim"),
        )


async def look(config: Config, name: str, timeout: float = LOOK_TIMEOUT_S) -> HostView:
    """One host as it is now; never raises for the host's sake (unreachable, no driver: said in the view)."""
    async with Session(config, name) as session:
        try:
            return await asyncio.wait_for(_look(session, config.idle_threshold_mib), timeout)
        except (RemoteError, TimeoutError, OSError) as e:
            return HostView(name, "unreachable", problem=visible(str(e)) or f"no answer within {timeout:g} s")
        except Exception as e:  # noqa: BLE001 - one host's fault is its own line, never the others' loss
            return HostView(name, "error", problem=visible(f"{type(e).__name__}: {e}"))


async def _look(session: Session, threshold_mib: float) -> HostView:
    await session.connect()
    assert session.spec is not None
    name = session.spec.name
    measured = asyncio.ensure_future(session.conn.round_trip())  # its own session, beside the poll's
    measured.add_done_callback(lambda t: t.cancelled() or t.exception())  # a failure of both is the poll's to say
    try:
        server = None
        if session.lifecycle is not None:
            status = await session.lifecycle.poll()
            server = visible(status.headline())
        rtt_s = await measured
    finally:
        measured.cancel()
    view = HostView(name, "up", rtt_ms=round(rtt_s * 1000, 1) if rtt_s is not None else None, server=server)
    if not session.spec.gpus:
        return dataclasses.replace(view, problem="no GPUs (gpus = false)")
    sample = await session.telemetry.sample_once()
    if isinstance(sample, AgentError):
        return dataclasses.replace(view, problem=visible(sample.message))
    return view.sampled(sample, threshold_mib)


def gpu_hosts(config: Config) -> list[str]:
    return [name for name, spec in config.hosts.items() if spec.role in ("gpu", "slurm")]


async def look_all(config: Config, names: list[str] | None = None) -> list[HostView]:
    """Every GPU host (or those named), looked at together, in the config's order."""
    return list(await asyncio.gather(*(look(config, name) for name in names or gpu_hosts(config))))


class FleetWatch:
    """Every GPU host followed at once on this event loop: each host's telemetry stream (one agent channel per host)
    and its server's state every few seconds. `views()` is the fleet as last heard, without waiting for anyone."""

    SERVER_POLL_S = 3.0

    def __init__(self, config: Config, names: list[str] | None = None):
        self.config = config
        self.sessions = {name: Session(config, name) for name in names or gpu_hosts(config)}
        self._latest: dict[str, Any] = {}  # host -> its last Sample, AgentError or LinkDown
        self._server: dict[str, str] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        for name, session in self.sessions.items():
            self._tasks.append(asyncio.create_task(self._follow(name, session), name=f"fleet-{name}"))
            if session.lifecycle is not None:
                self._tasks.append(asyncio.create_task(self._poll(name, session), name=f"fleet-server-{name}"))

    async def _follow(self, name: str, session: Session) -> None:
        if session.spec is not None and not session.spec.gpus:
            self._latest[name] = AgentError("no-gpus", "no GPUs (gpus = false)")
            return
        async for event in session.telemetry.events():
            self._latest[name] = event

    async def _poll(self, name: str, session: Session) -> None:
        assert session.lifecycle is not None
        while True:
            try:
                self._server[name] = visible((await session.lifecycle.poll()).headline())
            except Exception as e:  # noqa: BLE001 - said on the host's line; the next poll tries again
                self._server[name] = visible(f"? ({type(e).__name__})")
            await asyncio.sleep(self.SERVER_POLL_S)

    def sample(self, name: str) -> Sample | None:
        """The host's last sample, if its last word was one."""
        event = self._latest.get(name)
        return event if isinstance(event, Sample) else None

    def views(self) -> list[HostView]:
        from console.gpu.telemetry import LinkDown
        from console.remote.state import ConnState

        threshold = self.config.idle_threshold_mib
        out = []
        for name, session in self.sessions.items():
            event, server = self._latest.get(name), self._server.get(name)
            last = session.conn.last_event
            up = last is not None and last.state == ConnState.UP
            rtt = round(last.rtt_s * 1000, 1) if up and last is not None and last.rtt_s is not None else None
            state = "up" if up else "connecting" if last is None else str(last.state.value)
            view = HostView(
                name,
                state,
                rtt_ms=rtt,
                server=server,
                problem=visible(last.reason) if last is not None and not up and last.reason else None,
            )
            if isinstance(event, Sample):
                view = view.sampled(event, threshold)
            elif isinstance(event, AgentError | LinkDown):
                said = event.message if isinstance(event, AgentError) else event.reason
                view = dataclasses.replace(view, problem=view.problem or visible(said))
            out.append(view)
        return out

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(s.close() for s in self.sessions.values()), return_exceptions=True)

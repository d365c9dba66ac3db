"""Sweeps, one implementation for the Sweep pane, `pivot sweep` and a runbook's sweep and refine steps: what the
run records about the server, the run created (or the run resumed, repeated or refined, checked to be the one
this server measured), one `sweep` event, the load generator in its own process, and one `swept` event at the end.

Whoever starts a sweep drives it through `SweepHandle.events()`; anyone else (the Sweep pane, for a sweep a
runbook started) follows it by subscribing to the handle, which `Sweeps` announces to its listeners.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from console.config import Config, HostSpec
from console.events import EventLog, Sweep, Swept
from console.remote.errors import RemoteError
from console.server.state import ServerState, ServerStatus
from console.settings import SweepSettings
from console.sweep import prompt_sets
from console.sweep.loadgen.runner import SweepProcess, describe_server, identity_mismatch
from console.sweep.model import PromptSetFacts, RunMeta, Said, Shown, SweepDone, SweepStarted
from console.sweep.prompt_sets import PromptSetError
from console.sweep.runs.files import pending_spool
from console.sweep.runs.store import Run, RunError, create_run
from console.untrusted import decode, visible

if TYPE_CHECKING:
    from console.remote import Connection
    from console.server.lifecycle import Lifecycle

GONE = (ServerState.CRASHED, ServerState.STOPPED)  # the managed server's process is not there
SERVER_LOOK_S = 3.0  # while a sweep runs, its server is looked at at least this often (a crash fails the level at once)

Subscriber = Callable[[Shown], None]


@dataclass
class SweepHandle:
    run: Run
    settings: SweepSettings
    process: SweepProcess
    how: str  # new, resume, repeat, refine
    via: str = "cli"
    subscribers: list[Subscriber] = field(default_factory=list)
    ended: list[Callable[[SweepHandle], None]] = field(default_factory=list)
    end: str | None = None  # done, stopped, aborted, failed; None while it runs
    reason: str | None = None
    on_host: str | None = None  # the machine whose load generator sends the requests, where it runs on the GPU host
    watch: Callable[[], Coroutine[Any, Any, None]] | None = None  # looks at the managed server while the sweep runs

    def subscribe(self, callback: Subscriber, *, ended: Callable[[SweepHandle], None] | None = None) -> None:
        """Each event as it comes; `ended` once the run's files are finished."""
        self.subscribers.append(callback)
        if ended is not None:
            self.ended.append(ended)

    async def events(self) -> AsyncIterator[Shown]:
        """Run the load generator to its end, handing each event to the subscribers and the caller."""
        watcher = asyncio.create_task(self.watch(), name="sweep-server-watch") if self.watch is not None else None
        try:
            async for event in self.process.events():
                self._note(event)
                for callback in list(self.subscribers):
                    callback(event)
                yield event
        finally:
            if watcher is not None:
                watcher.cancel()
            self.end = self.end or "aborted"  # the caller went away: the process was ended
            for on_end in list(self.ended):
                on_end(self)

    def _note(self, event: Shown) -> None:
        if isinstance(event, SweepStarted) and event.client is not None and event.client.path == "on-host":
            self.on_host = visible(event.client.machine or "the host")
        if isinstance(event, Said) and event.type == "failed":
            self.end, self.reason = "failed", visible(event.message)
        elif isinstance(event, SweepDone) and self.end is None:
            if event.failed:
                self.end, self.reason = "failed", visible(event.failed)
            else:
                self.end = "aborted" if event.aborted else "stopped" if event.stopped else "done"

    def stop(self) -> None:
        """After the level in progress; every finished level is kept."""
        self.process.stop()

    def abort(self) -> None:
        """Now; every finished request is kept."""
        self.process.abort()


class ServerBusy(RunError):
    """The server is already serving another client's requests: their load would be in the numbers."""


async def busy(url: str) -> dict[str, int]:
    """What the server says it is serving now (running, queued), from its /metrics; empty when it does not say or
    cannot be reached (the load generator will say what it cannot reach). The standard library's HTTP, in a thread:
    neither the console's first screen nor a sweep's command waits for the load generator's client to load."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(_busy, url), BUSY_S)
    except TimeoutError:  # (its thread ends at its socket's own timeout)
        return {}


def _busy(url: str) -> dict[str, int]:
    import http.client
    import urllib.parse

    from console.sweep.loadgen.gauges import server_gauges

    parts = urllib.parse.urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        connection = kind(parts.hostname or "127.0.0.1", parts.port, timeout=5)
        try:
            connection.request("GET", parts.path.rstrip("/") + "/metrics")
            response = connection.getresponse()
            body = response.read(METRICS_BODY) if response.status == 200 else b""
        finally:
            connection.close()
    except (OSError, http.client.HTTPException, ValueError):
        return {}
    gauges = server_gauges(decode(body))
    return {k: int(gauges[k]) for k in ("running", "queued") if k in gauges}


METRICS_BODY = 1 << 20  # what is read of /metrics: the server's word, not a measurement
BUSY_S = 10.0  # how long the check waits for it in all


async def read_prompt_set(settings: SweepSettings) -> PromptSetFacts | None:
    """The set the sweep's prompts come from, read whole before anything starts (off the console's loop: a large file
    takes a second); None for synthetic prompts. RunError names the file and its line where it cannot be read."""
    if settings.prompts == "synthetic":
        if settings.output_lengths == "set":
            raise RunError('output_lengths = "set": synthetic prompts have no answers to take lengths from (name a prompt set)')
        return None
    try:
        read = await asyncio.to_thread(prompt_sets.load, settings.prompts, settings.turns)
        if settings.output_lengths == "set":
            prompt_sets.answer_lengths(read, settings.max_tokens)
    except PromptSetError as e:
        raise RunError(f"prompts: {e}") from None
    return PromptSetFacts(**read.facts())


class SweepSession(Protocol):
    """What sweeps need of their session (console/session.py Session, which makes them)."""

    config: Config
    spec: HostSpec | None
    events: EventLog
    via: str
    lifecycle: Lifecycle | None

    @property
    def conn(self) -> Connection: ...

    @property
    def host_label(self) -> str: ...


class Sweeps:
    def __init__(self, session: SweepSession):
        self.session = session
        self.listeners: list[Callable[[SweepHandle], None]] = []
        self.current: SweepHandle | None = None
        if session.lifecycle is not None:
            session.lifecycle.add_listener(self._server_seen)

    def _server_seen(self, status: ServerStatus) -> None:
        """The managed server's process ended (crashed, or stopped outside this sweep) while a sweep of it runs: its
        load generator is told, so that the level fails now rather than after waiting for an answer (issue 36)."""
        current = self.current
        if current is not None and current.end is None and not current.run.meta.url and status.state in GONE:
            current.process.server_gone()

    def add_listener(self, callback: Callable[[SweepHandle], None]) -> None:
        """Told of every sweep started through this session, before its first event."""
        self.listeners.append(callback)

    async def start(
        self,
        settings: SweepSettings,
        *,
        run: Run | None = None,
        how: str = "new",
        levels: list[int] | None = None,
        url: str | None = None,
        other_server: bool = False,
        allow_busy: bool = False,
        via: str | None = None,
    ) -> SweepHandle:
        """A sweep of the running server (or of `url`, directly): a new run, or `run` resumed (`how="resume"`), or
        `levels` of it measured again and merged (`how="repeat"` or `"refine"`). Raises RunError with one line; ServerBusy
        (before anything is created) when the server already serves requests, unless `allow_busy`."""
        session = self.session
        meta = RunMeta(host="direct", profile="direct", url=url)
        target = ["--url", url] if url else []
        if url is None:
            if session.config.path is None or session.spec is None:
                raise RunError("a sweep over SSH needs a host from a pivot.toml (or give --url)")
            meta, address, port = await describe_server(session.conn, session.config, session.spec.name)
            target = ["--config", str(session.config.path), "--host", session.spec.name, "--address", address, "--port", str(port)]
        prompt_set = await read_prompt_set(settings)
        kept = run.meta.prompt_set if run is not None else None
        if run is not None and kept is not None and (prompt_set is None or prompt_set.sha256 != kept.sha256):
            raise RunError(
                f"run {run.name} sent {kept}; {settings.prompts} is now "
                f"{prompt_set or 'synthetic prompts'}: its levels would not measure the same requests (a new run takes them)"
            )
        # (a resume whose last level the host still measures: that load is its own, and it is fetched before the rest)
        if not allow_busy and not (how == "resume" and run is not None and pending_spool(run.dir) is not None):
            await self._check_idle(url, (address, port) if url is None else None)
        if run is None:
            run = create_run(
                session.config.campaign_dir, meta.model_copy(update={"settings": settings.to_dict(), "prompt_set": prompt_set})
            )
        elif (mismatch := identity_mismatch(run.meta, meta)) and not other_server:
            raise RunError(
                f"run {run.name} was measured on another server ({mismatch}): switch back to it, or give --other-server to add to it anyway"
            )
        repeat = levels if how in ("repeat", "refine") else None
        requests = settings.requests if repeat and isinstance(settings.requests, int) else None
        process = SweepProcess(run, target, resume=how == "resume", repeat=repeat, requests=requests)
        session.events.append(
            Sweep(
                via=via or session.via,
                host=session.host_label,
                run=run.name,
                profile=run.profile,
                levels=repeat or settings.level_keys(),
                how=how,
            )
        )
        handle = SweepHandle(run, settings, process, how, via=via or session.via)
        handle.ended.append(self._ended)
        if url is None and session.lifecycle is not None:
            handle.watch = self._look_while_it_runs
        self.current = handle
        for callback in list(self.listeners):
            callback(handle)
        return handle

    async def _check_idle(self, url: str | None, server: tuple[str, int] | None) -> None:
        forward = None
        try:
            if url is None:
                forward = await self.session.conn.forward(*(server or ("127.0.0.1", 0)))
                url = forward.url
            now = await busy(url)
        except (TimeoutError, RemoteError, OSError):
            return  # the load generator will say what it cannot reach
        finally:
            if forward is not None:
                forward.close()
        if now.get("running") or now.get("queued"):
            raise ServerBusy(
                f"the server is already serving {now.get('running', 0)} request(s) ({now.get('queued', 0)} "
                "queued): another client's load would be in the numbers"
            )

    async def _look_while_it_runs(self) -> None:
        """Look at the managed server while a sweep of it runs, where nothing else has lately (a headless `pivot
        sweep` or runbook; the console's Server pane polls it every second or three): its process seen gone reaches
        the load generator (_server_seen), and the level fails at once instead of after server_wait_s."""
        lifecycle = self.session.lifecycle
        assert lifecycle is not None
        while True:
            await asyncio.sleep(SERVER_LOOK_S)
            if time.monotonic() - lifecycle.looked_at >= SERVER_LOOK_S:
                try:
                    await lifecycle.poll()
                except Exception:  # noqa: BLE001 - a look that fails is the sweep's own errors' to say; the next one tries again
                    pass

    def _ended(self, handle: SweepHandle) -> None:
        if self.current is handle:
            self.current = None
        self.session.events.append(Swept(via=handle.via, run=handle.run.name, end=handle.end or "aborted", reason=handle.reason))

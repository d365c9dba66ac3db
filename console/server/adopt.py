"""A server pivot did not start, or whose record was lost, serving a profile's port: found, shown as what it is, and
taken over (`pivot server adopt`) so that pivot follows and stops it from then on."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

from console.events import Adopt
from console.server.lifecycle import ServerLifecycle
from console.server.profiles import Profile
from console.server.scripts import ADOPT
from console.server.state import LifecycleError, ServerRecord, ServerState, ServerStatus, Unmanaged
from console.untrusted import visible


async def unmanaged(self: ServerLifecycle, host: str, port: int) -> Unmanaged | None:
    """Whoever serves host:port on this host, when it is not the server pivot manages (its record's process); None
    when the port is free or served by the managed server."""
    status, lines = await self.agent.agent("port", host, str(port))
    if status == 0 or not lines:
        return None
    found = lines[0].get("listener") if isinstance(lines[0], dict) else None
    if not isinstance(found, dict):
        return Unmanaged(port, None, None, "", ())
    leader, ticks, argv = found.get("leader"), found.get("start_ticks"), found.get("argv")
    if not isinstance(leader, int) or isinstance(leader, bool) or leader < 1:
        return Unmanaged(port, None, None, "", ())
    record = self.record
    if record is not None and not record.stopped and record.pid == leader:
        return None
    words = tuple(visible(a) for a in argv if isinstance(a, str)) if isinstance(argv, list) else ()
    return Unmanaged(
        port,
        leader,
        ticks if isinstance(ticks, int) and not isinstance(ticks, bool) else None,
        visible(str(found.get("cmd", "")))[:200],
        words,
    )


async def adopt(self: ServerLifecycle, profile: Profile, found: Unmanaged, *, via: str | None = None) -> ServerRecord:
    """Take over a server pivot did not start as `profile`'s: its record and pid file written under the host's
    lock, if the record is still the one the last poll read. Its process group is what a stop then ends."""
    current = await self.poll()
    if current.state.running:
        raise LifecycleError(f"{current.profile} (pid {current.pid}) is the server pivot manages here: stop it first")
    if found.pid is None or found.start_ticks is None:
        raise LifecycleError(f"port {found.port} is served by a process pivot cannot see (another user's?): nothing to adopt")
    record = ServerRecord(
        profile.name,
        list(found.argv) or [found.cmd],
        found.pid,
        found.start_ticks,
        time.time(),
        profile.host,
        profile.port,
        profile.kind,
        health=profile.health_paths,
    )
    text = json.dumps(asdict(record), indent=1)
    result = await self.conn.run(["sh", "-c", ADOPT, "sh", self.record_text or "", text, str(found.pid)], cwd=self.spec.workdir, timeout=30)
    if not result.ok:
        raise LifecycleError(f"{self.spec.name}: not adopted: {visible(result.stderr.strip()) or result.exit_status}")
    if self.events is not None:
        self.events.append(Adopt(via=via or self.via, host=self.spec.name, profile=profile.name, pid=found.pid))
    self.status = ServerStatus(ServerState.STOPPED)  # learnt afresh: ready_at, model
    await self.poll()
    return record

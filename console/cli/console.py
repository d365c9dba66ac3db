"""`pivot`: the console on a host (or on this machine's GPUs)."""

from __future__ import annotations

import asyncio
import importlib
from types import ModuleType

from console import config
from console.cli.target import Globals
from console.gpu.telemetry import EarlyStream
from console.session import Session


def console(g: Globals) -> int:
    if g.fleet:
        return open_fleet(config.load(g.config), g.theme, readonly=g.readonly)
    return open_console(config.load(g.config), None if g.local else g.host, g.theme, local=g.local, readonly=g.readonly)


def _import_screen() -> ModuleType:
    """Textual and the app (httpx, for the server's health checks, comes when the Server pane starts its watch)."""
    return importlib.import_module("console.ui.app")


def open_fleet(cfg: config.Config, theme: str | None, *, readonly: bool, hosts_outlive: bool = True) -> int:
    """The fleet; Enter opens the console on a host, and quitting it comes back to the fleet."""
    from console.fleet import gpu_hosts
    from console.ui.fleet_app import FleetApp

    if not gpu_hosts(cfg):
        raise config.ConfigError(cfg.path, "hosts", "no GPU host configured: the fleet has nothing to show")
    fleet = FleetApp(cfg, theme=theme or cfg.theme, readonly=readonly)
    while (host := fleet.run()) is not None:
        open_console(cfg, host, theme, readonly=readonly, host_outlives=hosts_outlive, in_fleet=True)
        # back to the fleet: every line as it was, the cursor on the host just left
        fleet = FleetApp(cfg, theme=theme or cfg.theme, readonly=readonly, remembered=fleet.remembered, cursor_host=host)
    return 0


def open_console(
    cfg: config.Config,
    host: str | None,
    theme: str | None,
    *,
    local: bool = False,
    readonly: bool = False,
    notes: list[str] | None = None,
    host_outlives: bool = True,
    in_fleet: bool = False,
) -> int:
    """notes: lines the help screen shows first (the demo's own host, its config); host_outlives: not the demo's."""
    session = Session(cfg, host, local=local, via="console")  # a bad host name fails here, before the screen opens
    asyncio.run(_console(session, theme or cfg.theme, readonly, notes, host_outlives, in_fleet))
    return 0


async def _console(
    session: Session, theme: str | None, readonly: bool, notes: list[str] | None, host_outlives: bool, in_fleet: bool
) -> None:
    """The SSH link and the telemetry stream start while Textual is imported, in a thread (Textual only for the TUI,
    and a second or so of imports): the first sample is on its way before the screen exists."""
    sampled = session.spec is None or session.spec.gpus  # a host without GPUs (gpus = false) is not sampled
    telemetry = EarlyStream(session.telemetry) if sampled else None
    try:
        app = await asyncio.to_thread(_import_screen)
        await app.PivotApp(
            session, theme=theme, readonly=readonly, notes=notes, telemetry=telemetry, host_outlives=host_outlives, in_fleet=in_fleet
        ).run_async()
    finally:
        if telemetry is not None:
            await telemetry.close()

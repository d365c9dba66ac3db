"""`pivot`: the console on a host (or on this machine's GPUs)."""

from __future__ import annotations

import argparse

from console import config, pivot_toml
from console.session import Session


def cmd_console(args: argparse.Namespace) -> int:
    return open_console(pivot_toml.load(args.config), None if args.local else args.host, args.theme, local=args.local,
                        readonly=args.readonly)


def open_console(cfg: config.Config, host: str | None, theme: str | None, *, local: bool = False,
                 readonly: bool = False, notes: list[str] | None = None) -> int:
    """notes: lines the help screen shows first (the demo's own host, its config)."""
    from console.ui.app import PivotApp  # Textual is imported only for the TUI

    session = Session(cfg, host, local=local, via="console")  # a bad host name fails here, before the screen opens
    PivotApp(session, theme=theme or cfg.theme, readonly=readonly, notes=notes).run()
    return 0

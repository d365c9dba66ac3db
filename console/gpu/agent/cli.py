"""The agent's command line."""

from __future__ import annotations

import argparse

from .checks import run_help, run_port
from .kill import run_kill
from .sample import run_sample


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pivot-agent")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--interval", type=float, default=1.0)
    s.add_argument("--source", choices=["auto", "nvitop", "nvidia-smi"], default="auto")
    s.add_argument("--server-pidfile")
    s.add_argument("--once", action="store_true")
    k = sub.add_parser("kill")
    k.add_argument("--grace", type=float, default=5.0)
    k.add_argument("targets", nargs="+")
    p = sub.add_parser("port")
    p.add_argument("host")
    p.add_argument("port", type=int)
    h = sub.add_parser("help")
    h.add_argument("--cache-dir", default="help-cache")
    h.add_argument("--timeout", type=float, default=180.0)
    h.add_argument("launcher", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "port":
        return run_port(args)
    if args.command == "help":
        args.launcher = args.launcher[1:] if args.launcher[:1] == ["--"] else args.launcher
        if not args.launcher:
            parser.error("help needs the launcher's argv")
        return run_help(args)
    if args.command == "sample":
        if args.interval < 0.25:
            parser.error("--interval must be at least 0.25 s")
        return run_sample(args)
    return run_kill(args)

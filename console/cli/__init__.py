"""The `pivot` command: the console (TUI) and its headless subcommands."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from console import __version__, config, pivot_toml
from console.remote.errors import RemoteError
from console.server.profiles import ProfileError
from console.sweep.store import RunError
from console.tasks.tasklist import TaskError
from console.untrusted import visible


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pivot", description="Control console for LLM inference servers on GPU hosts, over SSH.")
    parser.add_argument("--version", action="version", version=f"pivot {__version__}")
    parser.add_argument("--config", metavar="PATH", help="pivot.toml to use (default: ./pivot.toml, then ~/.config/pivot/pivot.toml)")
    parser.add_argument("--host", metavar="NAME", help="host from the config (default: default_host)")
    parser.add_argument("--theme", metavar="NAME", help="theme for the console")
    parser.add_argument("--local", action="store_true", help="this machine's GPUs through nvitop, no SSH")
    parser.add_argument("--readonly", action="store_true", help="a console without any destructive action")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr (headless commands)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="start a simulated 8-GPU host on loopback and open the console on it")
    demo.add_argument("--serve", action="store_true", help="only run the simulated host, until Ctrl-C")
    demo.add_argument("--dir", type=Path, help="keep the simulated host's files here (default: a temporary directory)")
    demo.add_argument("--gpus", type=int, default=8)
    demo.add_argument("--time-scale", type=float, default=1.0, help="run the simulated server this many times faster")
    demo.add_argument("--server", choices=["eagle3", "baseline", "none"], default="eagle3",
                      help="simulated server already running on the host when the demo starts")
    demo.add_argument("--no-traffic", dest="traffic", action="store_false",
                      help="no background requests to the simulated server (GPUs stay at 0%% utilization)")
    demo.add_argument("--theme", metavar="NAME", default=argparse.SUPPRESS, help="theme for the console")
    demo.add_argument("--readonly", action="store_true", default=argparse.SUPPRESS, help="a console without destructive actions")

    trust = sub.add_parser("trust", help="show a host's key fingerprint and add it to known_hosts once you confirm")
    trust.add_argument("name", metavar="HOST")
    trust.add_argument("--yes", action="store_true", help="do not ask (only after checking the fingerprint another way)")

    gpus = sub.add_parser("gpus", help="print the GPUs and the processes holding GPU memory")
    gpus.add_argument("--watch", action="store_true", help="keep printing, one sample per interval")
    gpus.add_argument("--json", action="store_true", help="one JSON object per sample")

    kill = sub.add_parser("kill", help="kill GPU processes: SIGTERM, SIGKILL after a grace period, then watch the memory")
    kill.add_argument("pids", metavar="PID", type=int, nargs="*")
    kill.add_argument("--stray", action="store_true", help="every process holding GPU memory outside the managed server")
    kill.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    kill.add_argument("--grace", type=float, metavar="S", help="seconds between SIGTERM and SIGKILL (default: kill_grace_s)")
    kill.add_argument("--single", action="store_true", help="signal only the process, not its process group")

    server = sub.add_parser("server", help="the managed server: status, start, stop, restart, switch, logs")
    server.add_argument("action", choices=["status", "start", "stop", "restart", "switch", "logs"])
    server.add_argument("profile", nargs="?", help="profile to start or switch to")
    server.add_argument("--force", action="store_true", help="start even when a preflight check fails")
    server.add_argument("-f", "--follow", action="store_true", help="logs: keep following")
    server.add_argument("--no-wait", dest="wait", action="store_false", help="start/switch/restart: return once launched")

    profiles = sub.add_parser("profiles", help="launch profiles: list, show one's command line, diff two")
    profiles.add_argument("action", nargs="?", choices=["show", "diff"])
    profiles.add_argument("names", nargs="*", metavar="NAME")

    sweep = sub.add_parser("sweep", help="a concurrency sweep against the running server (or --url)")
    sweep.add_argument("--levels", type=lambda s: [int(x) for x in s.split(",")], help="e.g. 1,2,5,10,30,70,100,250")
    sweep.add_argument("--requests", help="per level: auto (max(4C,16)), c (exactly C), or a number")
    sweep.add_argument("--max-tokens", type=int)
    sweep.add_argument("--url", help="the server's base URL, directly (no SSH, no lifecycle)")
    again = sweep.add_mutually_exclusive_group()
    again.add_argument("--resume", metavar="RUN", help="finish an interrupted run: measured levels are kept, failed ones run again")
    again.add_argument("--repeat-uncertain", metavar="RUN",
                       help="measure again the levels of RUN its comparison cannot decide, merged into it")
    again.add_argument("--refine", nargs=2, metavar=("RUN_A", "RUN_B"),
                       help="locate where the drafting decision changes: measure between levels on both runs' servers, "
                            "switching between them")
    sweep.add_argument("--yes", action="store_true", help="with --refine: switch servers without asking")
    sweep.add_argument("--against", metavar="RUN", help="with --repeat-uncertain: the run to compare with (default: its counterpart)")
    sweep.add_argument("--other-server", action="store_true",
                       help="resume or repeat a run although the running server is not the one it measured")
    sweep.add_argument("--json", action="store_true", help="one JSON event per line on stdout")

    runs = sub.add_parser("runs", help="saved sweeps: list, show one, delete")
    runs.add_argument("action", nargs="?", choices=["show", "delete", "import"])
    runs.add_argument("names", nargs="*", metavar="RUN", help="runs; for import: the bench_serving JSONL file")
    runs.add_argument("--name", help="import: the new run's name")
    runs.add_argument("--profile", default="imported", help="import: the profile the results were measured with")
    runs.add_argument("--yes", action="store_true", help="delete: do not ask")

    cmp = sub.add_parser("compare", help="compare runs level by level: crossover, saturation, recommendation")
    cmp.add_argument("names", nargs="+", metavar="RUN")
    cmp.add_argument("--json", dest="fmt", action="store_const", const="json", default="table")
    cmp.add_argument("--csv", dest="fmt", action="store_const", const="csv")
    cmp.add_argument("--markdown", type=Path, metavar="FILE", help="also write a Markdown report")
    cmp.add_argument("--write-profile", action="store_true", help="write the adaptive-speculation config and a profile using it")

    tasks = sub.add_parser("tasks", help="the campaign's task list: list, add, start, done, import, export")
    tasks.add_argument("action", nargs="?", default="list",
                       choices=["list", "add", "start", "done", "cancel", "reset", "delete", "import", "export"])
    tasks.add_argument("args", nargs="*", help="add: the text; start/done/cancel/reset/delete: task numbers; import: a file")
    tasks.add_argument("--priority", choices=["high", "medium", "low"], default="medium")
    tasks.add_argument("--insist", action="store_true", help="start a task although another is in progress")

    run = sub.add_parser("run", help="run a runbook: its tasks' actions in order, stopping at the first failure")
    run.add_argument("runbook", type=Path, help="a runbook TOML (profiles/runbooks/ ships campaign.toml and demo-campaign.toml)")
    run.add_argument("--from", dest="start", type=int, default=1, metavar="N", help="start at the runbook's task N")
    run.add_argument("--yes", action="store_true", help="do not ask before a kill")

    events = sub.add_parser("events", help="the campaign's event log: print it, or export it as JSON lines")
    events.add_argument("--kind", help="only events of this kind (kill, start, stop, switch, sweep, compare, task, …)")
    events.add_argument("--export", type=Path, metavar="FILE", help="write the events as JSON lines to FILE")

    ping = sub.add_parser("ping", help="connect to a host and report the round-trip time")
    ping.add_argument("name", metavar="HOST", nargs="?")

    cfg = sub.add_parser("config", help="show or validate the configuration")
    cfg.add_argument("action", choices=["show", "validate"])
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        match args.command:
            case "demo":
                return cmd_demo(args)
            case "trust":
                return asyncio.run(cmd_trust(args))
            case "ping":
                return asyncio.run(cmd_ping(args))
            case "gpus":
                from console.cli.gpus import cmd_gpus

                return asyncio.run(cmd_gpus(pivot_toml.load(args.config), args.host, watch=args.watch, as_json=args.json, local=args.local))
            case "server":
                from console.cli.server import cmd_server

                if args.action in ("start", "switch") and not args.profile:
                    print(f"pivot: server {args.action} needs a profile (see pivot profiles)", file=sys.stderr)
                    return 2
                return asyncio.run(cmd_server(pivot_toml.load(args.config), args.host, args.action, args.profile,
                                              force=args.force, follow=args.follow, wait=args.wait))
            case "profiles":
                from console.cli.server import cmd_profiles

                return cmd_profiles(pivot_toml.load(args.config), args.action, args.names)
            case "sweep":
                from console.cli.sweep import cmd_sweep

                return cmd_sweep(pivot_toml.load(args.config), args)
            case "runs":
                from console.cli.sweep import cmd_runs

                return cmd_runs(pivot_toml.load(args.config), args.action, args.names, name=args.name, profile=args.profile,
                                yes=args.yes)
            case "compare":
                from console.cli.sweep import cmd_compare

                return cmd_compare(pivot_toml.load(args.config), args.names, fmt=args.fmt, markdown_path=args.markdown,
                                   write_profile=args.write_profile)
            case "tasks":
                from console.cli.tasks import cmd_tasks

                return cmd_tasks(pivot_toml.load(args.config), args.action, args.args, priority=args.priority, insist=args.insist)
            case "run":
                from console.cli.tasks import cmd_run

                return asyncio.run(cmd_run(pivot_toml.load(args.config), args.host, args.runbook, start=args.start, yes=args.yes))
            case "events":
                from console.cli.tasks import cmd_events

                return cmd_events(pivot_toml.load(args.config), args.kind, args.export)
            case "kill":
                from console.cli.gpus import cmd_kill

                if bool(args.pids) == args.stray:
                    print("pivot: kill takes PIDs or --stray (never a name pattern)", file=sys.stderr)
                    return 2
                return asyncio.run(cmd_kill(pivot_toml.load(args.config), args.host, args.pids, stray=args.stray, yes=args.yes,
                                            grace=args.grace, single=args.single, local=args.local))
            case "config":
                return cmd_config(args)
            case _:
                return run_console(pivot_toml.load(args.config), args.host, args.theme, local=args.local, readonly=args.readonly)
    except (config.ConfigError, RemoteError, ProfileError, RunError, TaskError, ValueError) as e:
        print(f"pivot: {visible(str(e))}", file=sys.stderr)
        return 2
    except OSError as e:  # a file named on the command line: which one, and why
        where = f"{e.filename}: " if e.filename else ""
        print(f"pivot: {visible(f'{where}{e.strerror or e}')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug: one line on the operator's screen; -v shows the traceback
        if args.verbose:
            raise
        print(f"pivot: unexpected {type(e).__name__}: {visible(str(e))} (pivot -v {args.command or ''} shows where)",
              file=sys.stderr)
        return 1


def run_console(cfg: config.Config, host: str | None, theme: str | None, *, local: bool = False, readonly: bool = False) -> int:
    from console.ui.app import PivotApp  # Textual is imported only for the TUI

    name = None if local else cfg.host(host).name  # fail on the terminal, before the screen opens
    PivotApp(cfg, name, theme=theme or cfg.theme, readonly=readonly).run()
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    cfg = pivot_toml.load(args.config)
    if cfg.path is None:
        print("pivot: no pivot.toml found (looked in ./pivot.toml and ~/.config/pivot/pivot.toml); see pivot.example.toml")
        return 1 if args.action == "validate" else 0
    if args.action == "validate":
        print(f"{cfg.path}: ok, {len(cfg.hosts)} host(s)")
        return 0
    print(f"# {cfg.path}")
    print(f"default_host = {cfg.default_host!r}\ntheme = {cfg.theme!r}\ncampaign_dir = {str(cfg.campaign_dir)!r}")
    for spec in cfg.hosts.values():
        print(f"\n[hosts.{spec.name}]")
        for key, value in vars(spec).items():
            if key != "name" and value not in (None, (), {}):
                print(f"{key} = {value!r}")
    return 0


async def cmd_trust(args: argparse.Namespace) -> int:
    from console.cli.prompt import ask
    from console.remote import trust

    spec = pivot_toml.load(args.config).host(args.name)
    offered = await trust.fetch_key(spec)
    print(f"{spec.name} ({offered.host_pattern}) offers a {offered.algorithm} key:\n  {offered.fingerprint}")
    if offered.already_trusted:
        print(f"already trusted in {offered.known_hosts}")
        return 0
    if not args.yes:
        answer = ask(f"Add it to {offered.known_hosts}? Check the fingerprint first. [yes/no] ")
        if answer not in ("y", "yes"):
            print("not added")
            return 1
    trust.pin(offered)
    print(f"added to {offered.known_hosts}")
    return 0


async def cmd_ping(args: argparse.Namespace) -> int:
    from console.remote import Connection

    spec = pivot_toml.load(args.config).host(args.name or args.host)
    conn = Connection(spec)
    try:
        await conn.up_now()
        event = conn.last_event
        result = await conn.run(["uname", "-srm"], timeout=10)
        print(f"{event.describe()}; {result.stdout.strip()}")
    finally:
        await conn.close()
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from console.sim.host import SimHost, serve_forever
    from console.sim.state import GpuSpec

    root = args.dir or Path(tempfile.mkdtemp(prefix="pivot-demo-"))
    if args.serve:
        host = SimHost(root, gpus=GpuSpec(count=args.gpus), time_scale=args.time_scale, subreaper=True)
        asyncio.run(serve_forever(host, initial_server=args.server, traffic=args.traffic))
        return 0
    # The host runs in its own process, as a remote host would: it adopts and reaps
    # the simulated server's orphans without touching the console's own children.
    argv = [sys.executable, "-m", "console", "demo", "--serve", "--dir", str(root), "--gpus", str(args.gpus),
            "--time-scale", str(args.time_scale), "--server", args.server, *([] if args.traffic else ["--no-traffic"])]
    # a closed terminal or tmux window must still end the host and remove its files
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log = open(root / "host.log", "w")
    host_proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
    try:
        lines = [host_proc.stdout.readline() for _ in range(2)] if host_proc.stdout else []
        config_line = next((line for line in lines if line.startswith("config: ")), None)
        if config_line is None:
            print(f"pivot: the simulated host did not start; see {root / 'host.log'}", file=sys.stderr)
            return 1
        cfg = pivot_toml.load(config_line.removeprefix("config: ").strip())
        return run_console(cfg, "demo", args.theme, readonly=args.readonly)
    finally:
        host_proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            host_proc.wait(timeout=10)
        if host_proc.poll() is None:
            host_proc.kill()
        log.close()
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

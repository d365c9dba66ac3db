"""The `pivot` command line: every subcommand and its arguments, and the function that runs it (a dotted name,
imported only when that command runs: `pivot --help` loads nothing of the core)."""

from __future__ import annotations

import argparse
from pathlib import Path

from console import version
from console.server.checks import CHECKS

# what console/events.py writes (a test keeps the two the same): a typo is refused, not answered with nothing
EVENT_KINDS = ("kill", "cleanup", "start", "adopt", "stop", "switch", "restart", "sweep", "swept", "profile", "task")


def _levels(text: str) -> list[int]:
    from console.settings import parse_levels

    try:
        return parse_levels(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _count(text: str) -> int:
    """A whole number of 0 or more, or argparse's one line naming the flag and the value."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of 0 or more, got {text!r}")
    return int(text)


class _Version(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        parser.exit(message=f"pivot {version()}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pivot", description="Control console for LLM inference servers on GPU hosts, over SSH.")
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    parser.add_argument("--config", metavar="PATH", help="pivot.toml to use (default: ./pivot.toml, then ~/.config/pivot/pivot.toml)")
    parser.add_argument("--host", metavar="NAME", help="host from the config (default: default_host)")
    parser.add_argument("--theme", metavar="NAME", help="theme for the console")
    parser.add_argument("--local", action="store_true", help="this machine's GPUs through nvitop, no SSH")
    parser.add_argument("--readonly", action="store_true", help="a console without any destructive action")
    parser.add_argument("--fleet", action="store_true", help="every GPU host of the config, one line each; Enter opens one")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr (headless commands)")
    parser.set_defaults(run="console.cli.console:cmd_console")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="start a simulated 8-GPU host on loopback and open the console on it")
    demo.set_defaults(run="console.cli.demo:cmd_demo")
    demo.add_argument("--serve", action="store_true", help="only run the simulated host, until Ctrl-C")
    demo.add_argument(
        "--dir", type=Path, help="keep the simulated host's files here (default: a temporary directory, removed when the demo ends)"
    )
    demo.add_argument(
        "--campaign-dir",
        type=Path,
        metavar="DIR",
        help="keep the demo's campaign (runs, tasks, events) here, to share it between demos (default: "
        "a campaign of its own under ~/.local/share/pivot/demo, kept after the demo; with --dir: "
        "inside it)",
    )
    demo.add_argument("--ephemeral", action="store_true", help="keep nothing: the campaign goes with the host's files")
    demo.add_argument("--gpus", type=int, default=8, help="GPUs of each simulated host (default 8)")
    demo.add_argument(
        "--hosts",
        type=int,
        default=1,
        metavar="N",
        help="N simulated hosts (gpu01 … gpuNN) on N ports, one pivot.toml for them all; the console "
        "opens on the fleet (the first two share a two-node profile, demo-2node)",
    )
    demo.add_argument("--time-scale", type=float, default=1.0, help="run the simulated server this many times faster")
    demo.add_argument(
        "--server",
        choices=["eagle3", "baseline", "none"],
        default="eagle3",
        help="simulated server already running on the host when the demo starts",
    )
    demo.add_argument(
        "--no-traffic",
        dest="traffic",
        action="store_false",
        help="no background requests to the simulated server (GPUs stay at 0%% utilization)",
    )
    demo.add_argument("--theme", metavar="NAME", default=argparse.SUPPRESS, help="theme for the console")
    demo.add_argument("--readonly", action="store_true", default=argparse.SUPPRESS, help="a console without destructive actions")

    trust = sub.add_parser("trust", help="show a host's key fingerprint and add it to known_hosts once you confirm")
    trust.set_defaults(run="console.cli.hosts:cmd_trust")
    trust.add_argument("name", metavar="HOST", help="a host of pivot.toml")
    trust.add_argument("--yes", action="store_true", help="do not ask (only after checking the fingerprint another way)")

    gpus = sub.add_parser("gpus", help="print the GPUs and the processes holding GPU memory")
    gpus.set_defaults(run="console.cli.gpus:cmd_gpus")
    gpus.add_argument("--watch", action="store_true", help="keep printing, one sample per interval")
    gpus.add_argument("--json", action="store_true", help="one JSON object per sample")
    gpus.add_argument("--all", action="store_true", help="every GPU host of the config, one line each")

    kill = sub.add_parser("kill", help="kill GPU processes: SIGTERM, SIGKILL after a grace period, then watch the memory")
    kill.set_defaults(run="console.cli.gpus:cmd_kill")
    kill.add_argument("pids", metavar="PID", type=int, nargs="*", help="the processes to end (as the GPU pane lists them)")
    kill.add_argument("--stray", action="store_true", help="every process holding GPU memory outside the managed server")
    kill.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    kill.add_argument("--grace", type=float, metavar="S", help="seconds between SIGTERM and SIGKILL (default: kill_grace_s)")
    kill.add_argument("--single", action="store_true", help="signal only the process, not its process group")

    server = sub.add_parser("server", help="the managed server: status, start, stop, restart, switch, logs, adopt")
    server.set_defaults(run="console.cli.server:cmd_server")
    server.add_argument(
        "action",
        choices=["status", "start", "stop", "restart", "switch", "logs", "adopt"],
        help="what to do with the host's managed server",
    )
    server.add_argument(
        "profile", nargs="?", help="profile to start or switch to; adopt: the profile whose port a server pivot did not start is serving"
    )
    server.add_argument("--yes", action="store_true", help="adopt: do not ask")
    server.add_argument("--force", action="store_true", help="start even when a preflight check fails")
    server.add_argument(
        "--skip",
        action="append",
        choices=list(CHECKS),
        default=[],
        metavar="CHECK",
        help=f"start without this preflight check (one of {', '.join(CHECKS)}; repeatable)",
    )
    server.add_argument("-f", "--follow", action="store_true", help="logs: keep following")
    server.add_argument("--no-wait", dest="wait", action="store_false", help="start/switch/restart: return once launched")

    profiles = sub.add_parser("profiles", help="launch profiles: list, show one's command line, diff two")
    profiles.set_defaults(run="console.cli.server:cmd_profiles")
    profiles.add_argument("action", nargs="?", choices=["show", "diff"], help="show one, or diff two (default: list them)")
    profiles.add_argument("names", nargs="*", metavar="NAME", help="the profile(s)")

    sweep = sub.add_parser("sweep", help="a concurrency sweep against the running server (or --url)")
    sweep.set_defaults(run="console.cli.sweep:cmd_sweep")
    sweep.add_argument("--levels", type=_levels, help="e.g. 1,2,5,10,30,70,100,250 (measured in rising order, each once)")
    sweep.add_argument(
        "--requests",
        help="per level: auto (4C, at least 16), c (C, one wave, at least 4; [sweep] min_requests sets the least), or a number",
    )
    sweep.add_argument("--max-tokens", type=int, help="tokens each request asks for (default: [sweep] max_tokens)")
    sweep.add_argument("--url", help="the server's base URL, directly (no SSH, no lifecycle)")
    again = sweep.add_mutually_exclusive_group()
    again.add_argument("--resume", metavar="RUN", help="finish an interrupted run: measured levels are kept, failed ones run again")
    again.add_argument(
        "--repeat-uncertain",
        metavar="RUN",
        help="measure again the levels of RUN its comparison cannot decide, as many requests as it estimates "
        "would settle them, compared again after each round (at most 3), merged into RUN",
    )
    again.add_argument(
        "--refine",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        help="locate where the drafting decision changes: measure between levels on both runs' servers, switching between them",
    )
    sweep.add_argument("--yes", action="store_true", help="with --refine: switch servers without asking")
    sweep.add_argument("--against", metavar="RUN", help="with --repeat-uncertain: the run to compare with (default: its counterpart)")
    sweep.add_argument(
        "--other-server", action="store_true", help="resume or repeat a run although the running server is not the one it measured"
    )
    sweep.add_argument(
        "--allow-busy",
        action="store_true",
        help="start although the server already serves another client's requests (a level they share is failed, with the reason)",
    )
    sweep.add_argument("--json", action="store_true", help="one JSON event per line on stdout")

    runs = sub.add_parser("runs", help="saved sweeps: list, show one, delete, import another tool's results")
    runs.set_defaults(run="console.cli.sweep:cmd_runs")
    runs.add_argument("action", nargs="?", choices=["show", "delete", "import"], help="default: list the runs")
    runs.add_argument(
        "names",
        nargs="*",
        metavar="RUN",
        help="runs; for import: results of one server (SGLang bench_serving, vllm bench serve, AIPerf, guidellm)",
    )
    runs.add_argument("--name", help="import: the new run's name")
    runs.add_argument("--profile", default="imported", help="import: the profile the results were measured with")
    runs.add_argument("--yes", action="store_true", help="delete: do not ask")

    cmp = sub.add_parser("compare", help="compare runs level by level: crossover, saturation, recommendation")
    cmp.set_defaults(run="console.cli.compare:cmd_compare")
    cmp.add_argument("names", nargs="+", metavar="RUN", help="two runs (last, previous, or names); more: the first against each")
    cmp.add_argument("--json", dest="fmt", action="store_const", const="json", default="table", help="one JSON object per comparison")
    cmp.add_argument("--csv", dest="fmt", action="store_const", const="csv", help="the per-level table as CSV")
    cmp.add_argument("--markdown", type=Path, metavar="FILE", help="also write a Markdown report")
    cmp.add_argument("--write-profile", action="store_true", help="write the adaptive-speculation config and a profile using it")
    cmp.add_argument("--yes", action="store_true", help="with --write-profile: replace a profile of that name without asking")
    cmp.add_argument(
        "--anyway",
        action="store_true",
        help="compare runs that measured different things (max_tokens, prompts, host, GPUs, …), each difference said above the result",
    )
    cmp.add_argument(
        "--slo",
        metavar="SLO",
        help="how many users each run serves within it, e.g. 'itl_p90_ms<=30,ttft_p90_ms<=500,"
        "user_tok_s>=20' (default: pivot.toml's [compare] slo), with each level's goodput",
    )
    cmp.add_argument(
        "--may-differ",
        action="append",
        default=[],
        metavar="KEY",
        help="let this key differ between the runs (max_tokens, input_tokens, api, extra_body, warmup, "
        "prompts, model, engine, engine_version, host, gpus, nodes, client); repeatable",
    )

    report = sub.add_parser("report", help="runs and their comparison as one HTML file that opens offline, or a chart")
    report.set_defaults(run="console.cli.report:cmd_report")
    report.add_argument("names", nargs="+", metavar="RUN", help="runs (last, previous, or names); the first is compared with each other")
    report.add_argument("-o", "--output", type=Path, required=True, metavar="FILE", help="the file to write")
    report.add_argument(
        "--format",
        choices=["html", "png", "svg"],
        help="html: the whole report (the default, unless FILE ends in .png or .svg); png, svg: the throughput chart alone",
    )
    report.add_argument("--slo", metavar="SLO", help="as pivot compare --slo (default: pivot.toml's [compare] slo)")
    report.add_argument("--anyway", action="store_true", help="compare runs that measured different things, saying so")
    report.add_argument("--may-differ", action="append", default=[], metavar="KEY", help="as pivot compare --may-differ")

    tasks = sub.add_parser("tasks", help="the campaign's task list: list, add, start, done, import, export")
    tasks.set_defaults(run="console.cli.tasks:cmd_tasks")
    tasks.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=["list", "add", "start", "done", "cancel", "reset", "delete", "import", "export"],
        help="default: list the tasks",
    )
    tasks.add_argument("args", nargs="*", help="add: the text; start/done/cancel/reset/delete: task numbers; import: a file")
    tasks.add_argument("--priority", choices=["high", "medium", "low"], default="medium", help="add: the new task's priority")
    tasks.add_argument("--insist", action="store_true", help="start a task although another is in progress")

    run = sub.add_parser("run", help="run a runbook: its tasks' actions in order, stopping at the first failure")
    run.set_defaults(run="console.cli.tasks:cmd_run")
    run.add_argument("runbook", help="a runbook TOML file, or a runbook's name (shipped: campaign, demo-campaign)")
    run.add_argument("--from", dest="start", type=int, default=1, metavar="N", help="start at the runbook's task N")
    run.add_argument("--yes", action="store_true", help="do not ask before a kill")

    events = sub.add_parser("events", help="the campaign's event log: print it, or export it as JSON lines")
    events.set_defaults(run="console.cli.tasks:cmd_events")
    events.add_argument("--kind", choices=EVENT_KINDS, help="only events of this kind")
    events.add_argument("--export", type=Path, metavar="FILE", help="write the events as JSON lines to FILE")
    events.add_argument("--tail", type=_count, metavar="N", help="only the last N (read from the log's end)")

    ping = sub.add_parser("ping", help="connect to a host and report the round-trip time")
    ping.set_defaults(run="console.cli.hosts:cmd_ping")
    ping.add_argument("name", metavar="HOST", nargs="?", help="a host of pivot.toml (default: the default host)")

    cfg = sub.add_parser("config", help="show or validate the configuration")
    cfg.set_defaults(run="console.cli.hosts:cmd_config")
    cfg.add_argument("action", choices=["show", "validate"], help="print it as pivot reads it, or only check it")

    # --config and --host after the command too (`pivot gpus --host gpu2`), as before it; given there, they win
    for command in sub.choices.values():
        command.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        if command is not demo:
            command.add_argument("--host", metavar="NAME", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser

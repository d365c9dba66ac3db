"""The `pivot` command line, on click: every subcommand a typed function whose options say what they take, the
`[sweep]` settings as flags made from their own declarations (console/settings.py), shell completion from click
(`eval "$(_PIVOT_COMPLETE=bash_source pivot)"`). Each command imports what it runs only when it runs: `pivot --help`
loads nothing of the core. A command returns its exit status, or a coroutine that main() runs for it."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from console.cli.target import Globals
from console.cli.types import EVENT_KINDS, Levels, WholeNumber, WithSweepSettings
from console.server.checks import CHECKS

Result = int | Coroutine[Any, Any, int]
F = TypeVar("F", bound=Callable[..., Any])
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


def _set(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, _: click.Parameter, value: Any) -> None:
        if value is not None:
            setattr(ctx.ensure_object(Globals), field, value)

    return callback


def after_command(f: F) -> F:
    """--config and --host after the command too (`pivot gpus --host gpu2`), as before it; given there, they win."""
    f = click.option("--config", metavar="PATH", hidden=True, expose_value=False, callback=_set("config"))(f)
    return click.option("--host", metavar="NAME", hidden=True, expose_value=False, callback=_set("host"))(f)


def command(
    name: str, help: str, group: click.Group | None = None, cls: type[click.Command] = click.Command
) -> Callable[[F], click.Command]:
    """A command of pivot's (or of one of its groups), taking the global options after its name too."""

    def decorate(f: F) -> click.Command:
        text = f"{help}\n\n{f.__doc__}" if f.__doc__ else help  # the docstring says what the arguments are
        made = (group or pivot).command(name, cls=cls, help=text, short_help=help, context_settings=CONTEXT)
        return made(after_command(click.pass_obj(f)))

    return decorate


def listing(name: str, help: str, listed: Callable[[Globals], Result]) -> click.Group:
    """A group of verbs whose name alone lists (`pivot runs`, `pivot tasks`)."""

    @pivot.group(name, invoke_without_command=True, context_settings=CONTEXT, help=help)
    @after_command
    @click.pass_context
    def group(ctx: click.Context) -> Result | None:
        return listed(ctx.ensure_object(Globals)) if ctx.invoked_subcommand is None else None

    return group


@click.group(
    invoke_without_command=True,
    context_settings=CONTEXT,
    help="Control console for LLM inference servers on GPU hosts, over SSH. Without a command: the console.",
)
@click.version_option(message="pivot %(version)s", package_name="pivot-console", version=None)
@click.option("--config", metavar="PATH", help="pivot.toml to use (default: ./pivot.toml, then ~/.config/pivot/pivot.toml)")
@click.option("--host", metavar="NAME", help="host from the config (default: default_host)")
@click.option("--theme", metavar="NAME", help="theme for the console")
@click.option("--local", is_flag=True, help="this machine's GPUs through nvitop, no SSH")
@click.option("--readonly", is_flag=True, help="a console without any destructive action")
@click.option("--fleet", is_flag=True, help="every GPU host of the config, one line each; Enter opens one")
@click.option("-v", "--verbose", is_flag=True, help="log to stderr (headless commands); a failure shows its traceback")
@click.pass_context
def pivot(
    ctx: click.Context, config: str | None, host: str | None, theme: str | None, local: bool, readonly: bool, fleet: bool, verbose: bool
) -> Result | None:
    import logging

    g = ctx.ensure_object(Globals)  # main()'s, which reads verbose and the command after a failure
    g.config, g.host, g.theme, g.local, g.readonly, g.fleet, g.verbose = config, host, theme, local, readonly, fleet, verbose
    g.command = ctx.invoked_subcommand
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(message)s")
    if ctx.invoked_subcommand is not None:
        return None
    from console.cli.console import console

    return console(g)


@command("demo", "start a simulated 8-GPU host on loopback and open the console on it")
@click.option("--serve", is_flag=True, help="only run the simulated host, until Ctrl-C")
@click.option(
    "--dir",
    "root",
    type=click.Path(path_type=Path),
    help="keep the simulated host's files here (default: a temporary directory, removed when the demo ends)",
)
@click.option(
    "--campaign-dir",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="keep the demo's campaign (runs, tasks, events) here, to share it between demos (default: a campaign of its own under "
    "~/.local/share/pivot/demo, kept after the demo; with --dir: inside it)",
)
@click.option("--ephemeral", is_flag=True, help="keep nothing: the campaign goes with the host's files")
@click.option("--gpus", type=click.IntRange(min=1), default=8, show_default=True, help="GPUs of each simulated host")
@click.option(
    "--hosts",
    type=click.IntRange(min=1),
    default=1,
    metavar="N",
    help="N simulated hosts (gpu01 … gpuNN) on N ports, one pivot.toml for them all; the console opens on the fleet "
    "(the first two share a two-node profile, demo-2node)",
)
@click.option(
    "--time-scale", type=click.FloatRange(min=0, min_open=True), default=1.0, help="run the simulated server this many times faster"
)
@click.option(
    "--server",
    type=click.Choice(["eagle3", "baseline", "none"]),
    default="eagle3",
    show_default=True,
    help="simulated server already running on the host when the demo starts",
)
@click.option("--no-traffic", "quiet", is_flag=True, help="no background requests to the simulated server (GPUs stay at 0% utilization)")
@click.option("--theme", metavar="NAME", help="theme for the console")
@click.option("--readonly", is_flag=True, help="a console without destructive actions")
def demo(
    g: Globals,
    serve: bool,
    root: Path | None,
    campaign_dir: Path | None,
    ephemeral: bool,
    gpus: int,
    hosts: int,
    time_scale: float,
    server: str,
    quiet: bool,
    theme: str | None,
    readonly: bool,
) -> Result:
    from console.cli.demo import Demo, run_demo

    demo = Demo(serve, root, campaign_dir, ephemeral, gpus, hosts, time_scale, server, not quiet)
    return run_demo(demo, theme or g.theme, readonly or g.readonly)


@command("trust", "show a host's key fingerprint and add it to known_hosts once you confirm")
@click.argument("name", metavar="HOST")
@click.option("--yes", is_flag=True, help="do not ask (only after checking the fingerprint another way)")
def trust(g: Globals, name: str, yes: bool) -> Result:
    """HOST: a host of pivot.toml."""
    from console.cli.hosts import trust_host

    return trust_host(g.config, name, yes=yes)


@command("gpus", "print the GPUs and the processes holding GPU memory")
@click.option("--watch", is_flag=True, help="keep printing, one sample per interval")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per sample")
@click.option("--all", "every_host", is_flag=True, help="every GPU host of the config, one line each")
def gpus(g: Globals, watch: bool, as_json: bool, every_host: bool) -> Result:
    from console.cli.gpus import show_gpus

    return show_gpus(g.target, watch=watch, as_json=as_json, every_host=every_host)


@command("kill", "kill GPU processes: SIGTERM, SIGKILL after a grace period, then watch the memory")
@click.argument("pids", metavar="PID…", type=int, nargs=-1)
@click.option("--stray", is_flag=True, help="every process holding GPU memory outside the managed server")
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@click.option("--grace", type=click.FloatRange(min=0), metavar="S", help="seconds between SIGTERM and SIGKILL (default: kill_grace_s)")
@click.option("--single", is_flag=True, help="signal only the process, not its process group")
def kill(g: Globals, pids: tuple[int, ...], stray: bool, yes: bool, grace: float | None, single: bool) -> Result:
    """PID: the processes to end, as the GPU pane lists them (or --stray; never a name pattern)."""
    from console.cli.gpus import kill_command

    return kill_command(g.target, list(pids), stray=stray, yes=yes, grace_s=grace, single=single)


@pivot.group("server", context_settings=CONTEXT, help="the managed server: status, start, stop, restart, switch, logs, adopt")
def server() -> None:
    pass


def _launch_options(f: F) -> F:
    f = click.option("--force", is_flag=True, help="start even when a preflight check fails")(f)
    f = click.option(
        "--skip",
        type=click.Choice(list(CHECKS)),
        multiple=True,
        metavar="CHECK",
        help=f"leave out this check ({', '.join(CHECKS)}); repeatable",
    )(f)
    return click.option("--no-wait", is_flag=True, help="return once launched (default: wait until it is ready)")(f)


@command("status", "the server's state, and what holds its port when pivot's is not there", server)
def server_status(g: Globals) -> Result:
    from console.cli.server import on_server, status

    return on_server(g.target, status)


@command("start", "check the profile on the host (preflight), start it, wait until it is ready", server)
@click.argument("profile")
@_launch_options
def server_start(g: Globals, profile: str, force: bool, skip: tuple[str, ...], no_wait: bool) -> Result:
    """PROFILE: the profile to start (pivot profiles lists them)."""
    from console.cli.server import Launch, on_server

    return on_server(g.target, Launch("start", profile, force, frozenset(skip), not no_wait))


@command("switch", "check the other profile, stop the running server, start the other", server)
@click.argument("profile")
@_launch_options
def server_switch(g: Globals, profile: str, force: bool, skip: tuple[str, ...], no_wait: bool) -> Result:
    """PROFILE: the profile to switch to."""
    from console.cli.server import Launch, on_server

    return on_server(g.target, Launch("switch", profile, force, frozenset(skip), not no_wait))


@command("restart", "stop the running server and start its profile again", server)
@_launch_options
def server_restart(g: Globals, force: bool, skip: tuple[str, ...], no_wait: bool) -> Result:
    from console.cli.server import Launch, on_server

    return on_server(g.target, Launch("restart", None, force, frozenset(skip), not no_wait))


@command("stop", "SIGTERM to the server's process group, SIGKILL after the grace, then check its GPU memory came back", server)
def server_stop(g: Globals) -> Result:
    from console.cli.server import on_server, stop

    return on_server(g.target, stop)


@command("logs", "the server's log: its last 200 lines, or followed", server)
@click.option("-f", "--follow", is_flag=True, help="keep following")
def server_logs(g: Globals, follow: bool) -> Result:
    from console.cli.server import logs, on_server

    return on_server(g.target, logs(follow))


@command("adopt", "take over a server pivot did not start that serves a profile's port (asks first)", server)
@click.argument("profile")
@click.option("--yes", is_flag=True, help="do not ask")
def server_adopt(g: Globals, profile: str, yes: bool) -> Result:
    """PROFILE: the profile whose port the server serves."""
    from console.cli.server import adopt_server, on_server

    return on_server(g.target, adopt_server(profile, yes))


def _list_profiles(g: Globals) -> Result:
    from console.cli.server import list_profiles

    return list_profiles(g.config)


profiles = listing("profiles", "launch profiles: list, show one's command line, diff two", _list_profiles)


@command("show", "a profile's command line, its engine's facts, its ranks or Slurm script", profiles)
@click.argument("name")
def profiles_show(g: Globals, name: str) -> Result:
    """NAME: the profile."""
    from console.cli.server import show_profile

    return show_profile(g.config, name)


@command("diff", "how two profiles' servers differ", profiles)
@click.argument("a")
@click.argument("b")
def profiles_diff(g: Globals, a: str, b: str) -> Result:
    """A: one profile. B: the other."""
    from console.cli.server import diff_profiles

    return diff_profiles(g.config, a, b)


@command("sweep", "a concurrency sweep against the running server (or --url); every [sweep] setting is a flag", cls=WithSweepSettings)
@click.option("--url", help="the server's base URL, directly (no SSH, no lifecycle)")
@click.option("--resume", metavar="RUN", help="finish an interrupted run: measured levels are kept, failed ones run again")
@click.option(
    "--repeat-uncertain",
    metavar="RUN",
    help="measure again the levels of RUN its comparison cannot decide, as many requests as it estimates would settle them, "
    "compared again after each round (at most 3), merged into RUN",
)
@click.option(
    "--refine",
    nargs=2,
    metavar="RUN_A RUN_B",
    help="locate where the drafting decision changes: measure between levels on both runs' servers, switching between them",
)
@click.option("--yes", is_flag=True, help="with --refine: switch servers without asking")
@click.option("--against", metavar="RUN", help="with --repeat-uncertain: the run to compare with (default: its counterpart)")
@click.option("--other-server", is_flag=True, help="resume or repeat a run although the running server is not the one it measured")
@click.option(
    "--allow-busy",
    is_flag=True,
    help="start although the server already serves another client's requests (a level they share is failed, with the reason)",
)
@click.option("--json", "as_json", is_flag=True, help="one JSON event per line on stdout")
def sweep(
    g: Globals,
    url: str | None,
    resume: str | None,
    repeat_uncertain: str | None,
    refine: tuple[str, str] | None,
    yes: bool,
    against: str | None,
    other_server: bool,
    allow_busy: bool,
    as_json: bool,
    **given: Any,
) -> Result:
    from console.cli.sweep import SweepOrder, sweep_command

    if sum(x is not None for x in (resume, repeat_uncertain, refine)) > 1:
        raise click.UsageError("--resume, --repeat-uncertain and --refine are one or another")
    order = SweepOrder(url, resume, repeat_uncertain, refine, yes, against, other_server, allow_busy, as_json)
    return sweep_command(g.target, order, {key: value for key, value in given.items() if value is not None})


def _list_runs(g: Globals) -> Result:
    from console.cli.sweep import list_runs_command

    return list_runs_command(g.config)


runs = listing("runs", "saved sweeps: list, show one, delete, import another tool's results", _list_runs)


@command("show", "a run's levels, where its client ran, its drift", runs)
@click.argument("name", metavar="RUN")
def runs_show(g: Globals, name: str) -> Result:
    """RUN: last, previous or a name."""
    from console.cli.sweep import show_run

    return show_run(g.config, name)


@command("delete", "delete runs of the campaign (asks first)", runs)
@click.argument("names", metavar="RUN…", nargs=-1, required=True)
@click.option("--yes", is_flag=True, help="do not ask")
def runs_delete(g: Globals, names: tuple[str, ...], yes: bool) -> Result:
    """RUN: runs, by name."""
    from console.cli.sweep import delete_runs

    return delete_runs(g.config, list(names), yes)


@command("import", "another tool's results of one server as a run", runs)
@click.argument("files", metavar="FILE…", nargs=-1, required=True)
@click.option("--name", help="the new run's name")
@click.option("--profile", default="imported", show_default=True, help="the profile the results were measured with")
def runs_import(g: Globals, files: tuple[str, ...], name: str | None, profile: str) -> Result:
    """FILE: SGLang bench_serving, vllm bench serve, AIPerf or guidellm results."""
    from console.cli.sweep import import_runs

    return import_runs(g.config, list(files), name, profile)


def _comparison_options(f: F) -> F:
    f = click.option(
        "--slo",
        metavar="SLO",
        help="how many users each run serves within it, e.g. 'itl_p90_ms<=30,ttft_p90_ms<=500,"
        "user_tok_s>=20' (default: pivot.toml's [compare] slo), with each level's goodput",
    )(f)
    f = click.option(
        "--anyway",
        is_flag=True,
        help="compare runs that measured different things (max_tokens, prompts, host, GPUs, …), each difference said above the result",
    )(f)
    return click.option(
        "--may-differ",
        multiple=True,
        metavar="KEY",
        help="let this key differ between the runs (max_tokens, input_tokens, api, extra_body, warmup, prompts, model, engine, "
        "engine_version, host, gpus, nodes, client); repeatable",
    )(f)


@command("compare", "compare runs level by level: crossover, saturation, recommendation")
@click.argument("names", metavar="RUN…", nargs=-1, required=True)
@click.option("--json", "fmt", flag_value="json", help="one JSON object per comparison")
@click.option("--csv", "fmt", flag_value="csv", help="the per-level table as CSV")
@click.option("--markdown", type=click.Path(path_type=Path), metavar="FILE", help="also write a Markdown report")
@click.option("--write-profile", is_flag=True, help="write the adaptive-speculation config and a profile using it")
@click.option("--yes", is_flag=True, help="with --write-profile: replace a profile of that name without asking")
@_comparison_options
def compare(
    g: Globals,
    names: tuple[str, ...],
    fmt: str | None,
    markdown: Path | None,
    write_profile: bool,
    yes: bool,
    slo: str | None,
    anyway: bool,
    may_differ: tuple[str, ...],
) -> Result:
    """RUN: two runs (last, previous, or names); more: the first against each."""
    from console.cli.compare import CompareOrder, compare_command

    return compare_command(
        g.config, list(names), CompareOrder(fmt or "table", markdown, write_profile, yes, slo, anyway, frozenset(may_differ))
    )


@command("tune", "the best draft length for each level, measured, written as the engine's schedule and swept")
@click.argument("profile")
@click.option("--lengths", type=Levels(), metavar="N,N,…", help="draft lengths to try (default: 1, the profile's own and twice it)")
@click.option("--levels", type=Levels(), metavar="C,C,…", help="concurrency levels (default: [sweep] levels)")
@click.option("--baseline", metavar="PROFILE", help="the same server without drafting (default: PROFILE with its drafting flags unset)")
@click.option(
    "--requests",
    type=click.IntRange(min=1),
    metavar="N",
    help='requests a level (default: [sweep] requests; "c" is taken as "auto", 4 × C)',
)
@click.option("--prompts", metavar="SET|FILE", help="what the requests ask: synthetic, humaneval or a file (default: [sweep] prompts)")
@click.option(
    "--repeat-cap",
    type=click.IntRange(min=0),
    metavar="N",
    help="requests a close level is measured again with at most (what settles it, estimated; default: the cap "
    "--repeat-uncertain has); 0: none again",
)
@click.option("--yes", is_flag=True, help="do not ask before switching servers")
def tune(
    g: Globals,
    profile: str,
    lengths: list[int] | None,
    levels: list[int] | None,
    baseline: str | None,
    requests: int | None,
    prompts: str | None,
    repeat_cap: int | None,
    yes: bool,
) -> Result:
    """PROFILE: a drafting profile. An interrupted session goes on where it stopped when the same command is given
    again."""
    from console.actions.tune import TuneOrder
    from console.cli.tune import tune_command

    return tune_command(g.target, TuneOrder(profile, lengths, levels, baseline, requests, prompts, repeat_cap), yes=yes)


@command("report", "runs and their comparison as one HTML file that opens offline, or a chart")
@click.argument("names", metavar="RUN…", nargs=-1)
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, metavar="FILE", help="the file to write")
@click.option("--tune", "session", metavar="NAME", help="a tuning session (its name, or last): its choices, schedule, check and runs")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "png", "svg"]),
    help="html: the whole report (the default, unless FILE ends in .png or .svg); png, svg: the throughput chart alone",
)
@_comparison_options
def report(
    g: Globals,
    names: tuple[str, ...],
    output: Path,
    session: str | None,
    fmt: str | None,
    slo: str | None,
    anyway: bool,
    may_differ: tuple[str, ...],
) -> Result:
    """RUN: runs (last, previous, or names); the first is compared with each other."""
    from console.cli.report import report_command

    return report_command(g.config, list(names), output, fmt, slo=slo, anyway=anyway, may_differ=frozenset(may_differ), session=session)


def _list_tasks(g: Globals) -> Result:
    from console.cli.tasks import TaskCommand

    return TaskCommand(g.config).listed()


tasks = listing("tasks", "the campaign's task list: list, add, start, done, import, export", _list_tasks)


@command("list", "the tasks, as the Tasks pane shows them", tasks)
def tasks_list(g: Globals) -> Result:
    from console.cli.tasks import TaskCommand

    return TaskCommand(g.config).listed()


@command("add", "add a task", tasks)
@click.argument("words", metavar="TEXT…", nargs=-1, required=True)
@click.option("--priority", type=click.Choice(["high", "medium", "low"]), default="medium", show_default=True, help="the task's priority")
def tasks_add(g: Globals, words: tuple[str, ...], priority: str) -> Result:
    """TEXT: the task's text (its words joined by spaces)."""
    from console.cli.tasks import TaskCommand

    return TaskCommand(g.config).add(" ".join(words), priority)


def _status_verb(verb: str, help: str) -> None:
    @command(verb, help, tasks)
    @click.argument("numbers", metavar="N…", type=int, nargs=-1)
    @click.option("--insist", is_flag=True, help="start a task although another is in progress")
    def set_status(g: Globals, numbers: tuple[int, ...], insist: bool) -> Result:
        """N: task numbers, as tasks list shows them."""
        from console.cli.tasks import TaskCommand

        return TaskCommand(g.config).set_status(verb, list(numbers), insist=insist)


for _verb, _help in (
    ("start", "mark tasks in progress"),
    ("done", "mark tasks done"),
    ("cancel", "cancel tasks"),
    ("reset", "mark tasks pending again"),
):
    _status_verb(_verb, _help)


@command("delete", "delete a task", tasks)
@click.argument("numbers", metavar="N", type=int, nargs=-1)
def tasks_delete(g: Globals, numbers: tuple[int, ...]) -> Result:
    """N: the task's number, as tasks list shows it."""
    from console.cli.tasks import TaskCommand

    return TaskCommand(g.config).delete(list(numbers))


@command("import", 'add the tasks of a file: pivot\'s tasks.json, or a todo list ({"todos": [...]})', tasks)
@click.argument("path", metavar="FILE", type=click.Path(path_type=Path))
def tasks_import(g: Globals, path: Path) -> Result:
    """FILE: the file to read."""
    from console.cli.tasks import TaskCommand

    return TaskCommand(g.config).import_file(path)


@command("export", "the tasks in the todo format, on stdout", tasks)
def tasks_export(g: Globals) -> Result:
    from console.cli.tasks import TaskCommand

    return TaskCommand(g.config).export()


@command("run", "run a runbook: its tasks' actions in order, stopping at the first failure")
@click.argument("runbook")
@click.option("--from", "start", type=click.IntRange(min=1), default=1, metavar="N", help="start at the runbook's task N")
@click.option("--yes", is_flag=True, help="do not ask before a kill")
def run(g: Globals, runbook: str, start: int, yes: bool) -> Result:
    """RUNBOOK: a runbook TOML file, or a runbook's name (shipped: campaign, demo-campaign)."""
    from console.cli.tasks import run_command

    return run_command(g.target, runbook, start=start, yes=yes)


@command("events", "the campaign's event log: print it, or export it as JSON lines")
@click.option("--kind", type=click.Choice(EVENT_KINDS), help="only events of this kind")
@click.option("--export", type=click.Path(path_type=Path), metavar="FILE", help="write the events as JSON lines to FILE")
@click.option("--tail", type=WholeNumber(), metavar="N", help="only the last N (read from the log's end)")
def events(g: Globals, kind: str | None, export: Path | None, tail: int | None) -> Result:
    from console.cli.tasks import events_command

    return events_command(g.config, kind, export, tail)


@command("ping", "connect to a host and report the round-trip time")
@click.argument("name", metavar="[HOST]", required=False)
def ping(g: Globals, name: str | None) -> Result:
    """HOST: a host of pivot.toml (default: the default host)."""
    from console.cli.hosts import ping_host

    return ping_host(g.config, name or g.host)


@pivot.group("config", context_settings=CONTEXT, help="show or validate the configuration")
def config() -> None:
    pass


@command("show", "pivot.toml as pivot reads it, its defaults filled in", config)
def config_show(g: Globals) -> Result:
    from console.cli.hosts import show_config

    return show_config(g.config)


@command("validate", "check pivot.toml, every key", config)
def config_validate(g: Globals) -> Result:
    from console.cli.hosts import validate_config

    return validate_config(g.config)

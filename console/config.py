"""pivot.toml: the hosts pivot drives, and where the campaign lives (its schema's toolkit: console/schema.py).

Search order: --config PATH, then $PIVOT_CONFIG, then ./pivot.toml, then
$XDG_CONFIG_HOME/pivot/pivot.toml (~/.config/pivot/pivot.toml). Every error
names the file and the key.

This is the ground floor: it imports nothing of pivot's own but the schema toolkit and the settings' declarations
(console/settings.py: `[sweep]`, and `[compare] slo`'s grammar), so that the whole file is checked once, here.
"""

from __future__ import annotations

import os
import shlex
import stat
import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, with_config
from pydantic_core import PydanticCustomError

from console.schema import Bool, Invalid, Number, Port, Seconds, Str, Table, about, choice, expect, must, validate
from console.settings import PROMPT_SETS, SweepSettings, slo_terms

MAX_FILE, MAX_JUMPS = 1 << 20, 8  # a configuration file is far smaller; a chain of jump hosts far shorter


def shipped(name: str) -> Path:
    """A directory of data that ships inside the package (themes, profiles): in the wheel, or in an editable
    install the repository's own top-level directory (pyproject maps each onto console.NAME)."""
    return Path(str(resources.files(f"console.{name}")))


# -- pivot.toml -----------------------------------------------------------------------------------------------------

ROLES = ("gpu", "hypervisor", "slurm")  # slurm: a login node, whose servers run as Slurm jobs (console/server/slurm.py)


class ConfigError(Exception):
    """A bad config file: str() is one line naming the file and the key."""

    def __init__(self, path: Path | str | None, key: str | None, problem: str):
        self.path, self.key, self.problem = path, key, problem
        where = ": ".join(str(p) for p in (path, key) if p)
        super().__init__(f"{where}: {problem}" if where else problem)


class UnknownHost(ConfigError):
    """A host name the config does not know. console.remote.errors re-exports it: it reads like every SSH-layer
    error (`HOST: problem`, `retry` False)."""

    retry = False

    def __init__(self, host: str, message: str):
        super().__init__(None, host or None, message)
        self.host = host


@with_config(ConfigDict(extra="forbid"))
@dataclass(frozen=True)
class HostTable:
    """[hosts.NAME]: how to reach one host. `ssh` is an ~/.ssh/config alias; hostname/user/port override it."""

    ssh: Annotated[Str | None, about("an ~/.ssh/config alias (its HostName, User, ProxyJump… apply)")] = None
    hostname: Annotated[Str | None, about("the host's name or address, over the alias's")] = None
    user: Annotated[Str | None, about("the SSH user, over the alias's")] = None
    port: Annotated[Port | None, about("the SSH port, over the alias's")] = None
    jump: Annotated[Str | None, about("another pivot host to jump through, or an OpenSSH ProxyJump string")] = None
    role: Annotated[
        Str, choice(*ROLES), about('"gpu"; "hypervisor" (offers its cleanup); "slurm": a login node, whose servers run as jobs')
    ] = "gpu"
    address: Annotated[Str | None, about("where the other nodes of a server across nodes reach this one (unset: its hostname)")] = None
    gpus: Annotated[Bool, about("false: a host without GPUs (a CPU engine): no GPU checks, and the GPU pane says so once")] = True
    python: Annotated[Str, about("the host's python, which runs the telemetry agent and the load generator")] = "python3"
    workdir: Annotated[Str, about("where pivot keeps the server's log, pid file and record on the host")] = "~/.pivot"
    known_hosts: Annotated[Str | None, about("a known_hosts file (unset: OpenSSH's own, and ssh config's)")] = None
    identity: Annotated[Str | None, about("a private key file")] = None
    keepalive_s: Annotated[Seconds, about("SSH keepalive interval")] = 15.0
    connect_timeout_s: Annotated[Seconds, about("how long a connection attempt may take")] = 10.0
    cleanup: Annotated[
        tuple[Str, ...],
        expect("a list of strings (an argv)"),
        about("hypervisor: an argv that clears a container's leftovers, offered when a kill from inside fails"),
    ] = ()
    partition: Annotated[Str | None, about("slurm: sbatch's partition")] = None
    sbatch_args: Annotated[
        tuple[Str, ...], expect("a list of strings (sbatch options)"), about('slurm: more sbatch options, as an argv (["--time=04:00:00"])')
    ] = ()
    env: Annotated[dict[str, Str], about("environment variables every server on this host starts with")] = field(default_factory=dict)


@dataclass(frozen=True)
class HostSpec(HostTable):
    """One host: its table, and the table's name."""

    name: str = field(kw_only=True)

    @property
    def target(self) -> str:
        """The name handed to SSH: the alias, else the hostname, else the pivot name."""
        return self.hostname or self.ssh or self.name

    @property
    def node_address(self) -> str:
        """Where the other nodes of a multi-node server reach this host: `address`, else its SSH target."""
        return self.address or self.target


def _slo(text: str) -> str:
    try:
        slo_terms(text)
    except ValueError as e:
        raise PydanticCustomError("pivot", "{why}", {"why": str(e)}) from None
    return text


class CompareTable(Table):
    """[compare]: how two runs are judged."""

    margin: Annotated[
        Number,
        must(lambda m: 0 < m <= 20, "must be a percentage above 0 and at most 20, got {value}"),
        about("percent: B/A's whole 95 % interval within ±margin is alike, wholly beyond it a lead, across an edge cannot tell"),
    ] = 2.0
    # (console/sweep/analysis/slo.py decides with it)
    slo: Annotated[
        Annotated[Str, AfterValidator(_slo)] | None,
        about('a service-level objective every comparison answers for: "itl_p90_ms<=30,ttft_p90_ms<=500,user_tok_s>=20"'),
    ] = None


class NotifyTable(Table):
    """[notify]: how the console calls an operator who watches another window (a sweep that ends, a server that
    becomes ready or crashes, a runbook step that waits for an answer)."""

    bell: Annotated[Bool, about("the terminal's bell: tmux marks the window, a terminal may flash or sound")] = True
    desktop: Annotated[Bool, about("a desktop notification too (OSC 777 and OSC 9), in terminals that show them")] = False


class ConfigFile(Table):
    """What pivot.toml may say; a key left out takes Config's default."""

    default_host: Annotated[Str | None, about("the host a command acts on without --host (unset: the first)")] = None
    theme: Annotated[Str | None, about("the console's theme: pivot-dark, pivot-light, pivot-16, Textual's, or one of yours")] = None
    campaign_dir: Annotated[Str | None, about("where runs, tasks and the event log live, relative to this file")] = None
    hosts: Annotated[dict[str, dict[str, Any]], about("[hosts.NAME]: each a host pivot reaches (below)")] = {}  # each a HostTable
    groups: Annotated[
        dict[str, Annotated[list[Str], expect("a list of host names")]], about("a name for hosts a server across nodes spans")
    ] = {}
    idle_threshold_mib: Annotated[Number | None, about("a GPU holding less memory than this counts as idle")] = None
    kill_grace_s: Annotated[Number | None, about("SIGTERM, then SIGKILL after this long")] = None
    telemetry_interval_s: Annotated[
        Annotated[Number, must(lambda s: s >= 0.25, "must be at least 0.25, got {value}")] | None,
        about("how often the GPUs are sampled (at least 0.25)"),
    ] = None
    profiles_dir: Annotated[
        Str | None, about("a directory of launch profiles, relative to this file (profiles/ beside it is read too)")
    ] = None
    simulated: Annotated[
        bool, about("its hosts are pivot's simulated GPU hosts (pivot demo writes it): the demo's profiles are offered")
    ] = False
    sweep: Annotated[SweepSettings, about("[sweep]: defaults for sweeps (below)")] = SweepSettings()
    compare: Annotated[CompareTable, about("[compare]: how two runs are judged (below)")] = CompareTable()
    notify: Annotated[NotifyTable, about("[notify]: how the console calls you back from another window (below)")] = NotifyTable()


@dataclass(frozen=True)
class Config:
    path: Path | None
    hosts: dict[str, HostSpec]
    default_host: str | None = None
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    theme: str | None = None
    campaign_dir: Path = Path("campaign")
    idle_threshold_mib: float = 1024.0  # a GPU holding less than this counts as idle
    kill_grace_s: float = 5.0  # SIGTERM, then SIGKILL after this long
    telemetry_interval_s: float = 1.0
    profiles_dir: Path | None = None
    simulated: bool = False  # pivot's simulated GPU hosts: shipped profiles/demo is among profile_dirs
    sweep: SweepSettings = field(default_factory=SweepSettings)
    compare: CompareTable = field(default_factory=CompareTable)
    notify: NotifyTable = field(default_factory=NotifyTable)

    @property
    def margin(self) -> float:
        """[compare] margin as a fraction (0.02 for 2 %)."""
        return self.compare.margin / 100

    @property
    def profile_dirs(self) -> list[Path]:
        """Where launch profiles come from; a later directory's profile of the same name wins."""
        dirs = [shipped("profiles"), *([shipped("profiles") / "demo"] if self.simulated else []), user_config_dir() / "profiles"]
        if self.path is not None:
            dirs.append(self.path.parent / "profiles")
        if self.profiles_dir is not None:
            dirs.append(self.profiles_dir)
        return list(dict.fromkeys(dirs))

    def _no_host(self) -> str:
        """How to name a host, from what the config has."""
        if self.path is None:
            return (
                "no host given and no pivot.toml found (--config PATH, $PIVOT_CONFIG, ./pivot.toml, "
                "~/.config/pivot/pivot.toml): write one with a [hosts.NAME] table (see pivot.example.toml), "
                "or use --local for this machine's GPUs"
            )
        if not self.hosts:
            return f"no host given and {self.path} has no [hosts.NAME] table: add one (see pivot.example.toml)"
        known = ", ".join(sorted(self.hosts))
        return f'no host given: pass --host NAME (in {self.path}: {known}), or set default_host = "NAME" there'

    def host(self, name: str | None = None) -> HostSpec:
        name = name or self.default_host or (next(iter(self.hosts)) if len(self.hosts) == 1 else None)
        if name is None:
            raise UnknownHost("", self._no_host())
        try:
            return self.hosts[name]
        except KeyError:
            known = ", ".join(sorted(self.hosts)) or "none"
            raise UnknownHost(name, f"unknown host {name!r} (configured: {known})") from None


def _host(name: str, table: dict[str, Any]) -> HostSpec:
    try:
        values = validate(HostTable, table)
    except Invalid as e:
        raise Invalid(f"hosts.{name}.{e.key}" if e.key else f"hosts.{name}", e.problem) from None
    return HostSpec(name=name, **vars(values))


def _beside(path: Path, value: str) -> Path:
    """A path from the file: ~ expanded, relative to the file's directory."""
    p = Path(os.path.expanduser(value))
    return p if p.is_absolute() else path.parent / p


def _prompts_beside(path: Path, sweep: SweepSettings) -> SweepSettings:
    """A prompt set's file named by a relative path is the one beside this file, wherever pivot runs from."""
    if sweep.prompts in PROMPT_SETS:
        return sweep
    return replace(sweep, prompts=str(_beside(path, sweep.prompts)))


def _build(path: Path, data: dict[str, Any]) -> Config:
    top = validate(ConfigFile, data)
    hosts = {name: _host(name, table) for name, table in top.hosts.items()}
    for host in hosts.values():
        chain = [host.name]  # jumps through configured hosts: a loop, or a chain past MAX_JUMPS, is refused here
        while (jump := hosts[chain[-1]].jump) is not None and jump in hosts:
            if jump in chain:
                raise Invalid(
                    f"hosts.{host.name}.jump",
                    "a jump loop: " + " -> ".join([*chain[chain.index(jump) :], jump])
                    if jump != host.name or len(chain) > 1
                    else "a host cannot jump through itself",
                )
            chain.append(jump)
            if len(chain) > MAX_JUMPS + 1:
                raise Invalid(f"hosts.{host.name}.jump", f"more than {MAX_JUMPS} jumps: " + " -> ".join(chain))
    if top.default_host is not None and top.default_host not in hosts:
        raise Invalid("default_host", f"names no host in [hosts] ({top.default_host!r})")
    for group, members in top.groups.items():
        if group in hosts:
            raise Invalid(f"groups.{group}", "a group cannot have a host's name")
        if unknown := [m for m in members if m not in hosts]:
            raise Invalid(f"groups.{group}", f"names no host in [hosts]: {', '.join(map(repr, unknown))}")
    given = top.model_dump(exclude_unset=True, exclude={"hosts", "groups", "campaign_dir", "profiles_dir", "sweep", "compare", "notify"})
    return Config(
        path=path,
        hosts=hosts,
        groups={k: tuple(v) for k, v in top.groups.items()},
        campaign_dir=_beside(path, top.campaign_dir or "campaign"),
        profiles_dir=_beside(path, top.profiles_dir) if top.profiles_dir else None,
        sweep=_prompts_beside(path, top.sweep),
        compare=top.compare,
        notify=top.notify,
        **given,
    )


def parse(path: Path, text: str) -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(path, None, f"not valid TOML: {e}") from None
    try:
        return _build(path, data)
    except Invalid as e:
        raise ConfigError(path, e.key, e.problem) from None


def user_config_dir() -> Path:
    """~/.config/pivot on Linux ($XDG_CONFIG_HOME/pivot), the platform's own place elsewhere. (Imported here: the
    load generator's zipapp ships this module to hosts that have no platformdirs.)"""
    from platformdirs import user_config_path

    return user_config_path("pivot", appauthor=False)


def find(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    if explicit:
        return Path(explicit)
    if env := os.environ.get("PIVOT_CONFIG"):
        return Path(env)
    for candidate in (Path.cwd() / "pivot.toml", user_config_dir() / "pivot.toml"):
        if candidate.is_file():
            return candidate
    return None


def read_small(path: Path, limit: int = MAX_FILE) -> str:
    """A regular file's text (a FIFO or a device would hang or never end), at most `limit` bytes of UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO with no writer would block the open itself
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ConfigError(path, None, "not a regular file")
            data = f.read(limit + 1)
    except OSError as e:
        raise ConfigError(path, None, f"cannot read: {e.strerror}") from None
    if len(data) > limit:
        raise ConfigError(path, None, f"over {limit // 1024} KiB: not a configuration file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(path, None, f"not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start}") from None


def load(explicit: str | os.PathLike[str] | None = None) -> Config:
    """pivot.toml, every key checked (ConfigError naming the file and the key); an empty Config where there is none."""
    path = find(explicit)
    if path is None:
        return Config(path=None, hosts={})
    return parse(path, read_small(path))


def pivot_command(cfg: Config, host: str | None, *words: str) -> str:
    """The command line that does `words` on this configuration and host from a shell here: --config and --host only
    where pivot would not find them by itself."""
    given = []
    if cfg.path is not None and find() != cfg.path:
        given += ["--config", str(cfg.path)]
    if host is not None and host != (cfg.default_host or next(iter(cfg.hosts), None)):
        given += ["--host", host]
    return shlex.join(["pivot", *given, *words])

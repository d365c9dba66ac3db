"""pivot.toml: the hosts pivot drives, and where the campaign lives.

Search order: --config PATH, then $PIVOT_CONFIG, then ./pivot.toml, then
$XDG_CONFIG_HOME/pivot/pivot.toml (~/.config/pivot/pivot.toml). Every error
names the file and the key.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

ROLES = ("gpu", "hypervisor")


class ConfigError(Exception):
    """A bad config file: str() is one line naming the file and the key."""

    def __init__(self, path: Path | str | None, key: str | None, problem: str):
        self.path, self.key, self.problem = path, key, problem
        where = ": ".join(str(p) for p in (path, key) if p)
        super().__init__(f"{where}: {problem}" if where else problem)


@dataclass(frozen=True)
class HostSpec:
    """How to reach one host. `ssh` is an ~/.ssh/config alias; hostname/user/port override it."""

    name: str
    ssh: str | None = None
    hostname: str | None = None
    user: str | None = None
    port: int | None = None
    jump: str | None = None  # another pivot host name, or an OpenSSH ProxyJump string
    role: str = "gpu"
    python: str = "python3"
    workdir: str = "~/.pivot"
    known_hosts: str | None = None  # None: OpenSSH's own (~/.ssh/known_hosts and ssh config)
    identity: str | None = None
    keepalive_s: float = 15.0
    connect_timeout_s: float = 10.0
    cleanup: tuple[str, ...] = ()  # hypervisor: argv that clears a container's leftovers
    env: dict[str, str] = field(default_factory=dict)

    @property
    def target(self) -> str:
        """The name handed to SSH: the alias, else the hostname, else the pivot name."""
        return self.hostname or self.ssh or self.name


@dataclass(frozen=True)
class Config:
    path: Path | None
    hosts: dict[str, HostSpec]
    default_host: str | None = None
    theme: str | None = None
    campaign_dir: Path = Path("campaign")
    idle_threshold_mib: float = 1024.0  # a GPU holding less than this counts as idle
    kill_grace_s: float = 5.0  # SIGTERM, then SIGKILL after this long
    telemetry_interval_s: float = 1.0
    profiles_dir: Path | None = None
    sweep: dict[str, Any] = field(default_factory=dict)  # defaults for sweeps ([sweep] in pivot.toml)

    @property
    def profile_dirs(self) -> list[Path]:
        """Where launch profiles come from; a later directory's profile of the same name wins."""
        dirs = [shipped("profiles"), user_config_dir() / "profiles"]
        if self.path is not None:
            dirs.append(self.path.parent / "profiles")
        if self.profiles_dir is not None:
            dirs.append(self.profiles_dir)
        return list(dict.fromkeys(dirs))

    def host(self, name: str | None = None) -> HostSpec:
        from console.remote.errors import UnknownHost

        name = name or self.default_host or (next(iter(self.hosts)) if len(self.hosts) == 1 else None)
        if name is None:
            raise UnknownHost("", f"no host given and {self.path or 'the config'} sets no default_host")
        try:
            return self.hosts[name]
        except KeyError:
            known = ", ".join(sorted(self.hosts)) or "none"
            raise UnknownHost(name, f"unknown host {name!r} (configured: {known})") from None


_HOST_FIELDS: dict[str, type | tuple[type, ...]] = {
    "ssh": str, "hostname": str, "user": str, "port": int, "jump": str, "role": str,
    "python": str, "workdir": str, "known_hosts": str, "identity": str,
    "keepalive_s": (int, float), "connect_timeout_s": (int, float), "cleanup": list, "env": dict,
}
_TOP_FIELDS: dict[str, type | tuple[type, ...]] = {
    "default_host": str, "theme": str, "campaign_dir": str, "hosts": dict,
    "idle_threshold_mib": (int, float), "kill_grace_s": (int, float), "telemetry_interval_s": (int, float),
    "profiles_dir": str, "sweep": dict,
}
_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "a table"}


def _type_name(t: type | tuple[type, ...]) -> str:
    return "a number" if isinstance(t, tuple) else _TYPE_NAMES.get(t, t.__name__)


def _check(path: Path, key: str, value: Any, expected: type | tuple[type, ...]) -> None:
    if isinstance(value, bool) or not isinstance(value, expected):
        raise ConfigError(path, key, f"expected {_type_name(expected)}, got {value!r}")


def _host(path: Path, name: str, table: Any) -> HostSpec:
    if not isinstance(table, dict):
        raise ConfigError(path, f"hosts.{name}", "expected a table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _HOST_FIELDS:
            raise ConfigError(path, f"hosts.{name}.{key}", f"unknown key (known: {', '.join(_HOST_FIELDS)})")
        _check(path, f"hosts.{name}.{key}", value, _HOST_FIELDS[key])
        values[key] = value
    if values.get("role", "gpu") not in ROLES:
        raise ConfigError(path, f"hosts.{name}.role", f"must be one of {', '.join(ROLES)}, got {values['role']!r}")
    port = values.get("port")
    if port is not None and not 0 < port < 65536:
        raise ConfigError(path, f"hosts.{name}.port", f"must be 1-65535, got {port}")
    cleanup = values.pop("cleanup", [])
    if not all(isinstance(a, str) for a in cleanup):
        raise ConfigError(path, f"hosts.{name}.cleanup", "must be a list of strings (an argv)")
    env = values.pop("env", {})
    if not all(isinstance(v, str) for v in env.values()):
        raise ConfigError(path, f"hosts.{name}.env", "values must be strings")
    for key in ("keepalive_s", "connect_timeout_s"):
        if key in values:
            values[key] = float(values[key])
    return HostSpec(name=name, cleanup=tuple(cleanup), env=dict(env), **values)


def parse(path: Path, text: str) -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(path, None, f"not valid TOML: {e}") from None
    for key, value in data.items():
        if key not in _TOP_FIELDS:
            raise ConfigError(path, key, f"unknown key (known: {', '.join(_TOP_FIELDS)})")
        _check(path, key, value, _TOP_FIELDS[key])
    hosts = {name: _host(path, name, table) for name, table in data.get("hosts", {}).items()}
    for host in hosts.values():
        if host.jump == host.name:
            raise ConfigError(path, f"hosts.{host.name}.jump", "a host cannot jump through itself")
    default = data.get("default_host")
    if default is not None and default not in hosts:
        raise ConfigError(path, "default_host", f"names no host in [hosts] ({default!r})")
    campaign = Path(os.path.expanduser(data.get("campaign_dir", "campaign")))
    if not campaign.is_absolute():
        campaign = path.parent / campaign
    interval = float(data.get("telemetry_interval_s", 1.0))
    if interval < 0.25:
        raise ConfigError(path, "telemetry_interval_s", f"must be at least 0.25, got {interval:g}")
    sweep = data.get("sweep", {})
    try:
        from console.sweep.settings import SweepSettings

        SweepSettings.from_dict(sweep)
    except ValueError as e:  # "key: problem"
        key, _, problem = str(e).partition(": ")
        raise ConfigError(path, f"sweep.{key}", problem) from None
    profiles_dir = Path(os.path.expanduser(data["profiles_dir"])) if "profiles_dir" in data else None
    if profiles_dir is not None and not profiles_dir.is_absolute():
        profiles_dir = path.parent / profiles_dir
    return Config(
        path=path, hosts=hosts, default_host=default, theme=data.get("theme"), campaign_dir=campaign,
        profiles_dir=profiles_dir, sweep=sweep,
        idle_threshold_mib=float(data.get("idle_threshold_mib", 1024)), kill_grace_s=float(data.get("kill_grace_s", 5)),
        telemetry_interval_s=interval,
    )


def shipped(name: str) -> Path:
    """A directory of data that ships inside the package (themes, profiles): in the wheel, or in an editable
    install the repository's own top-level directory (pyproject maps each onto console.NAME)."""
    return Path(str(resources.files(f"console.{name}")))


def user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(base) / "pivot"


def find(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    if explicit:
        return Path(explicit)
    if env := os.environ.get("PIVOT_CONFIG"):
        return Path(env)
    for candidate in (Path.cwd() / "pivot.toml", user_config_dir() / "pivot.toml"):
        if candidate.is_file():
            return candidate
    return None


def load(explicit: str | os.PathLike[str] | None = None) -> Config:
    path = find(explicit)
    if path is None:
        return Config(path=None, hosts={})
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(path, None, f"cannot read: {e.strerror}") from None
    return parse(path, text)

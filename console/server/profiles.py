"""Launch profiles: TOML data (never code) that says how to start an inference server.

    kind = "sglang"                 # or "vllm": which health endpoint and ready line to expect
    launcher = "~/ml-env/bin/python3 -m sglang.launch_server"   # a string (split like a shell) or a list
    model_path = "/shared/kimi-k2.5-int4"
    host = "127.0.0.1"
    port = 30000
    description = "…"
    extends = "baseline"            # inherit, then override
    unset = ["enable-metrics"]      # remove inherited flags
    [env]
    NCCL_DEBUG = "WARN"
    [flags]                         # true: a bare flag; false: left out; a list: the flag repeated
    tp = 8
    trust-remote-code = true

Every error names the file, the key and the problem; a broken profile is
reported as broken and never half-loaded.
"""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.remote.command import shell_line

KINDS = {
    # kind: (health path, ready line in the log, how the model is passed)
    "sglang": ("/health", "The server is fired up and ready to roll!", "--model-path"),
    "vllm": ("/health", "Starting vLLM server on", None),  # `vllm serve MODEL`: the model is positional
}
FlagValue = bool | int | float | str | list[str | int | float]
_KEYS: dict[str, type | tuple[type, ...]] = {
    "kind": str, "launcher": (str, list), "model_path": str, "host": str, "port": int, "description": str,
    "extends": str, "unset": list, "env": dict, "flags": dict,
}


class ProfileError(Exception):
    def __init__(self, path: Path | str, key: str | None, problem: str):
        self.path, self.key, self.problem = Path(path), key, problem
        super().__init__(f"{path}: {key}: {problem}" if key else f"{path}: {problem}")


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    kind: str
    launcher: tuple[str, ...]
    model_path: str
    host: str = "127.0.0.1"
    port: int = 30000
    description: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    flags: Mapping[str, FlagValue] = field(default_factory=dict)
    extends: str | None = None

    @property
    def health_path(self) -> str:
        return KINDS[self.kind][0]

    @property
    def ready_line(self) -> str:
        return KINDS[self.kind][1]

    def flag_args(self) -> list[str]:
        args: list[str] = []
        for name, value in self.flags.items():
            flag = f"--{name}"
            if value is True:
                args.append(flag)
            elif value is False:
                continue
            elif isinstance(value, list):
                for item in value:
                    args += [flag, str(item)]
            else:
                args += [flag, str(value)]
        return args

    def argv(self) -> list[str]:
        """The server's command line: launcher, model, host and port, then the flags."""
        model_flag = KINDS[self.kind][2]
        model = [model_flag, self.model_path] if model_flag else [self.model_path]
        return [*self.launcher, *model, "--host", self.host, "--port", str(self.port), *self.flag_args()]

    def command_line(self) -> str:
        """What an operator can paste into a shell on the host to start this server: `env KEY=VALUE … argv`."""
        env = ["env", *(f"{k}={v}" for k, v in self.env.items())] if self.env else []
        return shell_line([*env, *self.argv()])


def diff(a: Profile, b: Profile) -> list[tuple[str, str | None, str | None]]:
    """(setting, value in a, value in b) for every setting that differs; None where absent."""
    rows: list[tuple[str, str | None, str | None]] = []
    for key in ("kind", "launcher", "model_path", "host", "port"):
        va, vb = getattr(a, key), getattr(b, key)
        if va != vb:
            rows.append((key, shlex.join(va) if key == "launcher" else str(va), shlex.join(vb) if key == "launcher" else str(vb)))
    for key in sorted(set(a.env) | set(b.env)):
        if a.env.get(key) != b.env.get(key):
            rows.append((f"env.{key}", a.env.get(key), b.env.get(key)))
    for key in list(dict.fromkeys([*a.flags, *b.flags])):
        va, vb = a.flags.get(key), b.flags.get(key)
        if va != vb:
            rows.append((f"--{key}", None if va is None else _show(va), None if vb is None else _show(vb)))
    return rows


def _show(value: FlagValue) -> str:
    if value is True:
        return "(on)"
    if value is False:
        return "(off)"
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def _type_name(t: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", list: "a list", dict: "a table"}
    return " or ".join(names[x] for x in t) if isinstance(t, tuple) else names[t]


def _read(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ProfileError(path, None, f"cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(path, None, f"not valid TOML: {e}") from None
    for key, value in data.items():
        if key not in _KEYS:
            raise ProfileError(path, key, f"unknown key (known: {', '.join(_KEYS)})")
        if isinstance(value, bool) or not isinstance(value, _KEYS[key]):
            raise ProfileError(path, key, f"expected {_type_name(_KEYS[key])}, got {value!r}")
    for name, value in data.get("flags", {}).items():
        ok = isinstance(value, (bool, int, float, str)) or (
            isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value))
        if not ok:
            raise ProfileError(path, f"flags.{name}", f"must be a boolean, number, string or list of those, got {value!r}")
        if name.startswith("-"):
            raise ProfileError(path, f"flags.{name}", "write the flag without its leading dashes")
    for name, value in data.get("env", {}).items():
        if not isinstance(value, str):
            raise ProfileError(path, f"env.{name}", f"must be a string, got {value!r}")
    if "port" in data and not 0 < data["port"] < 65536:
        raise ProfileError(path, "port", f"must be 1-65535, got {data['port']}")
    if not all(isinstance(u, str) for u in data.get("unset", [])):
        raise ProfileError(path, "unset", "must be a list of flag names")
    return data


def _merged(name: str, files: dict[str, Path], chain: tuple[str, ...] = ()) -> dict[str, Any]:
    path = files[name]
    if name in chain:
        cycle = " -> ".join([*chain[chain.index(name):], name])
        raise ProfileError(path, "extends", f"cycle: {cycle}")
    data = _read(path)
    parent_name = data.get("extends")
    if parent_name is None:
        return data
    if parent_name not in files:
        raise ProfileError(path, "extends", f"no profile named {parent_name!r} (known: {', '.join(sorted(files))})")
    parent = _merged(parent_name, files, (*chain, name))
    flags = {**parent.get("flags", {}), **data.get("flags", {})}
    for flag in data.get("unset", []):
        if flag not in flags:
            raise ProfileError(path, "unset", f"{flag!r} is not set by {parent_name!r}")
        del flags[flag]
    merged = {**parent, **data, "flags": flags, "env": {**parent.get("env", {}), **data.get("env", {})}}
    merged.pop("unset", None)
    return merged


def _build(name: str, path: Path, data: dict[str, Any]) -> Profile:
    kind = data.get("kind", "sglang")
    if kind not in KINDS:
        raise ProfileError(path, "kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    launcher = data.get("launcher")
    if launcher is None:
        raise ProfileError(path, "launcher", "missing: the command that starts the server")
    parts = shlex.split(launcher) if isinstance(launcher, str) else launcher
    if not parts or not all(isinstance(p, str) and p for p in parts):
        raise ProfileError(path, "launcher", "must name a program")
    if not data.get("model_path"):
        raise ProfileError(path, "model_path", "missing: the path of the model on the host")
    return Profile(
        name=name, path=path, kind=kind, launcher=tuple(parts), model_path=data["model_path"],
        host=data.get("host", "127.0.0.1"), port=data.get("port", 30000), description=data.get("description", ""),
        env=dict(data.get("env", {})), flags=dict(data.get("flags", {})), extends=_read(path).get("extends"),
    )


@dataclass(frozen=True)
class ProfileSet:
    profiles: dict[str, Profile]
    broken: dict[str, ProfileError]

    def get(self, name: str) -> Profile:
        if name in self.broken:
            raise self.broken[name]
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(sorted(self.profiles)) or "none"
            raise ProfileError(Path(f"{name}.toml"), None, f"no profile named {name!r} (known: {known})") from None

    @property
    def names(self) -> list[str]:
        return sorted([*self.profiles, *self.broken])


def load_profiles(*dirs: Path) -> ProfileSet:
    """Every *.toml in the directories (a later directory's file of the same name wins)."""
    files: dict[str, Path] = {}
    for directory in dirs:
        if directory.is_dir():
            for path in sorted(directory.glob("*.toml")):
                files[path.stem] = path
    profiles, broken = {}, {}
    for name, path in files.items():
        try:
            profiles[name] = _build(name, path, _merged(name, files))
        except ProfileError as e:
            broken[name] = e
    return ProfileSet(profiles, broken)

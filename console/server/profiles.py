"""Launch profiles: TOML data (never code) that says how to start an inference server.

    kind = "sglang"                 # sglang, vllm, llamacpp (llama-server), llama-cpp-python, trtllm, tgi, openai (console/engines/)
    health_path = "/health"         # optional: the kind's own unless given (so are model_arg and ready_line)
    launcher = "~/ml-env/bin/python3 -m sglang.launch_server"   # a string (split like a shell) or a list
    model_path = "/shared/kimi-k2.5-int4"
    host = "127.0.0.1"
    port = 30000
    description = "…"
    extends = "baseline"            # inherit, then override
    nodes = ["gpu1", "gpu2"]        # a server across nodes (or a group of pivot.toml): rank R on the R-th;
                                    # on a Slurm host, a number of nodes (or the list's length): Slurm picks them
    dist_port = 50000               # the ranks' rendezvous port on the first node (console/server/multinode.py)
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
from typing import Annotated, Any, cast

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from console.config import ConfigError, read_small
from console.engines import DEFAULT, ENGINES, HEALTH_PATH, KINDS, MULTINODE, POSITIONAL, Drafting, Engine, FlagValue
from console.remote.command import shell_line
from console.schema import Bool, Int, Invalid, Number, Port, Str, Table, choice, expect, must, validate
from console.untrusted import visible


def drafting_text(found: Drafting | None) -> str:
    if found is None:
        return "no speculative decoding"
    steps = f", {found.steps} draft tokens" if found.steps is not None else ""
    return f"speculative decoding: {visible(found.method)}{steps}"


def _argv(launcher: str | list[str]) -> tuple[str, ...]:
    try:
        parts = shlex.split(launcher) if isinstance(launcher, str) else launcher
    except ValueError as e:  # an unclosed quote
        raise PydanticCustomError("pivot", "cannot split it like a shell: {why}", {"why": str(e)}) from None
    if not parts or not all(parts):
        raise PydanticCustomError("pivot", "must name a program")
    return tuple(parts)


_MODEL_PATH = "the path of the model on the host"
Launcher = Annotated[Str | list[Str], expect("a string or a list"), AfterValidator(_argv)]
FlagName = Annotated[str, must(lambda n: not n.startswith("-"), "write the flag without its leading dashes")]
Flag = Annotated[Bool | Int | Number | Str | list[Int | Number | Str], expect("a boolean, number, string or list of those")]


class ProfileFile(Table):
    """A launch profile's keys. A file that `extends` another may leave out what its parent gives (checked after
    the merge)."""

    kind: Annotated[Str, choice(*KINDS)] = DEFAULT
    health_path: (
        Annotated[
            Str,
            must(
                lambda p: HEALTH_PATH.fullmatch(p) is not None, "expected a path starting with / (printable ASCII, no space), got {value}"
            ),
        ]
        | None
    ) = None
    model_arg: (
        Annotated[
            Str,
            must(
                lambda a: a == POSITIONAL or (a.startswith("-") and len(a) > 1),
                f"expected a flag such as --model, or {POSITIONAL!r}, got {{value}}",
            ),
        ]
        | None
    ) = None
    ready_line: Str | None = None
    launcher: Launcher = Field(description="the command that starts the server")
    model_path: Annotated[Str, must(bool, f"missing: {_MODEL_PATH}")] = Field(description=_MODEL_PATH)
    host: Str = "127.0.0.1"
    port: Port = 30000
    description: Str = ""
    extends: Str | None = None
    nodes: (
        Annotated[
            Int | Str | list[Str],
            expect("a list of host names, a group's name, or a number of nodes"),
            must(lambda v: v >= 1 if isinstance(v, int) else bool(v) and all(v), "names no host"),
        ]
        | None
    ) = None
    dist_port: Port = 50000
    unset: Annotated[list[Str], expect("a list of flag names")] = []  # inherited flags to remove
    # an adaptive profile pivot wrote: the runs of the comparison it came from (baseline, drafting), to verify it by
    measured_from: Annotated[list[Str], expect("a list of run names")] = []
    env: dict[str, Str] = {}
    flags: dict[FlagName, Flag] = {}


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
    overrides: Mapping[str, str] = field(default_factory=dict)  # health_path, model_arg, ready_line as written
    nodes: tuple[str, ...] = ()  # hosts, or one group's name, as written: resolved against pivot.toml at a start
    node_count: int = 0  # `nodes = N`: a number of nodes, for a Slurm host to choose
    dist_port: int = 50000
    measured_from: tuple[str, ...] = ()  # an adaptive profile pivot wrote: its comparison's runs (baseline, drafting)

    @property
    def engine(self) -> Engine:
        return ENGINES[self.kind]

    @property
    def health_paths(self) -> tuple[str, ...]:
        return (self.overrides["health_path"],) if "health_path" in self.overrides else self.engine.health

    @property
    def nodes_needed(self) -> int:
        """How many nodes the server spans (1: one host)."""
        return self.node_count or len(self.nodes) or 1

    @property
    def model_arg(self) -> str:
        return self.overrides.get("model_arg", self.engine.model_arg)

    @property
    def ready_line(self) -> str | None:
        return self.overrides.get("ready_line", self.engine.ready_line)

    @property
    def drafting(self) -> Drafting | None:
        """How its server drafts, by its engine's own rules (console/engines/); None: it does not."""
        return self.engine.drafting(self.argv(), self.env)

    def drafting_text(self) -> str:
        return drafting_text(self.drafting)

    @property
    def left_out(self) -> list[str]:
        """Flags set to false: not on the command line at all (the engine's default applies). To pass the word, write
        the string: `flag = "False"`."""
        return [f"--{name}" for name, value in self.flags.items() if value is False]

    def flag_args(self) -> list[str]:
        """true: the bare flag; false: left out; a list: the flag once per item; anything else: the flag and its value
        as written (the string "False" passes as is)."""
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
        model = [self.model_path] if self.model_arg == POSITIONAL else [self.model_arg, self.model_path]
        return [*self.launcher, *model, "--host", self.host, "--port", str(self.port), *self.flag_args()]

    def command_line(self) -> str:
        """What an operator can paste into a shell on the host to start this server: `env KEY=VALUE … argv`."""
        env = ["env", *(f"{k}={v}" for k, v in self.env.items())] if self.env else []
        return shell_line([*env, *self.argv()])


def diff(a: Profile, b: Profile) -> list[tuple[str, str | None, str | None]]:
    """(setting, value in a, value in b) for every setting that differs; None where absent."""
    rows: list[tuple[str, str | None, str | None]] = []
    for key in (
        "kind",
        "launcher",
        "model_path",
        "model_arg",
        "host",
        "port",
        "health_paths",
        "ready_line",
        "nodes",
        "node_count",
        "dist_port",
    ):
        va, vb = getattr(a, key), getattr(b, key)
        if va != vb:
            rows.append((key, _setting(key, va), _setting(key, vb)))
    if a.drafting_text() != b.drafting_text():
        rows.append(("speculation", a.drafting_text(), b.drafting_text()))
    for key in sorted(set(a.env) | set(b.env)):
        if a.env.get(key) != b.env.get(key):
            rows.append((f"env.{key}", a.env.get(key), b.env.get(key)))
    for key in list(dict.fromkeys([*a.flags, *b.flags])):
        va, vb = a.flags.get(key), b.flags.get(key)
        if va != vb:
            rows.append((f"--{key}", None if va is None else _show(va), None if vb is None else _show(vb)))
    return rows


def _setting(key: str, value: Any) -> str:
    if key == "launcher":
        return shlex.join(value)
    if key == "health_paths":
        return ", then ".join(value)
    if key == "nodes":
        return ", ".join(value) or "(this host)"
    return "(none)" if value is None else str(value)


def _show(value: FlagValue) -> str:
    if value is True:
        return "(bare flag)"
    if value is False:
        return "(left out)"
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def _read(path: Path) -> dict[str, Any]:
    """The file's own keys, each checked (the launcher and model path may come from the profile it extends)."""
    try:
        data = tomllib.loads(read_small(path))
    except ConfigError as e:
        raise ProfileError(path, None, e.problem) from None
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(path, None, f"not valid TOML: {e}") from None
    try:
        validate(ProfileFile, data, partial=True)
    except Invalid as e:
        raise ProfileError(path, e.key, e.problem) from None
    return data


MAX_EXTENDS = 16  # a chain of profiles each extending the next: deeper is a mistake, or a file not the operator's


def _merged(name: str, files: dict[str, Path], chain: tuple[str, ...] = ()) -> dict[str, Any]:
    path = files[name]
    if name in chain:
        cycle = " -> ".join([*chain[chain.index(name) :], name])
        raise ProfileError(path, "extends", f"cycle: {cycle}")
    if len(chain) >= MAX_EXTENDS:
        raise ProfileError(
            files[chain[0]], "extends", f"a chain of more than {MAX_EXTENDS} profiles: {' -> '.join(chain[:3])} -> … -> {name}"
        )
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
    if "measured_from" not in data:  # a profile extending an adaptive one was measured from nothing
        merged.pop("measured_from", None)
    return merged


def _build(name: str, path: Path, data: dict[str, Any], extends: str | None) -> Profile:
    try:
        spec: ProfileFile = validate(ProfileFile, data)
    except Invalid as e:
        raise ProfileError(path, e.key, e.problem) from None
    count = spec.nodes if isinstance(spec.nodes, int) else 0
    nodes: tuple[str, ...] = (
        (spec.nodes,) if isinstance(spec.nodes, str) else tuple(spec.nodes or ()) if isinstance(spec.nodes, list) else ()
    )
    if nodes or count > 1:
        if spec.kind not in MULTINODE:
            raise ProfileError(path, "nodes", f"pivot knows the multi-node flags of {', '.join(MULTINODE)} only, not of {spec.kind}")
        if len(set(nodes)) < len(nodes):
            raise ProfileError(path, "nodes", "names a host twice")
        if set_by_pivot := [f for f in spec.flags if f in ENGINES[spec.kind].rank_flags]:
            raise ProfileError(path, f"flags.{set_by_pivot[0]}", "pivot sets it on each node from nodes (leave it out)")
    return Profile(
        name=name,
        path=path,
        kind=spec.kind,
        launcher=cast("tuple[str, ...]", spec.launcher),
        model_path=spec.model_path,
        host=spec.host,
        port=spec.port,
        description=spec.description,
        env=dict(spec.env),
        flags=dict(spec.flags),
        extends=extends,
        overrides={k: v for k in ("health_path", "model_arg", "ready_line") if (v := getattr(spec, k)) is not None},
        nodes=nodes,
        node_count=count,
        dist_port=spec.dist_port,
        measured_from=tuple(spec.measured_from),
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
            profiles[name] = _build(name, path, _merged(name, files), _read(path).get("extends"))
        except ProfileError as e:
            broken[name] = e
    return ProfileSet(profiles, broken)

"""What pivot knows of one kind of inference server, and the registry of them all.

Each engine is a class in its own module of this package, registered by its kind. The class holds the facts read in
the engine's own source or docs, at the place its `source` gives (how the model is passed, how to tell it is ready,
where its metrics are, which request fields it honours), and the behaviour that follows from them: how its command
line drafts, how it spans nodes, what it says is wrong with a launch, and how an adaptive schedule is written for it.
Nothing outside this package names a kind; a profile may override the first three facts.

Health: the paths are asked in order; 200 is ready, 404 (no such route) passes to the next path, anything else
(503 while a model loads) is "starting". An engine with no health route of its own is asked `GET /v1/models`,
unless that would disturb it (see llama-cpp-python)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from console.engines.flags import parse_flags

HEALTH_PATH = re.compile(r"/[!-~]*")  # a health path as it goes on the wire: printable ASCII, no space
POSITIONAL = "positional"  # model_arg: the model is the first argument after the launcher

FlagValue = bool | int | float | str | list[str | int | float]  # a profile's flag, as TOML gives it


@dataclass(frozen=True)
class Drafting:
    """A server that drafts: its engine, method and draft length (None where the engine picks it)."""

    engine: str
    method: str
    steps: int | None
    config: dict[str, Any] = field(default_factory=dict)  # the engine's whole speculative config object, if it has one


class NoAdaptiveProfile(Exception):
    """Why no adaptive profile can be written, in one line for the operator."""


@dataclass(frozen=True)
class Schedule:
    """Drafting switched off by batch size, in the engine's own form."""

    drafting_up_to: int  # the largest measured C that keeps drafting
    first_off: int  # the smallest running batch that does not draft
    config: dict[str, Any]  # what the engine reads: a config file's object, or its speculative config
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class LengthSchedule:
    """The draft length measured best at each running batch, in the engine's own form: what it is to be told
    (`config`: its file's object or its speculative config; None for an engine told by which server runs), the text to
    write or show, and the length it will run at each measured batch by its own routing (padding, tier bounds)."""

    config: dict[str, Any] | None
    text: str
    routes: dict[int, int]  # each measured running batch: the draft length the engine runs it at
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Measured:
    """What a comparison measured of the drafting server, for its schedule."""

    spec_name: str  # the drafting profile
    baseline_name: str  # the profile measured without drafting
    argv: list[str]  # the drafting profile's command line
    found: Drafting  # how it drafts
    cut: int  # the largest C where drafting paid off
    levels: list[int]  # every compared C
    batch_sizes: list[int] | None  # the batch sizes the server reported it pads to, if it did
    gpu_memory_mib: float | None


class Engine:
    """An engine kind's facts and behaviour; a subclass per engine, registered with @register. The defaults are those
    of a server pivot knows nothing more of."""

    kind: ClassVar[str]
    title: ClassVar[str]
    model_arg: ClassVar[str]  # the flag that takes the model, or POSITIONAL
    health: ClassVar[tuple[str, ...]]  # paths asked in order (see the module's docstring)
    ready_line: ClassVar[str | None] = None  # what its log says once it serves, if it says anything of its own
    metrics: ClassVar[str | None] = None  # Prometheus text, when the server has it (some only with a flag)
    # takes "ignore_eos" (a server that does not may refuse it: TRT-LLM's requests forbid unknown fields)
    ignore_eos: ClassVar[bool] = False
    ends_early: ClassVar[bool] = True  # a request may still end before max_tokens (ignore_eos ignored by it or a server)
    include_usage: ClassVar[bool] = True  # honours stream_options.include_usage: the last chunk counts the tokens
    source: ClassVar[str]  # where these facts were read
    # the flags pivot sets on each node of a server across nodes; empty: pivot does not know how it spans nodes
    rank_flags: ClassVar[tuple[str, ...]] = ()
    every_rank_serves_http: ClassVar[bool] = False  # whether ranks above 0 bind the profile's host and port
    # the rank's command line under Slurm, run by srun in each task: "$@" is the profile's argv (env included)
    rank_shell: ClassVar[str | None] = None
    adaptive_file: ClassVar[bool] = False  # an adaptive schedule is a file on the host (else it is in the flags)
    adaptive_flag: ClassVar[str | None] = None  # the flag that carries it
    adaptive_cost: ClassVar[str] = ""  # what running an adaptive schedule is known to cost, in a parenthesis
    # the flags that name a file of options on the host where the engine is told how it drafts (not its command line)
    options_flags: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        return f"<engine {self.kind}>"

    def drafting(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Drafting | None:
        """How a server with this command line (and environment) drafts, by the engine's own rules; None when it does
        not, or when pivot does not know how this engine is told to."""
        return None

    def adaptive_warning(self, argv: Sequence[str]) -> str | None:
        """What the server would do with the batch-size speculation its command line asks for, when that is not what
        it asks: the engine switches it off (and says so only in its own log)."""
        return None

    def node_flags(self, nnodes: int, rank: int, address: str, port: int) -> dict[str, FlagValue]:
        """The engine's own flags for rank `rank` of `nnodes` whose rank 0 is at address:port."""
        raise ValueError(f"no multi-node flags known for {self.kind}")

    def launch_warning(self, flags: Mapping[str, FlagValue], help_text: str) -> str | None:
        """A warning on a profile's flags, given its launcher's --help: what would spoil a measurement."""
        return None

    async def served_model(self, argv: Sequence[str], get: Callable[[str], Awaitable[bytes]]) -> str | None:
        """The model the running server serves: `get` reads one of its HTTP paths (its errors are the caller's)."""
        return str(json.loads(await get("/v1/models"))["data"][0]["id"])

    def schedule(self, measured: Measured) -> Schedule:
        """Drafting kept up to measured.cut and off above, as this engine reads it; NoAdaptiveProfile when it cannot."""
        raise NoAdaptiveProfile(f"no adaptive profile: pivot knows no batch-size speculation for {self.kind} servers")

    def adaptive_flags(
        self, profile_flags: Mapping[str, FlagValue], schedule: Schedule, config_path: str | None
    ) -> tuple[dict[str, FlagValue], list[str]]:
        """The flags a profile that extends the drafting one sets for the schedule (config_path: where its file is on
        the host, for an engine that reads a file), and the parent's flags it unsets."""
        raise NoAdaptiveProfile(f"no adaptive profile: pivot knows no batch-size speculation for {self.kind} servers")

    def max_batch(self, argv: Sequence[str]) -> int | None:
        """The most requests its command line lets the server run at once, where it says."""
        return None

    # Tuning (console/sweep/tune.py): a drafting profile's siblings of other draft lengths, and the schedule of the
    # best length for each running batch.
    def length_flags(self, flags: Mapping[str, FlagValue], length: int) -> tuple[dict[str, FlagValue], list[str]]:
        """The flags a profile extending a drafting one sets to draft `length` tokens a step, and the parent's flags
        it unsets; NoAdaptiveProfile when pivot does not know how this engine is told."""
        raise NoAdaptiveProfile(f"pivot does not know how a {self.title} server is told its draft length")

    def plain_flags(self, flags: Mapping[str, FlagValue]) -> list[str]:
        """The flags to unset from a drafting profile for the same server without drafting."""
        raise NoAdaptiveProfile(f"pivot does not know which of a {self.title} profile's flags make it draft")

    def length_schedule(self, points: list[tuple[int, int]], argv: Sequence[str], sizes: list[int] | None) -> LengthSchedule:
        """points: (running batch, best draft length) for each measured level, batches ascending; sizes: the CUDA-graph
        batch sizes the server reported, if it did."""
        raise NoAdaptiveProfile(f"pivot knows no draft-length schedule for {self.title} servers")

    def tuned_flags(
        self, flags: Mapping[str, FlagValue], schedule: LengthSchedule, config_path: str | None
    ) -> tuple[dict[str, FlagValue], list[str]]:
        """The flags a profile extending the drafting one sets to run the schedule (config_path: where its file is on
        the host, for an engine that reads one), and the parent's flags it unsets."""
        raise NoAdaptiveProfile(f"pivot knows no draft-length schedule for {self.title} servers")

    # An engine told how it drafts by a file of options (options_flags): that file's object, read from the host.
    def options_path(self, argv: Sequence[str]) -> str | None:
        """The options file its command line names, if any."""
        parsed = parse_flags(argv)
        found = [str(parsed[f]) for f in self.options_flags if isinstance(parsed.get(f), str)]
        return found[-1] if found else None

    def options_flag(self, flags: Mapping[str, FlagValue]) -> str:
        """The spelling of the options flag a profile uses, so that a profile extending it overrides that one."""
        return next((f for f in self.options_flags if f in flags), self.options_flags[0])

    def drafting_in(self, options: Mapping[str, Any]) -> Drafting | None:
        """How a server given these options drafts; None when it does not."""
        return None

    def fixed_length(self, found: Drafting) -> bool:
        """Whether a server that drafts so drafts its length at every batch (not by a schedule of its own)."""
        return True

    def options_at_length(self, options: Mapping[str, Any], length: int) -> dict[str, Any]:
        """The options of the same server drafting `length` tokens a step (0: not drafting)."""
        raise NoAdaptiveProfile(f"pivot does not know how a {self.title} server is told its draft length")

    def options_tuned(self, options: Mapping[str, Any], schedule: LengthSchedule) -> dict[str, Any]:
        """The options of the same server running the schedule."""
        raise NoAdaptiveProfile(f"pivot knows no draft-length schedule for {self.title} servers")


ENGINES: dict[str, Engine] = {}


E = TypeVar("E", bound=type[Engine])


def register(cls: E) -> E:
    """A class decorator: the engine, registered by its kind."""
    ENGINES[cls.kind] = cls()
    return cls

"""What a sweep does: the levels, how many requests each, what each request asks for.

The fields are the schema of pivot.toml's `[sweep]` table, of the settings a run
keeps in its run.toml, and of the start form: one declaration, checked by
`from_dict` and `validate`, whose errors name the key in one line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, Strict, with_config

from console.schema import Int, PositiveInt, Seconds, Str, expect, validate

DEFAULT_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)
WORKER_C = 128  # requests in flight one load generator process carries, with `workers = "auto"`

Levels = Annotated[tuple[PositiveInt, ...], Field(min_length=1), expect("a list of positive integers")]
Requests = Annotated[Literal["auto", "c"] | Annotated[int, Strict(), Field(gt=0)], expect("'auto', 'c' or a positive integer")]


def parse_levels(text: str) -> list[int]:
    """Levels as typed (`1,2,5`): positive whole numbers, comma-separated; ValueError naming the first that is not."""
    found = []
    for item in text.replace(" ", "").split(","):
        if item:
            if not item.isdigit() or int(item) < 1:
                raise ValueError(f"{item!r} is not a positive whole number")
            found.append(int(item))
    if not found:
        raise ValueError("no level given")
    return found


def tidy_levels(levels: list[int] | tuple[int, ...]) -> tuple[tuple[int, ...], str | None]:
    """The levels in order, each once; and what was changed, in words (None: nothing)."""
    tidy = tuple(sorted(set(levels)))
    said = []
    if len(tidy) < len(levels):
        twice = sorted({c for c in levels if list(levels).count(c) > 1})
        said.append(f"{', '.join(map(str, twice))} given more than once: measured once")
    if list(dict.fromkeys(levels)) != list(tidy):
        said.append("levels are measured in rising order")
    return tidy, "; ".join(said) or None


@with_config(ConfigDict(extra="forbid"))
@dataclass(frozen=True)
class SweepSettings:
    levels: Levels = DEFAULT_LEVELS
    requests: Requests = "auto"  # "auto": 4*C; "c": C (one wave); both at least min_requests; or a number, taken as it is
    # "auto" and "c" take at least this many (default 16 and 4): a level's interval narrows with the square root of
    # its requests, and a C=1 level of four requests decides little
    min_requests: Annotated[int, Strict(), Field(ge=2), expect("an integer of at least 2")] | None = None
    duration_s: Seconds | None = None  # instead of a request count: run each level this long
    warmup: Annotated[int, Strict(), Field(ge=0), expect("a non-negative integer")] = 0  # requests per level not counted
    max_tokens: PositiveInt = 512
    input_tokens: PositiveInt = 128
    prompt_file: Str | None = None  # JSONL with a "prompt" (or "messages") per line
    # without a prompt file: a prompt of its own for each request (no prefix cache serves them), or false: 64 seeded
    # prompts used over and over (a server's prompt cache then serves most of each)
    unique_prompts: bool = True
    api: Annotated[Literal["completions", "chat"], expect("completions or chat")] = "completions"
    model: Str | None = None  # None: ask the server
    api_key_env: Str | None = None  # the NAME of an environment variable; the key is never written down
    timeout_s: Seconds = 600.0  # one request, start to end
    idle_timeout_s: Seconds = 60.0  # no byte, or no whole event, from the server for this long ends a request with an error
    # added to every request (min_tokens, logit_bias, …)
    extra_body: Annotated[dict[str, Any], expect("a table of request fields")] = field(default_factory=dict)
    server_wait_s: Seconds = 60.0  # after a failed level: how long to wait for the server to answer again
    seed: Int = 0
    # measure the first level again at the end of a sweep: how far the server (or the machine) drifted while it ran
    drift_check: bool = True
    # where the load generator runs when the server is on an SSH host: on the host itself, next to the server (no
    # SSH forward or jump host between them: console/sweep/loadgen/__main__.py), on the console's machine, or the host when
    # its python can (else here, saying why)
    client: Annotated[Literal["auto", "host", "console"], expect("auto, host or console")] = "auto"
    # how many processes send a level's requests (console/sweep/loadgen/workers.py): "auto" is one per WORKER_C requests
    # in flight, at most one per CPU of the client's machine but one (left to the server or the console), at most 16
    workers: Annotated[Literal["auto"] | Annotated[int, Strict(), Field(gt=0, le=64)], expect("'auto' or an integer from 1 to 64")] = "auto"

    def requests_for(self, c: int) -> int:
        if isinstance(self.requests, int):
            return self.requests
        if self.requests == "c":
            return max(c, self.min_requests or 4)
        return max(4 * c, self.min_requests or 16)

    def workers_for(self, c: int, cpus: int | None) -> int:
        """The processes that send a level of C requests in flight, on a machine of `cpus` CPUs."""
        if isinstance(self.workers, int):
            return min(self.workers, c)
        return max(1, min(-(-c // WORKER_C), (cpus or 1) - 1, 16))

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if v is not None and v != {}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSettings:
        """Raises ValueError (console.schema.Invalid: `key: problem`, one line) when a value is wrong."""
        settings: SweepSettings = validate(cls, data)
        return settings

    def validate(self) -> None:
        """Raises ValueError naming the key when a field is wrong (fields set directly are not checked)."""
        validate(SweepSettings, asdict(self))

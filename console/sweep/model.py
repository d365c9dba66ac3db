"""The sweep's vocabulary: what the load generator writes, typed once. A level's numbers (`LevelMetrics`, computed by
console/sweep/metrics.py) and the events of a run, as one tagged union that `decode_event` reads: at the two places
where events come from elsewhere, the host's load generator (console/sweep/loadgen/host_generator.py) and a run's
events.jsonl (console/sweep/runs/reader.py). Strict: a number is a number (not "12", not NaN), a count an integer.
Fields pivot does not know are kept (an older or newer pivot's). Shipped to the host in the load generator's zipapp:
pydantic 2 only."""

from __future__ import annotations

import enum
import math
import shlex
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, TypeAdapter, ValidationError

from console.settings import SweepSettings
from console.sweep.reported import ClientPlacement, PromptSource, ServerFacts

__all__ = [
    "EVENT_TYPES",
    "ClientPlacement",
    "Event",
    "EventError",
    "LevelDone",
    "LevelMetrics",
    "PromptSource",
    "RequestsDone",
    "Said",
    "ServerFacts",
    "Shown",
    "SweepDone",
    "SweepStarted",
    "decode_event",
    "decode_shown",
]

Seconds = Annotated[float, Field(ge=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="allow", frozen=True)


class LevelMetrics(_Strict):
    """One level's numbers, from its requests (console/sweep/metrics.py level_metrics)."""

    c: PositiveInt
    requests: NonNegativeInt
    errors: NonNegativeInt
    wall_s: Seconds | None = None  # None: an imported run that did not say
    output_tokens: NonNegativeInt | None = None
    # the prompts' tokens, by the server's own count (its usage) of the requests where it gave one: what was asked
    prompt_tokens: NonNegativeInt | None = None
    prompt_tokens_mean: float | None = None
    total_tok_s: float
    steady_tok_s: float | None = None  # only while all C slots were busy
    req_tok_s_mean: float | None = None
    req_tok_s_p50: float | None = None
    ttft_p50: float | None = None
    ttft_p90: float | None = None
    ttft_p99: float | None = None
    itl_p50: float | None = None
    itl_p90: float | None = None
    itl_p99: float | None = None
    e2e_p50: float | None = None
    e2e_p90: float | None = None
    e2e_p99: float | None = None
    requests_per_s: float | None = None
    usage_missing: NonNegativeInt = 0
    server: dict[str, float | None] = Field(default_factory=dict)  # the server's own view (/metrics), level means
    # 95 % intervals (None where the level has too few requests to say)
    total_tok_s_lo: float | None = None
    total_tok_s_hi: float | None = None
    req_tok_s_lo: float | None = None
    req_tok_s_hi: float | None = None
    ttft_mean: float | None = None
    ttft_lo: float | None = None
    ttft_hi: float | None = None
    itl_mean: float | None = None  # the mean of each request's mean inter-token latency
    itl_lo: float | None = None
    itl_hi: float | None = None
    short: NonNegativeInt = 0  # requests that ended early with finish_reason "stop": their tokens count
    over_asked: NonNegativeInt = 0  # requests whose usage exceeded max_tokens
    first_error: str | None = None
    failed: str | None = None  # why the level is not a measurement (errors, the link, the server); None: it is
    attempts: PositiveInt = 1  # repeats of the level merged into these numbers
    retried: NonNegativeInt = 0  # requests sent again on a connection of their own (the server closed a kept-alive one)
    lacking: NonNegativeInt = 0  # requests the level still lacks: it was cut short (an abort) and a resume measures them
    # 95 % intervals of the percentiles an SLO holds a level to (console/sweep/capacity.py), over its requests
    ttft_p90_lo: float | None = None
    ttft_p90_hi: float | None = None
    itl_p90_lo: float | None = None
    itl_p90_hi: float | None = None
    req_tok_s_p50_lo: float | None = None
    req_tok_s_p50_hi: float | None = None

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


MIN_POWER_READINGS = 4  # a level's power figure needs at least this many readings (console/sweep/loadgen/generator.py)


class Pool(enum.Enum):
    """How a repeated level's attempts give one value of a field the client saw (console/sweep/runs/store.py _pooled;
    the level's numbers are computed again from all its requests, the server's view is their mean)."""

    WORST = "the largest attempt's"  # the client's own load: the worst attempt decides whether it was the limit
    FIRST_SAID = "the first attempt's that says"  # a reason, a list of hosts
    OVER_TIME = "the mean over the attempts' time, where every attempt read it"  # a rate, like power
    SUM = "the attempts' together"  # a count


class LevelDone(LevelMetrics):
    """A level measured: its numbers, and what the client saw of itself while it measured them. A field of the client's
    declares how repeats pool it (Pool); one without is the attempt's own (repeat, reference)."""

    type: Literal["level_done"] = "level_done"
    repeat: bool = False  # a repeat of the level, pooled with the attempt before
    reference: bool = False  # the sweep's first level measured again at its end (console/sweep/runs/store.py Drift)
    nodes: Annotated[str | None, Pool.FIRST_SAID] = None  # a server across nodes: the hosts that served it, rank 0 first
    peak_in_flight: Annotated[NonNegativeInt | None, Pool.WORST] = None
    # a rate level (open loop): its rate in requests per second, how late the client sent against its schedule (s),
    # and the arrivals that waited for max_in_flight
    rate: Annotated[float | None, Pool.FIRST_SAID] = None
    late_p50: Annotated[float | None, Pool.WORST] = None
    late_p90: Annotated[float | None, Pool.WORST] = None
    late_p99: Annotated[float | None, Pool.WORST] = None
    held: Annotated[NonNegativeInt | None, Pool.SUM] = None
    client_cpu: Annotated[float | None, Pool.WORST] = None  # of the busiest of its processes
    workers: Annotated[PositiveInt | None, Pool.WORST] = None  # the load generator's processes that sent the requests
    loop_lag_p50: Annotated[float | None, Pool.WORST] = None
    loop_lag_p90: Annotated[float | None, Pool.WORST] = None
    loop_lag_p99: Annotated[float | None, Pool.WORST] = None
    load_avg: Annotated[float | None, Pool.WORST] = None
    host_load_avg: Annotated[float | None, Pool.WORST] = None
    client_bound: Annotated[str | None, Pool.FIRST_SAID] = None  # why the client, not the server, may have been the limit
    lagging: Annotated[str | None, Pool.FIRST_SAID] = None  # why the level's latencies cannot be trusted
    # the server host's GPUs' power over the level, summed (None: not read, or unknown), and its 95 % interval over the
    # level's readings (None from fewer than two)
    gpu_watts: Annotated[float | None, Pool.OVER_TIME] = None
    power_readings: Annotated[NonNegativeInt | None, Pool.SUM] = None  # None: not read (an older run: not counted)
    gpu_watts_lo: Annotated[float | None, Pool.OVER_TIME] = None
    gpu_watts_hi: Annotated[float | None, Pool.OVER_TIME] = None

    @classmethod
    def pooling(cls) -> dict[str, Pool]:
        return {name: rule for name, field in cls.model_fields.items() for rule in field.metadata if isinstance(rule, Pool)}

    # A level is one type wherever it is: the live event, a run's stored table, a pooled or imported level. The
    # table holds it flat (the server's view as server_* columns); these two are the only places that know it.
    def row(self) -> dict[str, Any]:
        """The level as a row of the run's levels table."""
        row = {k: v for k, v in self.model_dump().items() if k not in ("type", "t", "server", "repeat", "reference")}
        row.update({f"server_{k}": v for k, v in self.server.items()})
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> LevelDone:
        """A row of a levels table as the level it was (a table's column may hold 12.0 for 12, and a missing value
        as null or NaN: both are "not measured"); EventError when it is not one."""
        known = {k: v for k, v in row.items() if v is not None and not (isinstance(v, float) and math.isnan(v))}
        server = {k.removeprefix("server_"): known.pop(k) for k in [k for k in known if k.startswith("server_")]}
        try:
            return cls.model_validate({**known, "server": server}, strict=False)
        except ValidationError as e:
            raise EventError(_first_error(e)) from None

    @property
    def measured(self) -> bool:
        """A point of the curve: not failed (a client-bound level is one, flagged)."""
        return not self.failed

    @property
    def accept_rate(self) -> float | None:
        """Of the drafted tokens, the share the target model accepted, as the server reported it; None where it
        drafted nothing (SGLang reports its gauges at 0 when it does not speculate: a step keeps at least one token)."""
        if self.server.get("spec_accept_length") == 0:
            return None
        return self.server.get("spec_accept_rate")

    @property
    def accept_length(self) -> float | None:
        """Tokens a verification step kept, as the server reported it (None where it drafted nothing)."""
        return self.server.get("spec_accept_length") or None

    @property
    def energy_unknown(self) -> str | None:
        """Why a level whose host read power has no energy figure: too few readings for its length."""
        if self.gpu_watts is None and self.power_readings is not None:
            if self.power_readings >= MIN_POWER_READINGS:  # attempts pooled: one of them read too few for a figure
                return f"{self.power_readings} power readings over its attempts, one of which read too few to pool them"
            return f"{self.power_readings} power reading(s), too few for a figure"
        return None

    @property
    def joules_per_token(self) -> float | None:
        """The GPUs' energy per output token: their power over the level's throughput (None where either is unknown)."""
        return self.gpu_watts / self.total_tok_s if self.gpu_watts is not None and self.total_tok_s else None

    # Its interval: the power's and the throughput's ends together (wider than either, never narrower than the truth)
    @property
    def joules_per_token_lo(self) -> float | None:
        return self.gpu_watts_lo / self.total_tok_s_hi if self.gpu_watts_lo is not None and self.total_tok_s_hi else None

    @property
    def joules_per_token_hi(self) -> float | None:
        return self.gpu_watts_hi / self.total_tok_s_lo if self.gpu_watts_hi is not None and self.total_tok_s_lo else None

    @property
    def draft_share(self) -> float | None:
        """Of the level's output tokens, the share that came from accepted drafts, by the server's own counts: what
        speculation gave. A draft accepted every time it was made is no win when it is made for 4 % of the tokens.
        From accepted draft tokens (llama-server's timings over the tokens they predicted; vLLM's counter over the
        level's tokens, which leave out its warm-up), else from tokens per verify step (SGLang's gauge: a step keeps
        its accepted drafts and one token of the target model's)."""
        accepted = self.server.get("spec_accepted_tokens")
        if accepted is not None:
            output = self.server.get("spec_output_tokens") or self.output_tokens
            return min(1.0, accepted / output) if output else None
        length = self.accept_length
        return (length - 1) / length if length is not None and length >= 1 else None

    @property
    def draft_tokens(self) -> float | None:
        """Tokens drafted in the level, by the server's own count (llama-server's timings, vLLM's counters)."""
        return self.server.get("spec_draft_tokens")


class Said(_Strict):
    """What the console's side of a sweep says while it runs (the load generator failed, the link to the host dropped
    or came back): shown, never written to a run."""

    type: Literal["failed", "link_lost", "link_back", "notice"]
    message: str
    status: int | None = None  # of "failed": the load generator's exit status (None: it was not that)


class SweepStarted(_Strict):
    type: Literal["sweep_started"] = "sweep_started"
    url: str | None = None
    model: str | None = None
    server: ServerFacts | None = None
    resumed: list[int] = Field(default_factory=list)
    repeat: list[int] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    pid: int | None = None
    client: ClientPlacement | None = None
    prompts: PromptSource | None = None


class LevelStarted(_Strict):
    type: Literal["level_started"] = "level_started"
    c: PositiveInt
    requests: NonNegativeInt = 0
    warmup: NonNegativeInt = 0
    repeat: bool = False
    reference: bool = False  # the sweep's first level measured again at its end: its drift, not a level of its own
    rate: float | None = None  # a rate level's requests per second (its key, c, is in thousandths of them)


class Request(_Strict):
    """One request (its chunks, [[t, n], …], one a read that brought content since issue 40, are read by runevents at
    C speed, not here)."""

    type: Literal["request"] = "request"
    c: PositiveInt
    i: NonNegativeInt
    start: float
    tokens: NonNegativeInt
    chunks: list[Any] | tuple[Any, ...] = Field(default_factory=list)  # a tuple as the generator made it


def dumped(event: BaseModel) -> dict[str, Any]:
    """event.model_dump(), without pydantic's walk for a request (the load generator's most frequent event, made with
    model_construct from a record it checked): the fields as they were set."""
    if type(event) is Request:
        return {**event.__dict__, **(event.__pydantic_extra__ or {})}
    return event.model_dump()


class ServerMetrics(_Strict):
    """The server's /metrics, scraped while a level runs."""

    type: Literal["metrics"] = "metrics"
    c: PositiveInt


class LevelRetry(_Strict):
    type: Literal["level_retry"] = "level_retry"
    c: PositiveInt
    reason: str | None = None


class CapacityStep(_Strict):
    """A level of a capacity search: its key, whether it met the SLO (serves, fails, unsure), and why."""

    c: PositiveInt
    decision: Literal["serves", "fails", "unsure"]
    why: str


class Capacity(_Strict):
    """What a capacity search found (console/sweep/capacity.py): the highest level that met the SLO and the lowest that
    did not (None: none did, or none was found within the levels a server takes), to this precision."""

    slo: str
    served: int | None = None
    failed: int | None = None
    precision: float
    undecided: list[int] = Field(default_factory=list)  # levels still undecided after more requests: counted as failing
    rates: bool = False  # its levels are rates (thousandths of a request per second)
    steps: list[CapacityStep] = Field(default_factory=list)  # each level as measured, in turn


class SweepDone(_Strict):
    type: Literal["sweep_done"] = "sweep_done"
    aborted: bool = False
    stopped: bool = False
    failed: str | None = None  # why the sweep stopped before its last level
    capacity: Capacity | None = None  # a capacity search's answer


class LevelProgress(_Strict):
    """News of a level in progress: shown, never kept."""

    type: Literal["progress"] = "progress"
    c: PositiveInt
    in_flight: NonNegativeInt | None = None
    streamed: NonNegativeInt | None = None  # tokens streamed in the level so far, finished requests or not


class RequestsDone(_Strict):
    """News of a level's requests that finished since the last such news (their records are the run's, in its
    events): shown, never kept. One line a request was the console's largest cost while the generator read as fast as
    it could (issue 40)."""

    type: Literal["requests_done"] = "requests_done"
    c: PositiveInt
    n: PositiveInt
    tokens: NonNegativeInt


Event = Annotated[
    SweepStarted | LevelStarted | Request | ServerMetrics | LevelRetry | LevelDone | SweepDone | LevelProgress, Field(discriminator="type")
]
Shown = Annotated[Event | Said | RequestsDone, Field(discriminator="type")]  # what a sweep's followers are handed
_EVENT: TypeAdapter[Event] = TypeAdapter(Event)
_SHOWN: TypeAdapter[Shown] = TypeAdapter(Shown)
EVENT_TYPES = frozenset(("sweep_started", "level_started", "request", "metrics", "level_retry", "level_done", "sweep_done", "progress"))


class PromptSetFacts(BaseModel):
    """What a run records of its prompt set (console/sweep/prompt_sets.py): two runs sent the same prompts when their
    hashes agree."""

    name: str
    size: int
    sha256: str
    origin: str | None = None

    def __str__(self) -> str:
        return f"{self.name} ({self.size} prompts, {self.sha256[:12]})"


class RunMeta(BaseModel):
    """A run's run.toml: what was measured (the server, its host, the settings) and how the sweep ended. Read leniently
    (a TOML file holds 12 where 12.0 was meant); fields pivot does not know are kept."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    profile: str = "?"
    kind: str | None = None  # the engine (console/engines/)
    argv: list[str] | None = None  # the server's command line
    command_line: str | None = None  # the same in words (the only record of runs from before argv was kept)
    host: str | None = None  # the pivot.toml host, or "direct"
    url: str | None = None  # a sweep of a URL, not of a managed server
    model: str | None = None
    gpu_count: int | None = None
    gpu_names: list[str] = Field(default_factory=list)
    gpu_memory_mib: float | None = None
    nodes: list[str] | None = None  # a server across nodes: its hosts, rank 0 first
    slurm_job: int | None = None
    address: str | None = None  # a Slurm job's first node
    settings: dict[str, Any] = Field(default_factory=dict)  # console/settings.py SweepSettings
    server: ServerFacts | None = None  # at the last start (busy left out: it is the start's, not the run's)
    client: ClientPlacement | None = None  # at the last start
    imported_from: str | None = None
    source: str | None = None
    pivot_version: str | None = None
    started: str | None = None
    ended: str | None = None
    state: str | None = None  # as the tables written at `ended` have it
    levels: list[int] | None = None  # the levels those tables hold, by C (a listing reads them without the tables)
    measured_levels: list[int] | None = None  # and of those, the ones that are measurements (not failed)
    stopped_because: str | None = None
    ended_by: str | None = None  # how the last sweep of it ended: done, stopped, aborted or failed (None: it did not)
    corrupt: bool = False  # run.toml itself could not be read
    measured_from: list[str] | None = None  # its profile is an adaptive one pivot wrote from these runs (baseline, drafting)
    prompt_set: PromptSetFacts | None = None  # the prompt set its requests drew from (None: synthetic prompts)
    workload: PromptSource | None = None  # what its requests asked and how long their answers ran, at the last start
    capacity: Capacity | None = None  # its last capacity search's answer (console/sweep/capacity.py)

    def argv_or_words(self) -> list[str]:
        """The server's command line: its argv, or (runs recorded before it was kept) its command line split."""
        if self.argv is not None:
            return self.argv
        try:
            return shlex.split(self.command_line or "")
        except ValueError:  # an unquoted join of a JSON value: its words still carry the flags
            return (self.command_line or "").split()


class HostOrder(_Strict):
    """What the console's side sends the load generator on the host (console/sweep/loadgen/on_host.py), one JSON line
    on its stdin: the sweep to run, against which server, and where to spool its events."""

    settings: SweepSettings
    prompts: list[Any]
    answers: list[int] = Field(default_factory=list)  # output_lengths = "set": each prompt's answer, in tokens
    headers: dict[str, str]
    done: list[int] = Field(default_factory=list)  # levels measured already (a resume)
    repeat: list[int] = Field(default_factory=list)  # levels to measure again
    top_up: dict[int, int] = Field(default_factory=dict)  # levels cut short before: the requests each still lacks
    sent: dict[int, int] = Field(default_factory=dict)  # per level, the requests its attempts before began with
    kind: str | None = None  # the managed server's engine kind: what its requests may carry
    nodes: list[str] | None = None  # a server across nodes: its hosts, rank 0 first
    address: str | None = None  # the server's address seen from the host (a Slurm job's first node); None: loopback
    spool: str | None = None  # the token of the spool the events go to


class EventError(ValueError):
    """An event pivot cannot read: what is wrong, in one line."""


def decode_event(event: Any) -> Event:
    """The event as its type, or EventError saying the first thing wrong (`level_done.total_tok_s: Input should be a
    valid number`)."""
    try:
        return _EVENT.validate_python(event)
    except ValidationError as e:
        raise EventError(_first_error(e)) from None


def decode_shown(event: Any) -> Shown:
    """An event of a sweep as its followers are handed it: the load generator's, or the console side's `Said`."""
    try:
        return _SHOWN.validate_python(event)
    except ValidationError as e:
        raise EventError(_first_error(e)) from None


def _first_error(e: ValidationError) -> str:
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]

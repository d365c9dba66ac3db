"""Runs on disk: campaign/runs/NAME/{run.toml, events.jsonl, requests.parquet, levels.parquet}.

events.jsonl is the truth, written as things happen; the Parquet tables are
derived from it (atomically: a temporary file, then rename) when a sweep
ends, and again on demand, so a run interrupted at any moment still opens.

A level counts once it has its level_done. Attempts of a level: a fresh one
(a resume, a retry after a failure) replaces the earlier ones; a repeat
(`--repeat-uncertain`) adds its requests to the earlier good ones, and the
level's numbers are computed again from all of them. A failed attempt is
shown as failed, never averaged, and a resume runs that level again.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w
from pydantic import ValidationError

from console import version
from console.engines import DEFAULT, Drafting, engine
from console.engines.sglang import reported_drafting
from console.files import replacing, write_atomically
from console.settings import SweepSettings, rate_key
from console.sweep.level_stats import level_metrics
from console.sweep.model import (
    Capacity,
    ClientPlacement,
    EventError,
    LevelDone,
    LevelStarted,
    Pool,
    PromptSource,
    RunMeta,
    ServerFacts,
    SweepDone,
    SweepStarted,
)
from console.sweep.runs.files import EVENTS, LEVELS, META, REQUESTS, EventLogFile, EventsCorrupt, RunError, check_run_name, name_part
from console.sweep.runs.lock import RunLocked, run_lock
from console.sweep.runs.reader import Attempt, RequestColumns, RunEvents, read_run_events
from console.untrusted import visible

if TYPE_CHECKING:  # polars is imported where a table is read or written: not by the console's first screen
    import polars as pl

__all__ = [
    "EVENTS",
    "META",
    "EventLogFile",
    "Run",
    "RunError",
    "completed_levels",
    "create_run",
    "delete_run",
    "lacking_levels",
    "list_runs",
    "open_run",
    "open_run_dir",
    "runs_dir",
]


def runs_dir(campaign_dir: Path) -> Path:
    return campaign_dir / "runs"


def _pooled(c: int, attempts: list[Attempt], requests: RequestColumns | None) -> LevelDone:
    """One level's numbers from the requests of several good attempts."""
    assert requests is not None, "read with its requests (RunEvents.pooled)"
    records = [requests.record(r) for a in attempts for r in a.rows]
    servers = [{k: v for k, v in a.done.server.items() if v is not None} for a in attempts]
    server = {k: sum(s[k] for s in servers if k in s) / sum(k in s for s in servers) for k in {k for s in servers for k in s}}
    metrics = level_metrics(c, records, sum(a.done.wall_s or 0 for a in attempts), server, attempts=len(attempts))
    time = sum(a.done.wall_s or 0 for a in attempts)
    client: dict[str, Any] = {}
    for key, rule in LevelDone.pooling().items():
        values = [getattr(a.done, key) for a in attempts]
        if rule is Pool.WORST:
            client[key] = max((v for v in values if v is not None), default=None)
        elif rule is Pool.FIRST_SAID:
            client[key] = next((v for v in values if v), None)
        elif rule is Pool.SUM:
            client[key] = sum(v for v in values if v is not None) if any(v is not None for v in values) else None
        elif None not in values and time:
            client[key] = sum(v * (a.done.wall_s or 0) for v, a in zip(values, attempts, strict=True)) / time
    # what the last attempt left unmeasured (a top-up cut short in its turn) is what the level still lacks
    return LevelDone.model_validate({**metrics.model_dump(), **client, "lacking": attempts[-1].done.lacking})


def _levels(scan: RunEvents) -> list[LevelDone]:
    levels = []
    for c, group in sorted(scan.attempts.items()):
        good = [a for a in group if not a.failed]
        levels.append(_pooled(c, good, scan.requests) if len(good) > 1 else (good or group)[-1].done)
    return levels


def _frame(levels: list[LevelDone]) -> pl.DataFrame:
    import polars as pl

    if not levels:
        return pl.DataFrame({"c": pl.Series([], dtype=pl.Int64), "total_tok_s": pl.Series([], dtype=pl.Float64)})
    return pl.DataFrame([level.row() for level in levels], infer_schema_length=None)


@dataclass(frozen=True)
class _Summary:
    """What the run's readers ask of its events (levels, state, why it stopped): small, so kept per version of the
    file for the life of the process, where the events themselves are not."""

    levels: list[LevelDone]
    state: str
    stopped_because: str | None
    server: ServerFacts | None  # what the server said of itself at the last start
    client: ClientPlacement | None  # where the load generator ran, at the last start
    workload: PromptSource | None  # what its requests asked, and how long their answers ran, at the last start
    capacity: Capacity | None  # the last capacity search's answer
    reference: LevelDone | None  # the first level measured again at the end of the last sweep that did


def _summarize(scan: RunEvents, wanted: set[int]) -> _Summary:
    levels = _levels(scan)
    measured = {level.c for level in levels if level.measured}
    done = scan.of_type(SweepDone)
    last = done[-1] if done else None
    # any sweep of it that ran to its end: a repeat aborted afterwards (u, then A) adds no level and takes none away
    if any(not (d.aborted or d.stopped or d.failed) for d in done) and wanted <= measured:
        state = "complete"
    else:
        state = "partial" if measured or scan.attempts else "empty"
    started = scan.of_type(SweepStarted)
    server = next((e.server.model_copy(update={"busy": None}) for e in reversed(started) if e.server), None)
    client = next((e.client for e in reversed(started) if e.client), None)
    workload = next((e.prompts for e in reversed(started) if e.prompts), None)
    capacity = next((d.capacity for d in reversed(done) if d.capacity), None)
    reference = next((r for r in reversed(scan.of_type(LevelDone)) if r.reference and r.measured), None)
    return _Summary(levels, state, (last.failed or None) if last else None, server, client, workload, capacity, reference)


_SUMMARIES: dict[Path, tuple[tuple[int, int, int], _Summary | EventsCorrupt]] = {}


def _read_levels(run_dir: Path) -> RunEvents:
    """The events, their requests only where a level's numbers must be computed again from them."""
    scan = read_run_events(run_dir, requests=False)
    return read_run_events(run_dir) if scan.pooled else scan


def completed_levels(run_dir: Path) -> set[int]:
    """Levels measured (not failed) to their last request: a resume leaves them alone."""
    return {level.c for level in _levels(_read_levels(run_dir)) if level.measured and not level.lacking}


def prompts_sent(run_dir: Path) -> dict[int, int]:
    """Per level, the requests its attempts so far began with (warm-up too): a repeat of it, or its measure again at
    the end of a sweep, draws the prompts of its order after those, which no prompt cache holds yet."""
    sent: dict[int, int] = {}
    for started in read_run_events(run_dir, requests=False).of_type(LevelStarted):
        sent[started.c] = sent.get(started.c, 0) + started.requests + started.warmup
    return sent


def lacking_levels(run_dir: Path) -> dict[int, int]:
    """Levels cut short (an abort, a Ctrl-C) with the requests each still lacks: a resume measures only those, and
    pools them with the ones kept."""
    return {level.c: level.lacking for level in _levels(_read_levels(run_dir)) if level.measured and level.lacking}


def _atomic_parquet(frame: pl.DataFrame, path: Path, row_group_size: int | None = None) -> None:
    """row_group_size: rows written at a time (the writer's memory grows with it)."""
    import polars as pl

    try:
        with replacing(path) as tmp:
            frame.write_parquet(tmp, row_group_size=row_group_size)
    except (OSError, pl.exceptions.PolarsError) as e:
        raise RunError(f"cannot write {path}: {getattr(e, 'strerror', None) or e}") from None


@dataclass
class Run:
    name: str
    dir: Path
    meta: RunMeta
    corrupt: str | None = None  # why its events cannot be read (file and line), once found

    @property
    def profile(self) -> str:
        return self.meta.profile

    @property
    def settings(self) -> SweepSettings:
        """The settings it was measured with (ConfigError, one line, when run.toml's are not settings)."""
        return SweepSettings.from_dict(self.meta.settings)

    @property
    def drafting(self) -> Drafting | None:
        """How the measured server drafted, by its engine's rules, from its recorded command line."""
        found = engine(self.meta.kind or DEFAULT).drafting(self.meta.argv_or_words())
        if found is None and self.meta.server and (algorithm := self.meta.server.speculative_algorithm):
            return reported_drafting(algorithm)
        return found

    @property
    def client_placement(self) -> str | None:
        """Where its load generator ran and how it reached the server, in words; None for runs that did not say."""
        client = self.meta.client
        if client is None or not client.machine:
            return None
        how = {"ssh-forward": f"through an SSH forward to {client.host}", "on-host": "on the GPU host, next to the server"}
        return f"on {visible(client.machine)}, {visible(how.get(client.path or '', 'direct'))}"

    @property
    def rates(self) -> bool:
        """Its levels are request rates (open loop, keyed in thousandths of a request per second), not concurrencies."""
        return bool(self.meta.settings.get("rates"))

    @property
    def workload(self) -> list[str]:
        """What its requests asked and how long their answers ran, in words (what its throughput was measured over)."""
        said, kept, asked = [], self.meta.prompt_set, self.meta.workload
        if kept is not None:
            said.append(f"prompts: {visible(str(kept))}" + (f", from {visible(kept.origin)}" if kept.origin else ""))
        elif asked is not None and asked.source:
            tokens = f", {asked.input_tokens} tokens by {asked.counted_by}" if asked.input_tokens and asked.counted_by else ""
            said.append(f"prompts: synthetic words, {visible(asked.source)}{visible(tokens)}")
        if asked is not None and asked.lengths:
            said.append(f"answers: {visible(asked.lengths)}")
        return said

    @property
    def served_by(self) -> str | None:
        """Of a server across nodes: its hosts in words, rank 0 (whose API took the requests) first."""
        nodes = self.meta.nodes
        if not nodes:
            return None
        names = [visible(str(n)) for n in nodes]
        return f"{len(names)} nodes: {names[0]} (rank 0, whose API took the requests), " + ", ".join(
            f"{n} (rank {r})" for r, n in enumerate(names[1:], start=1)
        )

    @property
    def speculative(self) -> bool:
        return self.drafting is not None

    def _finished_since_last_event(self) -> bool:
        """finish() wrote the tables (and the state in run.toml) after the last event: they are the events' summary."""
        try:
            return (self.dir / LEVELS).stat().st_mtime_ns > (self.dir / EVENTS).stat().st_mtime_ns
        except OSError:
            return False

    def _wanted(self) -> set[int]:
        """The levels its sweep set out to measure, as they are keyed (a rate in thousandths of a request a second)."""
        rates = self.meta.settings.get("rates")
        if isinstance(rates, list) and rates:
            return {rate_key(r) for r in rates if isinstance(r, int | float) and not isinstance(r, bool) and r > 0}
        levels = self.meta.settings.get("levels", [])
        return {c for c in levels if isinstance(c, int)} if isinstance(levels, list) else set()

    def _summary(self) -> _Summary | None:
        """The events' summary, read once per version of the file; None (and `corrupt` said) when they cannot be."""
        path = self.dir / EVENTS
        try:
            st = path.stat()
            key = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            key = (-1, 0, 0)
        cached = _SUMMARIES.get(path)
        if cached is None or cached[0] != key:
            try:
                found: _Summary | EventsCorrupt = _summarize(_read_levels(self.dir), self._wanted())
            except EventsCorrupt as e:
                found = e
            _SUMMARIES[path] = cached = (key, found)
        if isinstance(cached[1], EventsCorrupt):
            self.corrupt = str(cached[1])
            return None
        return cached[1]

    @property
    def state(self) -> str:
        """complete, partial (stopped, aborted, interrupted or failed), empty, or corrupt."""
        if self.meta.corrupt:
            return "corrupt"
        if self.meta.state and self._finished_since_last_event():
            return self.meta.state
        summary = self._summary()
        if summary is None:
            return "corrupt"
        if summary.state == "empty" and self._stored_levels():  # events cut short; the tables hold the levels
            return self.meta.state or "partial"
        return summary.state

    @property
    def stopped_because(self) -> str | None:
        """Why the sweep stopped before its end (a level that failed), as the load generator said."""
        if self.meta.stopped_because is not None and self._finished_since_last_event():
            return self.meta.stopped_because or None
        summary = self._summary()
        return summary.stopped_because if summary is not None else None

    def _stored_levels(self) -> list[LevelDone]:
        """The levels as the run's table holds them (written when the sweep ended, or imported)."""
        import polars as pl

        path = self.dir / LEVELS
        try:
            rows = pl.read_parquet(path).to_dicts()
        except (OSError, pl.exceptions.PolarsError):
            return []
        try:
            return [LevelDone.from_row(row) for row in rows]
        except EventError as e:
            self.corrupt = f"{path}: a level pivot cannot read ({e})"
            return []

    def _pools(self) -> bool:
        try:
            return read_run_events(self.dir, requests=False).pooled
        except EventsCorrupt:
            return False

    def levels(self, *, tables: bool = True) -> list[LevelDone]:
        """One per level (its attempts merged), by C; a failed level carries its reason in `failed`. tables=False: from
        the events where they hold any, which are what finish() wrote the tables from, read without polars (a sweep
        command prints the run it has just made); but the tables where a level pools attempts (a resume's top-up), whose
        figures the events give only from every request again."""
        if self._finished_since_last_event() and (tables or self._pools()):
            stored = self._stored_levels()
            if stored:
                return stored
        summary = self._summary()
        levels = summary.levels if summary is not None else []
        if not levels and not self.corrupt:  # events cut short: tables written earlier still hold the levels
            return self._stored_levels()
        return levels

    def reference(self) -> LevelDone | None:
        """The sweep's first level measured again at its end (its drift: console/sweep/analysis/drift.py)."""
        summary = self._summary()
        return summary.reference if summary is not None else None

    @property
    def has_measured_levels(self) -> bool:
        if self.meta.measured_levels is not None and self.meta.state and self._finished_since_last_event():
            return bool(self.meta.measured_levels)  # as its tables say, read from run.toml alone
        return self.state != "corrupt" and bool(self.measured())

    def level_cs(self) -> list[int]:
        """The C of each of its levels, by C: from run.toml where the tables written last say them, else read."""
        if self.meta.levels is not None and self.meta.state and self._finished_since_last_event():
            return list(self.meta.levels)
        return [level.c for level in self.levels()]

    def measured(self) -> list[LevelDone]:
        """The levels that are measurements: not failed (client-bound ones are kept, and flagged)."""
        return [level for level in self.levels() if level.measured]

    def summary(self) -> str | None:
        """One line for a runbook step; None when no level finished."""
        levels = self.measured()
        if not levels:
            return None
        return f"run {self.name}: {len(levels)} levels, peak {max(level.total_tok_s for level in levels):.1f} tok/s"

    def reload(self) -> bool:
        """run.toml read again; True when it holds the state of tables written after the last event (the load
        generator finished the run itself)."""
        with contextlib.suppress(RunError):
            meta = read_meta(self.dir)
            if meta.state and self._finished_since_last_event():
                self.meta = meta
                return True
        return False

    def finish(self) -> None:
        """Tables and state written once a sweep ends (the events read once); raises RunError (one line) when they
        cannot be."""
        try:
            scan = read_run_events(self.dir)
        except EventsCorrupt as e:
            raise RunError(str(e)) from None
        summary = _summarize(scan, self._wanted())
        last = scan.of_type(SweepDone)[-1:]
        ended_by = (
            None if not last else "failed" if last[0].failed else "aborted" if last[0].aborted else "stopped" if last[0].stopped else "done"
        )
        if scan.events or not (self.dir / LEVELS).exists():  # with no events, keep the tables there are
            _atomic_parquet(_frame(summary.levels), self.dir / LEVELS)
            rows = [r for _, group in sorted(scan.attempts.items()) for a in group for r in a.rows]
            if rows and scan.requests is not None:
                _atomic_parquet(scan.requests.frame(rows), self.dir / REQUESTS, row_group_size=2000)
        del scan
        self.meta.ended = datetime.now(UTC).isoformat(timespec="seconds")
        self.meta.state = summary.state
        self.meta.levels = [level.c for level in summary.levels]
        self.meta.measured_levels = [level.c for level in summary.levels if level.measured]
        self.meta.stopped_because = summary.stopped_because or ""
        self.meta.ended_by = ended_by or self.meta.ended_by
        if summary.server is not None:  # what the server said of itself (CUDA-graph sizes, speculation): the adaptive config reads it
            self.meta.server = summary.server
        if summary.client is not None:
            self.meta.client = summary.client
        if summary.workload is not None:
            self.meta.workload = summary.workload
        if summary.capacity is not None:
            self.meta.capacity = summary.capacity
        write_meta(self.dir, self.meta)


def write_meta(run_dir: Path, meta: RunMeta) -> None:
    try:
        write_atomically(run_dir / META, tomli_w.dumps(_tomlable(meta.model_dump(exclude_defaults=True))))
    except OSError as e:
        raise RunError(f"cannot write {run_dir / META}: {e.strerror}") from None


def _tomlable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _tomlable(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_tomlable(v) for v in value if v is not None]
    return value


def create_run(campaign_dir: Path, meta: RunMeta, name: str | None = None) -> Run:
    base, directory = _new_run_dir(campaign_dir, meta, name)
    try:
        meta = meta.model_copy(
            update={"name": base, "pivot_version": version(), "started": datetime.now(UTC).isoformat(timespec="microseconds")}
        )
        write_meta(directory, meta)
        (directory / EVENTS).touch()
    except OSError as e:
        raise RunError(f"cannot create run {base} in {runs_dir(campaign_dir)}: {e.strerror}") from None
    return Run(base, directory, meta)


def _new_run_dir(campaign_dir: Path, meta: RunMeta, name: str | None) -> tuple[str, Path]:
    """Make the run's directory: a name asked for must be new; a generated one (the second's
    time in UTC and the profile) gets -2, -3… when two runs start in the same second."""
    parent = runs_dir(campaign_dir)
    stem = check_run_name(name) if name is not None else f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{name_part(meta.profile)}"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for n in range(1, 1000 if name is None else 2):
            base = stem if n == 1 else f"{stem}-{n}"
            try:
                (parent / base).mkdir()  # atomic: two processes never get the same directory
            except FileExistsError:
                continue
            return base, parent / base
    except OSError as e:
        raise RunError(f"cannot create run {stem} in {parent}: {e.strerror}") from None
    if name is not None:
        raise RunError(f"run {stem!r} already exists in {parent}")
    raise RunError(f"cannot name a new run {stem!r} in {parent}: 999 already exist")


def open_run(campaign_dir: Path, name: str) -> Run:
    directory = runs_dir(campaign_dir) / check_run_name(name)
    if not directory.is_dir():
        known = ", ".join(r.name for r in list_runs(campaign_dir)) or "none"
        raise RunError(f"no run named {name!r} (runs: {known})")
    return open_run_dir(directory)


def open_run_dir(directory: Path) -> Run:
    """The run in this directory (the load generator is handed its run's directory)."""
    return Run(directory.name, directory, read_meta(directory))


def read_meta(directory: Path) -> RunMeta:
    """A run's run.toml, or RunError saying in one line why it cannot be read."""
    try:
        return RunMeta.model_validate(tomllib.loads((directory / META).read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise RunError(f"{directory / META}: corrupt or missing run metadata ({e})") from None
    except ValidationError as e:
        first = e.errors()[0]
        raise RunError(f"{directory / META}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _by_name(name: str) -> list[tuple[int, str]]:
    """A name with its numbers as numbers: the second's runs stem, stem-2, …, stem-10 in the order made."""
    return [(int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"(\d+)", name)]


_NEVER = datetime.min.replace(tzinfo=UTC)


def started_at(run: Run) -> datetime:
    """When the run started, as it recorded (UTC; an import: when it was imported); a run that recorded no readable
    start comes before every other, so that it is never `last`."""
    try:
        when = datetime.fromisoformat(run.meta.started or "")
    except ValueError:
        return _NEVER
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def list_runs(campaign_dir: Path) -> list[Run]:
    """In the order they started (the start each recorded, never their names: names are made in one zone, or
    chosen; a name breaks a tie)."""
    runs = []
    root = runs_dir(campaign_dir)
    for directory in root.iterdir() if root.is_dir() else []:
        if directory.is_dir():
            try:
                runs.append(open_run(campaign_dir, directory.name))
            except RunError as e:
                runs.append(Run(directory.name, directory, RunMeta(corrupt=True), corrupt=str(e)))
    return sorted(runs, key=lambda run: (started_at(run), _by_name(run.name)))


def delete_run(campaign_dir: Path, name: str) -> Path:
    """Remove a run's directory, which is always inside the campaign's runs/; returns it."""
    directory = runs_dir(campaign_dir) / check_run_name(name)
    if not (directory / META).is_file() and not (directory / EVENTS).is_file():
        raise RunError(f"no run named {name!r} in {runs_dir(campaign_dir)}")
    try:
        with run_lock(directory):  # held while it goes: no load generator starts writing it meanwhile
            shutil.rmtree(directory)
    except RunLocked as e:
        raise RunError(f"{e}; nothing deleted") from None
    return directory


def label(run: Run) -> str:
    """A run as every sentence names it: its name, with its profile when the name does not say it."""
    name, profile = visible(run.name), visible(run.profile)
    return name if profile in name else f"{name} ({profile})"

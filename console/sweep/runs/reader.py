"""A run's events.jsonl read in one pass: every line checked for the shape pivot relies on (a wrong one makes the
run corrupt, with its file and line), the events grouped into the attempts of each level, and the requests kept
as columns, their chunk timings as two flat arrays.

A 16,000-request run is 16 MB of JSON, a million chunk timings: parsed into dicts and turned into tables through
lists of dicts, it took 16 s and 377 MB, three times over. Here it is parsed once (orjson), a request's chunks go
straight into arrays of doubles, and its tables are built column by column.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from console.sweep.metrics import RequestRecord
from console.sweep.model import Event, EventError, LevelDone, LevelStarted, decode_event
from console.sweep.runs.files import EVENTS, EventsCorrupt, RunError, request_fields

if TYPE_CHECKING:
    import polars as pl

CHUNKS = "chunks"
_SKIP = ("type", "t", CHUNKS)
E = TypeVar("E")


class RequestColumns:
    """The request events of a run, column by column (None where a request lacks a field, as older runs may)."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {}
        self.count = 0
        self.pairs = array("d")  # every request's chunks, (t, n) after (t, n)
        self.offsets = array("q", [0])  # request k's chunks: pairs[2 * offsets[k]: 2 * offsets[k + 1]]

    def add(self, event: dict[str, Any], pairs: array) -> int:
        """Append one (checked) request event and its chunks, flattened; its row."""
        row = self.count
        for key, value in event.items():
            if key in _SKIP:
                continue
            column = self.columns.get(key)
            if column is None:
                column = self.columns[key] = [None] * row
            column.append(value)
        self.count = row + 1
        for column in self.columns.values():
            if len(column) < self.count:
                column.append(None)
        self.pairs.extend(pairs)
        self.offsets.append(len(self.pairs) // 2)
        return row

    def record(self, row: int) -> RequestRecord:
        fields = {k: v[row] for k, v in self.columns.items()}
        flat = self.pairs[2 * self.offsets[row] : 2 * self.offsets[row + 1]]
        fields[CHUNKS] = list(zip(flat[::2], flat[1::2], strict=True))
        return RequestRecord.from_dict(fields)

    def frame(self, rows: list[int]) -> pl.DataFrame:
        """These requests as a table, in this order: one column per field, `chunks` as [[t, n], …] per request.
        Once only: the flat chunks are handed to the table (a long sweep's are tens of MB)."""
        import polars as pl  # here: the console's first screen reads no table

        if not rows:
            return pl.DataFrame()
        pairs, self.pairs = self.pairs, array("d")
        every = pl.Series(pairs, dtype=pl.Float64).reshape((-1, 2)).cast(pl.List(pl.Float64)).implode()
        del pairs
        starts = pl.Series("start", [self.offsets[r] for r in rows], dtype=pl.Int64)
        lengths = pl.Series("length", [self.offsets[r + 1] - self.offsets[r] for r in rows], dtype=pl.Int64)
        chunks = pl.DataFrame([starts, lengths]).select(pl.lit(every).list.slice("start", "length").alias(CHUNKS))[CHUNKS]
        del every
        ordered = {}
        for key, values in self.columns.items():  # the load generator's order: chunks after usage_missing
            ordered[key] = pl.Series(key, [values[r] for r in rows], strict=False)
            if key == "usage_missing":
                ordered[CHUNKS] = chunks
        ordered.setdefault(CHUNKS, chunks)
        return pl.DataFrame(ordered)


@dataclass
class Attempt:
    done: LevelDone
    rows: list[int] = field(default_factory=list)  # its requests, rows of RunEvents.requests

    @property
    def failed(self) -> bool:
        return not self.done.measured


@dataclass
class RunEvents:
    events: list[Event]  # every event but the requests, in order
    requests: RequestColumns | None  # None when read without them
    attempts: dict[int, list[Attempt]]  # per C, the attempts that count now: the last fresh one and the repeats after it

    @property
    def pooled(self) -> bool:
        """A level's numbers come from the requests of several attempts (a repeat): they must be read."""
        return any(sum(not a.failed for a in group) > 1 for group in self.attempts.values())

    def of_type(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]


_NUMBERS = {int, float}


def _flat_chunks(chunks: Any) -> array | None:
    """A request's chunks, [[t, n], …], flattened to t, n, t, n, …; None when they are not pairs of numbers. At C speed:
    a long sweep has a million of them."""
    if type(chunks) is not list:
        return None
    try:
        if chunks and set(map(len, chunks)) != {2}:
            return None
    except TypeError:  # a number where a pair should be
        return None
    if not set(map(type, chain.from_iterable(chunks))) <= _NUMBERS:  # bool is not a number here; text, lists, null neither
        return None
    return array("d", chain.from_iterable(chunks))


def read_run_events(run_dir: Path, *, requests: bool = True) -> RunEvents:
    """Raises EventsCorrupt at the first line of the wrong shape. A last line without its newline is one a crash
    cut: it is skipped, everything before it stands.

    requests=False: the requests are counted into their attempts but not kept, and their chunks are not read (nor
    checked: what reads them checks them), a tenth of the time: enough for the levels, unless one was measured
    again (see `RunEvents.pooled`)."""
    path = run_dir / EVENTS
    try:
        with open(path, "rb") as lines:  # line by line: the file is never held whole
            return _read(path, lines, requests)
    except FileNotFoundError:
        return RunEvents([], RequestColumns(), {})
    except OSError as e:
        raise RunError(f"{path}: cannot read: {e.strerror}") from None


def _parse(path: Path, number: int, raw: bytes) -> dict[str, Any]:
    try:
        event = orjson.loads(raw)
    except orjson.JSONDecodeError:  # what orjson refuses and json reads (NaN, huge integers) reads as it always did
        try:
            event = json.loads(raw)
        except RecursionError:
            raise EventsCorrupt(path, number, f"nested deeper than {sys.getrecursionlimit()} levels") from None
        except ValueError:
            raise EventsCorrupt(path, number, "not JSON") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise EventsCorrupt(path, number, "not an event (a JSON object with a type)")
    return event


def _read(path: Path, lines: Iterable[bytes], keep: bool) -> RunEvents:
    events: list[Event] = []
    requests = RequestColumns()
    seen = 0
    attempts: dict[int, list[Attempt]] = {}
    current: dict[int, list[int]] = {}
    for number, raw in enumerate(lines, 1):
        if not raw.endswith(b"\n"):
            break  # the last line, torn by a crash
        if raw.isspace():
            continue
        event = _parse(path, number, raw)
        event_type = event["type"]
        if event_type == "request":
            pairs = _flat_chunks(event.get(CHUNKS, [])) if keep else array("d")
            if pairs is None or not request_fields(event):
                raise EventsCorrupt(path, number, "a request event without the fields it needs")
            row = requests.add(event, pairs) if keep else seen
            seen += 1
            if event["c"] in current:
                current[event["c"]].append(row)
            continue
        try:
            typed = decode_event(event)
        except EventError as e:
            raise EventsCorrupt(path, number, f"a {event_type} event pivot cannot read ({e})") from None
        events.append(typed)
        if isinstance(typed, LevelStarted):
            current[typed.c] = []
        elif isinstance(typed, LevelDone) and typed.reference:  # not a level: its first level's drift (its requests too)
            current.pop(typed.c, None)
        elif isinstance(typed, LevelDone):
            attempt = Attempt(typed, current.pop(typed.c, []))
            if typed.repeat and attempts.get(typed.c):
                attempts[typed.c].append(attempt)
            else:
                attempts[typed.c] = [attempt]
    return RunEvents(events, requests if keep else None, attempts)

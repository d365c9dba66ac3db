"""Runs on disk: campaign/runs/NAME/{run.toml, events.jsonl, requests.parquet, levels.parquet}.

events.jsonl is the truth, written as things happen; the Parquet tables are
derived from it (atomically: a temporary file, then rename) when a sweep
ends, and again on demand, so a run interrupted at any moment still opens.
A level counts once it has its level_done; an interrupted level's requests
are kept in the events but left out of the tables, and a resume runs it again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import tomllib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl
import tomli_w

from console import __version__

EVENTS, META, LEVELS = "events.jsonl", "run.toml", "levels.parquet"


class RunError(Exception):
    pass


def runs_dir(campaign_dir: Path) -> Path:
    return campaign_dir / "runs"


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    events = []
    try:
        lines = (run_dir / EVENTS).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a crash mid-write: everything before it stands
    return events


def completed_levels(run_dir: Path) -> set[int]:
    return {int(e["c"]) for e in read_events(run_dir) if e.get("type") == "level_done"}


def _atomic_parquet(frame: pl.DataFrame, path: Path) -> None:
    tmp = path.with_suffix(".parquet.tmp")
    frame.write_parquet(tmp)
    os.replace(tmp, path)


@dataclass
class Run:
    name: str
    dir: Path
    meta: dict[str, Any]

    @property
    def profile(self) -> str:
        return str(self.meta.get("profile", "?"))

    @property
    def speculative(self) -> bool:
        return "speculative-algorithm" in self.meta.get("command_line", "") or bool(self.meta.get("server", {}).get("speculative_algorithm"))

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.dir)

    def _finished_since_last_event(self) -> bool:
        """finish() wrote the tables (and the state in run.toml) after the last event: they are the events' summary.
        A long sweep's events are megabytes of chunk timings, too much to parse again at each look."""
        try:
            return (self.dir / LEVELS).stat().st_mtime_ns > (self.dir / EVENTS).stat().st_mtime_ns
        except OSError:
            return False

    @property
    def state(self) -> str:
        """complete, partial (stopped, aborted or interrupted), or empty."""
        if self.meta.get("state") and self._finished_since_last_event():
            return str(self.meta["state"])
        return self._state_from_events()

    def _state_from_events(self) -> str:
        events = self.events()
        done = [e for e in events if e.get("type") == "sweep_done"]
        levels = {int(e["c"]) for e in events if e.get("type") == "level_done"}
        wanted = set(self.meta.get("settings", {}).get("levels", []))
        if done and not done[-1].get("aborted") and not done[-1].get("stopped") and wanted <= levels:
            return "complete"
        return "partial" if levels else "empty"

    def levels(self) -> pl.DataFrame:
        """One row per completed level (the last attempt of each), sorted by C."""
        if self._finished_since_last_event():
            with contextlib.suppress(OSError, pl.exceptions.PolarsError):  # unreadable: the events are the truth
                return pl.read_parquet(self.dir / LEVELS)
        return self._levels_from_events()

    def summary(self) -> str | None:
        """One line for a runbook step; None when no level finished."""
        levels = self.levels()
        if not levels.height:
            return None
        return f"run {self.name}: {levels.height} levels, peak {max(levels['total_tok_s'].to_list()):.1f} tok/s"

    def _levels_from_events(self) -> pl.DataFrame:
        rows: dict[int, dict[str, Any]] = {}
        for e in self.events():
            if e.get("type") == "level_done":
                row = {k: v for k, v in e.items() if k not in ("type", "t", "server")}
                for key, value in (e.get("server") or {}).items():
                    row[f"server_{key}"] = value
                rows[int(e["c"])] = row
        if not rows:
            return pl.DataFrame({"c": pl.Series([], dtype=pl.Int64), "total_tok_s": pl.Series([], dtype=pl.Float64)})
        return pl.DataFrame([rows[c] for c in sorted(rows)], infer_schema_length=None)

    def requests(self) -> pl.DataFrame:
        """Every finished request of the completed levels (the attempt that completed)."""
        attempts: dict[int, list[dict[str, Any]]] = {}
        current: dict[int, list[dict[str, Any]]] = {}
        for e in self.events():
            kind = e.get("type")
            if kind == "level_started":
                current[int(e["c"])] = []
            elif kind == "request" and int(e["c"]) in current:
                current[int(e["c"])].append(e)
            elif kind == "level_done":
                attempts[int(e["c"])] = current.pop(int(e["c"]), [])
        rows = [{k: v for k, v in r.items() if k not in ("type", "t")} for c in sorted(attempts) for r in attempts[c]]
        if not rows:
            return pl.DataFrame()
        frame = pl.DataFrame(rows, infer_schema_length=None)
        return frame.with_columns(pl.col("chunks").cast(pl.List(pl.List(pl.Float64)))) if "chunks" in frame.columns else frame

    def write_tables(self) -> None:
        _atomic_parquet(self._levels_from_events(), self.dir / LEVELS)
        requests = self.requests()
        if requests.height:
            _atomic_parquet(requests, self.dir / "requests.parquet")

    def finish(self) -> None:
        self.write_tables()
        self.meta["ended"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.meta["state"] = self._state_from_events()
        write_meta(self.dir, self.meta)


def write_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    tmp = run_dir / (META + ".tmp")
    tmp.write_text(tomli_w.dumps(_tomlable(meta)), encoding="utf-8")
    os.replace(tmp, run_dir / META)


def _tomlable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _tomlable(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_tomlable(v) for v in value if v is not None]
    return value


def create_run(campaign_dir: Path, meta: dict[str, Any], name: str | None = None) -> Run:
    base = name or f"{time.strftime('%Y%m%d-%H%M%S')}-{meta.get('profile', 'run')}"
    directory = runs_dir(campaign_dir) / base
    if directory.exists():
        raise RunError(f"run {base!r} already exists in {runs_dir(campaign_dir)}")
    directory.mkdir(parents=True)
    meta = {**meta, "name": base, "pivot_version": __version__,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_meta(directory, meta)
    (directory / EVENTS).touch()
    return Run(base, directory, meta)


def open_run(campaign_dir: Path, name: str) -> Run:
    directory = Path(name) if os.sep in name else runs_dir(campaign_dir) / name
    if not directory.is_dir():
        known = ", ".join(r.name for r in list_runs(campaign_dir)) or "none"
        raise RunError(f"no run named {name!r} (runs: {known})")
    try:
        meta = tomllib.loads((directory / META).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise RunError(f"{directory / META}: corrupt or missing run metadata ({e})") from None
    return Run(directory.name, directory, meta)


def list_runs(campaign_dir: Path) -> list[Run]:
    runs = []
    root = runs_dir(campaign_dir)
    for directory in sorted(root.iterdir()) if root.is_dir() else []:
        if directory.is_dir():
            try:
                runs.append(open_run(campaign_dir, directory.name))
            except RunError:
                runs.append(Run(directory.name, directory, {"corrupt": True}))
    return runs


def delete_run(campaign_dir: Path, name: str) -> None:
    run = open_run(campaign_dir, name)
    shutil.rmtree(run.dir)

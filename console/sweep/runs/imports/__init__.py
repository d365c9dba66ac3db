"""Results other tools measured, in: each becomes a pivot run, one level per concurrency, compared with pivot's own
sweeps (console/sweep/analysis/compare.py). The formats are read as each tool writes them (each module names the
source file and version it was read from); a level with per-request records gets pivot's own intervals, one with
aggregates only is marked so, and the comparison says how it decides on it."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from console.remote.command import shell_line
from console.sweep.model import LevelDone, RunMeta, SweepDone
from console.sweep.runs.imports import aiperf, bench_serving, guidellm
from console.sweep.runs.store import EVENTS, Run, RunError, create_run

__all__ = ["import_results"]


def _objects(path: Path) -> list[tuple[str, Any]]:
    """(where, object) of each JSON object in a file: the whole file, or one per line (JSONL, vLLM's --append-result)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise RunError(f"{path}: cannot read: {e.strerror}") from None
    found, bad = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                found.append((f"{path}:{number}", json.loads(line)))
            except (ValueError, RecursionError) as e:
                bad = bad or f"{path}:{number}: not JSON ({e})"
    if bad is None:
        return found
    try:  # not one object a line: one object, spread over lines (pretty-printed)
        return [(str(path), json.loads(text))]
    except (ValueError, RecursionError):
        raise RunError(bad) from None


def _levels(path: Path) -> tuple[str, list[LevelDone]]:
    """The file's tool and its levels; RunError naming the file (and line) where it is none pivot reads. An AIPerf
    artifact directory is read by its summary (and the records beside it)."""
    if path.is_dir():
        path = path / aiperf.SUMMARY
    elif path.name == aiperf.RECORDS:
        path = path.with_name(aiperf.SUMMARY)
    objects = _objects(path)
    if not objects:
        raise RunError(f"{path}: no results in it")
    if len(objects) == 1 and aiperf.is_summary(objects[0][1]):
        return aiperf.SOURCE, [_read(path, aiperf.SOURCE, partial(aiperf.level, objects[0][1], path.parent))]
    if len(objects) == 1 and guidellm.is_report(objects[0][1]):
        benchmarks = objects[0][1]["benchmarks"]
        return guidellm.SOURCE, [
            _read(Path(f"{path} benchmark {i + 1}"), guidellm.SOURCE, partial(guidellm.level, b)) for i, b in enumerate(benchmarks)
        ]
    sources, levels = set(), []
    for where, obj in objects:
        if not isinstance(obj, dict) or "output_throughput" not in obj:
            raise RunError(f"{where}: not a result pivot reads (SGLang bench_serving, vllm bench serve, AIPerf, guidellm)")
        source = bench_serving.source_of(obj)
        levels.append(_read(Path(where), source, partial(bench_serving.level, obj)))
        sources.add(source)
    return " and ".join(sorted(sources)), levels


def _read(where: Path, source: str, read: Callable[[], LevelDone]) -> LevelDone:
    try:
        return read()
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, OSError, RecursionError) as e:
        raise RunError(f"{where}: not a {source} result ({e})") from None


def import_results(
    campaign_dir: Path, paths: list[Path], *, name: str | None, profile: str, argv: list[str] | None = None, kind: str | None = None
) -> Run:
    """One run from one or more result files of one server. argv, kind: the profile's, when it is known here, so that
    the comparison knows whether the run drafted."""
    by_c: dict[int, LevelDone] = {}
    sources = set()
    for path in paths:
        source, levels = _levels(path)
        sources.add(source)
        for level in levels:
            by_c[level.c] = level  # a later result for the same C wins, as a rerun would
    meta = RunMeta(
        profile=profile,
        imported_from=", ".join(map(str, paths)),
        source=" and ".join(sorted(sources)),
        settings={"levels": sorted(by_c)},
        argv=argv,
        command_line=shell_line(argv) if argv else None,
        kind=kind if argv else None,
    )
    run = create_run(campaign_dir, meta, name=name)
    with open(run.dir / EVENTS, "a", encoding="utf-8") as f:
        for c in sorted(by_c):
            f.write(by_c[c].model_dump_json() + "\n")
        f.write(SweepDone().model_dump_json() + "\n")
    run.finish()
    return run

"""Results other tools measured, in: each becomes a pivot run, one level per concurrency, compared with pivot's own
sweeps (console/sweep/analysis/compare.py). The formats are read as each tool writes them (each module names the
source file and version it was read from); a level with per-request records gets pivot's own intervals, one with
aggregates only is marked so, and the comparison says how it decides on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from console.remote.command import shell_line
from console.sweep.model import LevelDone, RunMeta, SweepDone
from console.sweep.runs.imports import bench_serving
from console.sweep.runs.store import EVENTS, Run, RunError, create_run

__all__ = ["import_results"]


def _objects(path: Path) -> list[tuple[str, Any]]:
    """(where, object) of each JSON object in a file: the whole file, or one per line (JSONL, vLLM's --append-result)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise RunError(f"{path}: cannot read: {e.strerror}") from None
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, dict):
        return [(str(path), whole)]
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                found.append((f"{path}:{number}", json.loads(line)))
            except (ValueError, RecursionError) as e:
                raise RunError(f"{path}:{number}: not JSON ({e})") from None
    return found


def _levels(path: Path) -> tuple[str, list[LevelDone]]:
    """The file's tool and its levels; RunError naming the file (and line) where it is none pivot reads."""
    objects = _objects(path)
    if not objects:
        raise RunError(f"{path}: no results in it")
    sources, levels = set(), []
    for where, obj in objects:
        if not isinstance(obj, dict) or "output_throughput" not in obj:
            raise RunError(f"{where}: not a result pivot reads (SGLang bench_serving or vLLM bench serve)")
        try:
            levels.append(bench_serving.level(obj))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise RunError(f"{where}: not a {bench_serving.source_of(obj)} result ({e})") from None
        sources.add(bench_serving.source_of(obj))
    return " and ".join(sorted(sources)), levels


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

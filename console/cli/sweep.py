"""`pivot sweep`, `pivot runs`, `pivot compare`: sweeps and their comparison on the terminal."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from console import config
from console.remote import Connection
from console.sweep.adaptive import spec_host, write_adaptive_profile
from console.sweep.compare import Comparison, compare
from console.sweep.runner import SweepProcess, describe_server
from console.sweep.settings import SweepSettings
from console.sweep.store import Run, RunError, create_run, delete_run, list_runs, open_run
from console.tasks.events import EventLog


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def level_row(e: dict[str, Any]) -> list[str]:
    ms = lambda v: None if v is None else v * 1000  # noqa: E731
    return [str(e["c"]), _fmt(e["total_tok_s"]), _fmt(e.get("steady_tok_s")), _fmt(e.get("req_tok_s_mean")),
            _fmt(ms(e.get("ttft_p50")), 0), _fmt(ms(e.get("itl_p50"))), _fmt(ms(e.get("e2e_p90")), 0),
            f"{e['errors']}/{e['requests']}"]


LEVEL_COLUMNS = ["C", "tok/s", "steady", "per-req tok/s", "TTFT p50 ms", "ITL p50 ms", "E2E p90 ms", "errors"]


def settings_from(cfg: config.Config, levels: list[int] | None, requests: str | None, max_tokens: int | None) -> SweepSettings:
    data = dict(cfg.sweep)
    if levels:
        data["levels"] = levels
    if requests:
        data["requests"] = int(requests) if requests.isdigit() else requests
    if max_tokens:
        data["max_tokens"] = max_tokens
    return SweepSettings.from_dict(data)


async def sweep_with_forward(cfg: config.Config, host: str | None, run: Run | None, settings: SweepSettings, *,
                             url: str | None, as_json: bool, resume: bool) -> int:
    conn = None
    out = Console(stderr=as_json, highlight=False)
    try:
        meta: dict[str, Any] = {"host": "direct", "profile": "direct", "url": url}
        target = ["--url", url] if url else []
        if url is None:
            if cfg.path is None:
                raise RunError("a sweep over SSH needs a pivot.toml (or give --url)")
            spec = cfg.host(host)
            conn = Connection(spec)
            await conn.up_now()
            meta, port = await describe_server(conn, cfg, spec.name)
            target = ["--config", str(cfg.path), "--host", spec.name, "--port", str(port)]
        if run is None:
            run = create_run(cfg.campaign_dir, {**meta, "settings": settings.to_dict()})
        EventLog(cfg.campaign_dir).append("sweep", run=run.name, profile=run.profile, levels=list(settings.levels))
        return await print_sweep(SweepProcess(run, target, resume=resume), settings, out, as_json)
    finally:
        if conn is not None:
            await conn.close()


async def print_sweep(process: SweepProcess, settings: SweepSettings, out: Console, as_json: bool) -> int:
    table = Table(box=None, header_style="bold", pad_edge=False, title=f"run {process.run.name}", title_justify="left")
    for col in LEVEL_COLUMNS:
        table.add_column(col, justify="right")
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                        TimeElapsedColumn(), console=out, transient=True, disable=as_json or not out.is_terminal)
    status = 0
    with progress:
        task = None
        async for event in process.events():
            kind = event.get("type")
            if as_json and kind != "request":
                print(json.dumps(event), flush=True)
            if kind == "sweep_started":
                for warning in event.get("warnings", []):
                    out.print(Text(f"warning: {warning}", style="yellow"))
            elif kind == "level_started":
                if task is not None:
                    progress.remove_task(task)
                task = progress.add_task(f"C={event['c']}", total=event["requests"] + event.get("warmup", 0))
            elif kind == "request" and task is not None:
                progress.advance(task)
            elif kind == "level_done":
                table.add_row(*level_row(event))
                if not as_json:
                    progress.console.print(Text("  ".join(f"{h}={v}" for h, v in zip(LEVEL_COLUMNS, level_row(event)))))
            elif kind == "failed":
                out.print(Text(f"pivot: the load generator failed: {event['message']}", style="red"))
                status = 1
            elif kind == "sweep_done" and (event.get("aborted") or event.get("stopped")):
                out.print("sweep " + ("aborted" if event.get("aborted") else "stopped") + ": finished requests are kept")
    if not as_json:
        out.print(table)
        out.print(f"saved: {process.run.dir}")
    return status


def cmd_runs(cfg: config.Config, action: str | None, names: list[str], *, name: str | None = None,
             profile: str = "imported") -> int:
    out = Console(highlight=False)
    if action == "import":
        from console.sweep.imports import import_bench_serving

        if len(names) != 1:
            raise RunError("runs import takes one bench_serving JSONL file")
        from console.server.profiles import ProfileError, load_profiles

        try:
            command_line: str | None = load_profiles(*cfg.profile_dirs).get(profile).command_line()
        except ProfileError:
            command_line = None  # a profile unknown here: the run is imported without its command line
        run = import_bench_serving(cfg.campaign_dir, Path(names[0]), name=name, profile=profile, command_line=command_line)
        out.print(f"imported {run.name}: levels {', '.join(map(str, run.levels()['c'].to_list()))}")
        return 0
    if action == "delete":
        for name in names:
            delete_run(cfg.campaign_dir, name)
            out.print(f"deleted {name}")
        return 0
    if action == "show":
        run = open_run(cfg.campaign_dir, names[0])
        table = Table(box=None, header_style="bold", pad_edge=False, title=f"{run.name} ({run.profile}, {run.state})",
                      title_justify="left")
        for col in LEVEL_COLUMNS:
            table.add_column(col, justify="right")
        for row in run.levels().iter_rows(named=True):
            table.add_row(*level_row(row))
        out.print(table)
        return 0
    rows = [("RUN", "PROFILE", "STATE", "LEVELS", "STARTED")]
    for run in list_runs(cfg.campaign_dir):
        if run.meta.get("corrupt"):
            rows.append((run.name, "?", "corrupt", "", ""))
        else:
            levels = ",".join(map(str, run.levels()["c"].to_list()))
            rows.append((run.name, run.profile, run.state, levels, str(run.meta.get("started", ""))))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:  # plain columns, never truncated: run names are meant to be copied
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def comparison_table(cmp: Comparison) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False, title_justify="left",
                  title=f"A = {cmp.a.name} ({cmp.a.profile})\nB = {cmp.b.name} ({cmp.b.profile})")
    for col in ("C", "A tok/s", "B tok/s", "B/A", "A per-req tok/s", "B per-req tok/s", "B/A "):
        table.add_column(col, justify="right")
    for row in cmp.table.iter_rows(named=True):
        table.add_row(str(row["c"]), _fmt(row["a_total_tok_s"]), _fmt(row["b_total_tok_s"]), _fmt(row["ratio_total"], 2),
                      _fmt(row["a_req_tok_s_mean"]), _fmt(row["b_req_tok_s_mean"]), _fmt(row["ratio_per_request"], 2))
    return table


def report_lines(cmp: Comparison) -> list[str]:
    sat = "; ".join(f"{name}: C={c}" if c else f"{name}: not within the levels" for name, c in cmp.saturation.items())
    return [f"crossover, total tok/s: {cmp.total.text}", f"crossover, per-request tok/s: {cmp.per_request.text}",
            f"saturation (< 10 % more to the next level): {sat}", f"recommendation: {cmp.recommendation}"]


def markdown(cmp: Comparison) -> str:
    head = f"# {cmp.a.name} vs {cmp.b.name}\n\nA = {cmp.a.profile}, B = {cmp.b.profile}\n\n"
    rows = ["| C | A tok/s | B tok/s | B/A | A per-request | B per-request | B/A |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in cmp.table.iter_rows(named=True):
        rows.append(f"| {r['c']} | {_fmt(r['a_total_tok_s'])} | {_fmt(r['b_total_tok_s'])} | {_fmt(r['ratio_total'], 2)} | "
                    f"{_fmt(r['a_req_tok_s_mean'])} | {_fmt(r['b_req_tok_s_mean'])} | {_fmt(r['ratio_per_request'], 2)} |")
    return head + "\n".join(rows) + "\n\n" + "\n".join(f"- {line}" for line in report_lines(cmp)) + "\n"


async def write_profile_for(cfg: config.Config, cmp: Comparison) -> None:
    """The adaptive profile, its config uploaded to the host the speculative run was measured on."""
    host = spec_host(cfg, cmp)
    conn = Connection(host) if host is not None else None
    try:
        if conn is not None:
            await conn.up_now()
        print((await write_adaptive_profile(cfg, cmp, conn)).describe())
    finally:
        if conn is not None:
            await conn.close()


def cmd_compare(cfg: config.Config, names: list[str], *, fmt: str, markdown_path: Path | None, write_profile: bool) -> int:
    if len(names) < 2:
        raise RunError("compare needs two runs (pivot runs lists them)")
    runs = [open_run(cfg.campaign_dir, n) for n in names]
    for other in runs[1:]:
        cmp = compare(runs[0], other)
        if fmt == "json":
            print(json.dumps({"a": cmp.a.name, "b": cmp.b.name, "levels": cmp.table.to_dicts(),
                              "crossover_total": cmp.total.at, "crossover_per_request": cmp.per_request.at,
                              "saturation": cmp.saturation, "recommendation": cmp.recommendation}))
        elif fmt == "csv":
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=cmp.table.columns)
            writer.writeheader()
            writer.writerows(cmp.table.to_dicts())
            sys.stdout.write(buffer.getvalue())
        else:
            out = Console(highlight=False)
            out.print(comparison_table(cmp))
            for line in report_lines(cmp):
                out.print(Text(line))
        if markdown_path:
            markdown_path.write_text(markdown(cmp), encoding="utf-8")
        if write_profile and cmp.helps_up_to is None:
            print(f"no adaptive profile written: {cmp.recommendation}", file=sys.stderr)
        elif write_profile:
            asyncio.run(write_profile_for(cfg, cmp))
        with contextlib.suppress(Exception):
            EventLog(cfg.campaign_dir).append("compare", a=cmp.a.name, b=cmp.b.name, recommendation=cmp.recommendation)
    return 0

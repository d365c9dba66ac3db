"""`pivot compare`: two runs level by level, the verdict, and the adaptive profile it recommends."""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from console import config
from console.actions.adaptive import write_adaptive_profile
from console.cli.prompt import ask
from console.cli.sweep import resolve_runs, terminal
from console.sweep.adaptive import NoAdaptiveProfile, plan, spec_host
from console.sweep.analysis.comparable import KEYS
from console.sweep.analysis.compare import Comparison, bracket, compare
from console.sweep.analysis.crossover import why_undecided
from console.sweep.analysis.drift import Drift
from console.sweep.analysis.intervals import Verdict
from console.sweep.analysis.notes import Note
from console.sweep.analysis.slo import Slo
from console.sweep.runs.store import Run, RunError
from console.sweep.words.comparison import crossover_text, recommendation, refine_text, report, short_names
from console.sweep.words.levels import fmt_value, ratio_text
from console.sweep.words.repeats import repeat_text


def comparison_table(cmp: Comparison) -> Table:
    table = Table(
        box=None,
        header_style="bold",
        pad_edge=False,
        title_justify="left",
        title=f"A = {cmp.names['a']}\nB = {cmp.names['b']}\nB/A ± its 95 % spread; A, B: who leads by more than "
        f"±{cmp.margin * 100:g} %; ≈: alike (within it); ?: cannot tell",
    )
    goodput = ("goodput A", "goodput B") if cmp.goodput else ()  # requests/s that met the SLO
    for col in (
        cmp.axis,
        "A tok/s",
        "B tok/s",
        "B/A",
        "A per-req",
        "B per-req",
        "B/A ",
        "ITL B/A",
        "TTFT B/A",
        "J/tok B/A",
        *goodput,
        "errors A",
        "errors B",
    ):
        table.add_column(col, justify="right")
    for lv in cmp.levels:
        good = [fmt_value(cmp.goodput[side].get(lv.c), 2) for side in ("a", "b")] if cmp.goodput else []
        table.add_row(
            cmp.level(lv.c),
            fmt_value(lv.total.a.value),
            fmt_value(lv.total.b.value),
            ratio_text(lv.total),
            fmt_value(lv.per_request.a.value),
            fmt_value(lv.per_request.b.value),
            ratio_text(lv.per_request),
            ratio_text(lv.itl),
            ratio_text(lv.ttft),
            ratio_text(lv.energy),
            *good,
            f"{lv.a.errors}/{lv.a.requests}",
            f"{lv.b.errors}/{lv.b.requests}",
        )
    return table


def markdown(cmp: Comparison) -> str:
    head = f"# {cmp.a.name} vs {cmp.b.name}\n\nA = {cmp.names['a']}, B = {cmp.names['b']}\n\n"
    rows = [
        f"| {cmp.axis} | A tok/s | B tok/s | B/A | A per-request | B per-request | B/A | ITL B/A | TTFT B/A | J/tok B/A |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lv in cmp.levels:
        rows.append(
            f"| {cmp.level(lv.c)} | {fmt_value(lv.total.a.value)} | {fmt_value(lv.total.b.value)} | {ratio_text(lv.total)} | "
            f"{fmt_value(lv.per_request.a.value)} | {fmt_value(lv.per_request.b.value)} | {ratio_text(lv.per_request)} | "
            f"{ratio_text(lv.itl)} | {ratio_text(lv.ttft)} | {ratio_text(lv.energy)} |"
        )
    return head + "\n".join(rows) + "\n\n" + "\n".join(f"- {line}" for line in report(cmp)) + "\n"


# 4: an acceptance's levels carry the share of the output drafted, and a "SyntheticText" note; 3: the comparison's
# model dumped whole (typed crossovers, repeats, notes named by "note", verification, SLO, frontier, energy), its
# sentences under "words"; 2: per-level verdicts with their reasons, frontier, energy, refine; 1: the flat table only
JSON_SCHEMA_VERSION = 4
VERDICT_METRICS = ("total", "per_request", "itl", "ttft", "energy")


def verdict_json(v: Verdict | None) -> dict[str, Any] | None:
    """One figure's verdict at one level: both figures with their intervals, B/A, who leads, and why nobody does."""
    if v is None:
        return None
    return {
        "a": {"value": v.a.value, "lo": v.a.lo, "hi": v.a.hi, "aggregate": v.a.point},
        "b": {"value": v.b.value, "lo": v.b.lo, "hi": v.b.hi, "aggregate": v.b.point},
        "ratio": v.ratio,
        "spread": v.spread,
        "leader": v.leader,
        "alike": v.alike,
        "undecided_because": why_undecided(v) if not v.leader and not v.alike and v.ratio is not None else None,
        "margin": v.margin,
        "drift": v.drift,
    }


def dump(value: Any) -> Any:
    """The model as JSON's types: a run by its name, a verdict with its derived figures, a note with its kind."""
    if isinstance(value, Run):
        return value.name
    if isinstance(value, Verdict):
        return verdict_json(value)
    if isinstance(value, Drift):
        return {"c": value.c, "amount": value.amount, "tok_s": value.tok_s, "verdict": verdict_json(value.verdict)}
    if isinstance(value, Slo):
        return {"said": str(value), **dataclasses.asdict(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: dump(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"note": type(value).__name__, **fields} if isinstance(value, Note) else fields  # (Evidence has a kind of its own)
    if isinstance(value, dict):
        return {str(k): dump(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [dump(v) for v in value]
    return value


def as_json(cmp: Comparison) -> dict[str, Any]:
    """Every verdict the table and the report print, as data, and the sentences they print it in."""
    names = cmp.names
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "a": cmp.a.name,
        "b": cmp.b.name,
        "names": names,
        "levels": cmp.table.to_dicts(),
        "verdicts": [{"c": lv.c, **{m: verdict_json(getattr(lv, m)) for m in VERDICT_METRICS}} for lv in cmp.levels],
        "excluded": dump(cmp.excluded),
        "crossover_total": dump(cmp.total),
        "crossover_per_request": dump(cmp.per_request),
        "saturation": cmp.saturation,
        "advice": dump(cmp.advice),
        "drafting_up_to": cmp.helps_up_to,
        "repeat": dump(cmp.repeats),
        "refine": dump(bracket(cmp)),
        "notes": dump(cmp.notes),
        "margin": cmp.margin,
        "not_comparable": dump(cmp.differences),
        "verification": dump(cmp.verification),
        "slo": dump(cmp.slo),
        "goodput": dump(cmp.goodput),
        "frontier": dump(cmp.frontier),
        "energy": dump(cmp.energy),
        "words": {
            "recommendation": recommendation(cmp),
            "crossover_total": crossover_text(cmp.total, cmp),
            "crossover_per_request": crossover_text(cmp.per_request, cmp),
            "repeat": [repeat_text(r, names) for r in cmp.repeats],
            "refine": refine_text(cmp),
            "report": report(cmp),
        },
    }


async def write_profile_for(cfg: config.Config, cmp: Comparison, *, replace: bool = False, written_here: set[Path] | None = None) -> int:
    """The adaptive profile, its config uploaded to the host the speculative run was measured on; says what it did
    or why it did not. One already there is replaced only when the operator says so on a terminal (`w` asks too),
    and never one this command wrote from an earlier comparison. The question goes to stderr: stdout may be JSON."""
    from console.session import Session

    try:
        adaptive = plan(cfg, cmp)
    except NoAdaptiveProfile as e:
        print(str(e))
        return 1
    path, written_here = adaptive.profile_path, written_here if written_here is not None else set()
    if path in written_here:
        print(f"no profile written: {path} was written from an earlier comparison of this command", file=sys.stderr)
        return 1
    if path.exists() and not replace:
        print(f"{path} exists; the new one would be: {adaptive.summary()}", file=sys.stderr)
        if not sys.stdin.isatty() or ask("replace it? [yes/no] ", to=sys.stderr) not in ("y", "yes"):
            print("no profile written (--yes replaces it without asking)", file=sys.stderr)
            return 1
    written_here.add(path)
    host = spec_host(cfg, cmp) if adaptive.engine.adaptive_file else None
    async with Session(cfg, host.name if host else None, local=host is None) as session:
        if host is not None:
            await session.connect()
        written = await write_adaptive_profile(session, adaptive)
    print(written.describe())
    return 0


@dataclass(frozen=True)
class CompareOrder:
    """`pivot compare`'s options."""

    fmt: str  # table, json or csv
    markdown: Path | None  # also write a Markdown report here
    write_profile: bool
    yes: bool  # replace a profile of the same name without asking
    slo: str | None
    anyway: bool  # compare runs that measured different things
    may_differ: frozenset[str]


def compare_command(config_path: str | None, names: list[str], order: CompareOrder) -> int:
    cfg, fmt = config.load(config_path), order.fmt
    if len(names) < 2:
        raise RunError("compare needs two runs (pivot runs lists them)")
    if unknown := [k for k in order.may_differ if k not in KEYS]:
        raise RunError(f"--may-differ {unknown[0]}: no such key (keys: {', '.join(KEYS)})")
    slo = Slo.read(order.slo or cfg.compare.slo)
    runs = resolve_runs(cfg, names)
    status, written_here = 0, set[Path]()
    for other in runs[1:]:
        cmp = compare(runs[0], other, cfg.margin, anyway=order.anyway, may_differ=order.may_differ, slo=slo)
        if fmt == "json":
            print(json.dumps(as_json(cmp)))
        elif fmt == "csv":
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=cmp.table.columns)
            writer.writeheader()
            writer.writerows(cmp.table.to_dicts())
            sys.stdout.write(buffer.getvalue())
        else:
            out = terminal()
            out.print(comparison_table(cmp))
            for line in report(cmp, short_names(cmp)):  # the table's title defines A and B
                out.print(Text(line), soft_wrap=True)
        if order.markdown:
            order.markdown.write_text(markdown(cmp), encoding="utf-8")
        if order.write_profile:
            status = max(status, asyncio.run(write_profile_for(cfg, cmp, replace=order.yes, written_here=written_here)))
    return status

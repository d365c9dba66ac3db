"""The report as one HTML file that opens offline: no script, no link out, its charts as SVG images inside it. Every
name, command line and file in it comes from runs and profiles (untrusted): control characters made visible, then
escaped for HTML."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from datetime import UTC, datetime

from console import version
from console.report import charts
from console.sweep.analysis.compare import Comparison
from console.sweep.analysis.intervals import Verdict
from console.sweep.runs.files import META
from console.sweep.runs.store import Run, label
from console.sweep.tune import Outcome, TuneRecord, checks_summary, length_text
from console.sweep.words.comparison import report
from console.sweep.words.levels import level_columns, level_row, ratio_text
from console.sweep.words.verdicts import naming
from console.untrusted import visible

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #1d2430; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #d6dbe3; }
table { border-collapse: collapse; margin: .6em 0; font-variant-numeric: tabular-nums; }
th, td { padding: .2em .7em; text-align: right; border-bottom: 1px solid #eceff3; white-space: nowrap; }
th { background: #f3f5f8; } td.words, th.words { text-align: left; white-space: normal; }
.lead-a { color: #b3261e; } .lead-b { color: #1b7f3b; } .unsure { color: #9a6700; }
.verdict { font-weight: 600; } .refused { color: #b3261e; font-weight: 600; }
pre { background: #f6f8fa; padding: .7em; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; }
img { max-width: 100%; } ul.lines li { margin: .2em 0; } .dim { color: #667085; }
"""


@dataclass
class Pair:
    """One comparison of the report: the first run against another, or why they are not compared."""

    a: Run
    b: Run
    comparison: Comparison | None = None
    refused: str | None = None  # NotComparable, or no level in common
    adaptive: list[str] = field(default_factory=list)  # the adaptive profile it recommends, or why none


def _e(text: object) -> str:
    return html.escape(visible(str(text)))


def _block(text: str) -> str:
    return f"<pre>{html.escape(visible(text, newlines=True))}</pre>"


def _image(svg: bytes, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/svg+xml;base64,{base64.b64encode(svg).decode()}">'


def _table(head: list[str], rows: list[list[str]], words: set[int] = frozenset()) -> str:  # type: ignore[assignment]
    cls = lambda i: ' class="words"' if i in words else ""
    out = ["<table><tr>" + "".join(f"<th{cls(i)}>{_e(h)}</th>" for i, h in enumerate(head)) + "</tr>"]
    out += ["<tr>" + "".join(f"<td{cls(i)}>{cell}</td>" for i, cell in enumerate(row)) + "</tr>" for row in rows]
    return "".join(out) + "</table>"


def _ratio(v: Verdict | None) -> str:
    if v is None or v.ratio is None:
        return "—"
    cls = "dim" if v.alike else {"a": "lead-a", "b": "lead-b", None: "unsure"}[v.leader]
    return f'<span class="{cls}">{_e(ratio_text(v))}</span>'


def _comparison(pair: Pair) -> str:
    title = f"<h2>{_e(label(pair.a))} (A) against {_e(label(pair.b))} (B)</h2>"
    if pair.comparison is None:
        return title + f'<p class="refused">{_e(pair.refused)}</p>'
    cmp = pair.comparison
    lines = report(cmp)
    head = [cmp.axis, "A tok/s", "B tok/s", "B/A", "A per-req", "B per-req", "B/A per-req", "ITL B/A", "TTFT B/A", "J/tok B/A"]
    rows = [
        [
            cmp.level(lv.c),
            f"{lv.total.a.value:.1f}",
            f"{lv.total.b.value:.1f}",
            _ratio(lv.total),
            _e(f"{lv.per_request.a.value or 0:.1f}"),
            _e(f"{lv.per_request.b.value or 0:.1f}"),
            _ratio(lv.per_request),
            _ratio(lv.itl),
            _ratio(lv.ttft),
            _ratio(lv.energy),
        ]
        for lv in cmp.levels
    ]
    legend = (
        f'<p class="dim">B/A ± its 95 % spread; <span class="lead-a">A</span>, <span class="lead-b">B</span>: who '
        f"leads by more than ±{cmp.margin * 100:g} %; ≈: alike (within it); ?: cannot tell</p>"
    )
    said = "".join(f"<li>{_e(line)}</li>" for line in lines[1:])
    adaptive = (
        "<h3>The adaptive profile this comparison recommends</h3>" + "".join(_block(t) for t in pair.adaptive) if pair.adaptive else ""
    )
    return title + f'<p class="verdict">{_e(lines[0])}</p>' + legend + _table(head, rows) + f'<ul class="lines">{said}</ul>' + adaptive


def _run(run: Run, profile_text: str | None) -> str:
    with naming(run.rates):
        rows = [level_row(lv) for lv in run.levels()]
        if (again := run.reference()) is not None:
            rows.append([*level_row(again)[:-1], "measured again at the sweep's end (its drift)"])
        columns = level_columns()
    try:
        meta = (run.dir / META).read_bytes()[: 1 << 20].decode(errors="replace")
    except OSError as e:
        meta = f"cannot be read: {e.strerror or e}"
    table = _table(columns, [[_e(cell) for cell in row] for row in rows], words={len(columns) - 1})
    profile = f"<h3>Its profile, as written</h3>{_block(profile_text)}" if profile_text else ""
    return (
        f"<h2>Run {_e(label(run))}</h2><p>{_e(run.summary() or run.state)}</p>{table}"
        f"<h3>Its server's command line</h3>{_block(' '.join(run.meta.argv_or_words()) or '(not recorded)')}{profile}"
        f"<details><summary>run.toml</summary>{_block(meta)}</details>"
    )


def tuning(record: TuneRecord, found: Outcome) -> str:
    """A tuning session: each level's throughput by draft length with the best marked and its margin, the schedule
    written, and how the tuned profile's run held against the best length at each level."""
    head = ["C", "batch", *(length_text(n) for n in record.lengths), "best", "margin over the runner-up"]
    rows = []
    for choice in found.found:
        cells = [
            (f"<b>{choice.tok_s[n]:.1f}</b>" if n == choice.best else f"{choice.tok_s[n]:.1f}") if n in choice.tok_s else "—"
            for n in record.lengths
        ]
        rows.append([str(choice.c), str(choice.batch), *cells, _e(length_text(choice.best)), _e(choice.margin_text)])
    runs = "".join(f"<li>{_e(length_text(n))}: {_e(record.variants[n])}, run {_e(record.runs.get(n, '—'))}</li>" for n in record.lengths)
    if found.schedule is None:
        schedule = f"<p>{_e(found.refusal)}</p>"
    else:
        warnings = "".join(f"<li>{_e(w)}</li>" for w in found.schedule.warnings)
        schedule = f"<h3>The schedule, in {_e(record.kind)}'s own form</h3>{_block(found.schedule.text)}" + (
            f'<ul class="lines">{warnings}</ul>' if warnings else ""
        )
    checks = (
        f"<h3>{_e(record.tuned)} swept: {_e(checks_summary(found.checks))}</h3>"
        + '<ul class="lines">'
        + "".join(f"<li>{_e(c.text)}</li>" for c in found.checks)
        + "</ul>"
        if found.checks
        else ""
    )
    return (
        f"<h2>Tuning session {_e(record.name)}: {_e(record.profile)}, total tok/s by draft length</h2>"
        + _table(head, rows, words={len(head) - 1})
        + f'<ul class="lines">{runs}</ul>'
        + schedule
        + checks
    )


def page(runs: list[Run], pairs: list[Pair], profiles: dict[str, str], tuned: str = "") -> str:
    """The report: a tuning session's choices (`tuned`, from tuning()) and the comparisons first (what to do), then
    the charts, then each run with its levels and metadata. profiles: each run's profile file as text, where pivot
    wrote it (an adaptive or tuned profile)."""
    curves = _image(charts.render(charts.curves(runs), "svg"), "throughput by concurrency")
    frontier = _image(charts.render(charts.frontier(runs), "svg"), "the frontier")
    energy_fig = charts.energy(runs)
    energy = (
        _image(charts.render(energy_fig, "svg"), "energy per token")
        if energy_fig is not None
        else "<p>No run read its GPUs' power: energy per token is not known.</p>"
    )
    names = ", ".join(label(run) for run in runs)
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>pivot report: {_e(names)}</title>'
        f"<style>{CSS}</style></head><body><h1>pivot report</h1>"
        f'<p class="dim">{_e(names)} · made {made} by pivot {_e(version())}</p>'
        + tuned
        + "".join(_comparison(p) for p in pairs)
        + f"<h2>Throughput by concurrency</h2>{curves}"
        + f"<h2>The frontier: throughput against each user's speed</h2>{frontier}"
        + f"<h2>Energy per output token</h2>{energy}"
        + "".join(_run(run, profiles.get(run.name)) for run in runs)
        + "</body></html>\n"
    )

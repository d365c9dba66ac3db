"""A level, and a comparison's ratio at a level, in words, as `pivot runs show`, `pivot sweep`, `pivot compare` and
`pivot report` print them."""

from __future__ import annotations

import math
from typing import Any

from console.sweep.analysis.intervals import Verdict
from console.sweep.analysis.slo import Slo
from console.sweep.model import Capacity, LevelDone
from console.sweep.words.verdicts import at, axis, naming, value
from console.untrusted import visible


def fmt_value(value: Any, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def with_interval(value: float | None, lo: float | None, hi: float | None) -> str:
    """A figure with its 95 % interval as ± percent of it."""
    if value is None:
        return "—"
    if lo is None or hi is None or not value:
        return f"{value:.1f}"
    return f"{value:.1f} ±{(hi - lo) / 2 / value * 100:.0f}%"


def level_notes(e: LevelDone) -> str:
    """What the operator must know about a level's numbers, in a few words."""
    notes = []
    if e.failed:
        notes.append(f"FAILED: {e.failed}")
    if e.lacking:
        notes.append(f"cut short: {e.requests} of {e.requests + e.lacking} requests (a resume measures the rest)")
    if e.client_bound:
        notes.append("client-bound" if e.rate is None else f"rate not offered: {e.client_bound}")
    if e.late_p90 is not None and not e.client_bound:  # an open-loop level: how well the client kept its schedule
        notes.append(f"sent on schedule (p90 {e.late_p90 * 1000:.1f} ms late)")
    if e.lagging:
        notes.append("latencies not measured (client loop late)")
    if e.short:
        notes.append(f"{e.short} ended early")
    if e.usage_missing:
        notes.append(f"{e.usage_missing} without usage")
    if why := e.energy_unknown:
        notes.append(f"J/tok —: {why}")
    if e.attempts > 1:
        notes.append(f"{e.attempts} attempts merged")
    if e.retried:
        notes.append(f"{e.retried} sent again (the server closed a kept-alive connection)")
    if e.accept_rate is not None:
        length = e.accept_length
        share = e.draft_share
        notes.append(
            f"drafts {e.accept_rate:.0%} accepted"
            + (f", {share:.0%} of output" if share is not None else "")
            + (f", {length:.1f}/step" if length is not None else "")
        )
    return visible("; ".join(notes))


def level_row(e: LevelDone) -> list[str]:
    ms = lambda v: None if v is None else v * 1000
    return [
        value(e.c),
        with_interval(e.total_tok_s, e.total_tok_s_lo, e.total_tok_s_hi),
        with_interval(e.req_tok_s_mean, e.req_tok_s_lo, e.req_tok_s_hi),
        fmt_value(ms(e.ttft_p50), 0),
        fmt_value(ms(e.itl_p50)),
        fmt_value(ms(e.e2e_p90), 0),
        fmt_value(e.gpu_watts, 0),
        energy_text(e),
        f"{e.errors}/{e.requests}",
        level_notes(e),
    ]


def energy_text(e: LevelDone) -> str:
    """A level's J/tok with its 95 % interval ("—" where unknown: the notes say why, where a reason is known)."""
    value, lo, hi = e.joules_per_token, e.joules_per_token_lo, e.joules_per_token_hi
    if value is None or lo is None or hi is None:
        return joules(value)
    return f"{joules(value)} ±{(hi - lo) / 2 / value * 100:.0f}%"


def joules(value: float | None) -> str:
    """Energy per token to three figures: a simulated host's tens of joules and an H200's tenths alike."""
    if value is None:
        return "—"
    decimals = max(0, 2 - math.floor(math.log10(abs(value)))) if value else 1
    return f"{value:.{decimals}f}"  # 16.0 beside 15.4, where :.3g wrote 16


LEVEL_COLUMNS = ["C", "tok/s", "per-req tok/s", "TTFT p50 ms", "ITL p50 ms", "E2E p90 ms", "GPU W", "J/tok", "errors", "notes"]


def level_columns() -> list[str]:
    """The levels' table's columns, its first named as the levels being named are (C, or req/s)."""
    return [axis(), *LEVEL_COLUMNS[1:]]


def ratio_text(v: Verdict | None) -> str:
    if v is None or v.ratio is None:
        return "—"
    mark = " ≈" if v.alike else {"a": " A", "b": " B", None: " ?"}[v.leader]
    if None in (v.a.lo, v.a.hi, v.b.lo, v.b.hi):  # a figure without its interval: no spread to show, no verdict
        return f"{v.ratio:.3f}±?{mark}"
    return f"{v.ratio:.3f}±{(v.spread or 0):.3f}{mark}"


def capacity_text(cap: Capacity) -> str:
    """A capacity search's answer: "capacity under TTFT p90 ≤ 500 ms: C=12 meets it, C=13 does not (within 10 %)"."""
    with naming(cap.rates):
        under = f"capacity under {Slo.parse(cap.slo)}"
        undecided = f"; {', '.join(at(c) for c in cap.undecided)} still undecided with more requests: counted as not meeting it"
        undecided = undecided if cap.undecided else ""
        if cap.served is None:
            low = at(cap.failed) if cap.failed is not None else "the first level"
            return f"{under}: no level met it, down to {low}{undecided}"
        if cap.failed is None:
            return f"{under}: {at(cap.served)} meets it, the most a search goes to{undecided}"
        return f"{under}: {at(cap.served)} meets it, {at(cap.failed)} does not (bracketed within {cap.precision:.0%}){undecided}"


def kept_text(levels: list[LevelDone]) -> str:
    """What an interrupted sweep kept: "24 finished request(s) kept (C=2 cut short)"."""
    finished = sum(level.requests for level in levels if level.measured)
    short = [f"{at(level.c)}" for level in levels if level.lacking]
    return f"{finished} finished request(s) kept" + (f" ({', '.join(short)} cut short)" if short else "")

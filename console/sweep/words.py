"""A level and a comparison's level in words, as `pivot runs show`, `pivot sweep`, `pivot compare` and
`pivot report` print them."""

from __future__ import annotations

import math
from typing import Any

from console.sweep.analysis.advice import Advice, Side, other
from console.sweep.analysis.crossover import undecided_text, where
from console.sweep.analysis.intervals import Verdict
from console.sweep.model import LevelDone
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
        notes.append("client-bound")
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
        notes.append(f"drafts {e.accept_rate:.0%} accepted" + (f", {length:.1f}/step" if length is not None else ""))
    return visible("; ".join(notes))


def level_row(e: LevelDone) -> list[str]:
    ms = lambda v: None if v is None else v * 1000
    return [
        str(e.c),
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


def ratio_text(v: Verdict | None) -> str:
    if v is None or v.ratio is None:
        return "—"
    mark = " ≈" if v.alike else {"a": " A", "b": " B", None: " ?"}[v.leader]
    if None in (v.a.lo, v.a.hi, v.b.lo, v.b.hi):  # a figure without its interval: no spread to show, no verdict
        return f"{v.ratio:.3f}±?{mark}"
    return f"{v.ratio:.3f}±{(v.spread or 0):.3f}{mark}"


def advice_text(adv: Advice, names: dict[Side, str]) -> str:
    """The comparison's recommendation in one line, from its advice (console/sweep/analysis/advice.py)."""
    levels = list(adv.levels)
    total_rest = undecided_text(adv.alike, adv.undecided, levels, "total throughput")
    if adv.action == "drafted_nothing":
        spec = adv.drafting or "b"
        return (
            f"{names[spec]} drafted no token in this run (its server's own count), so there is no speculation to "
            f"judge: {_who_leads(adv, names)}"
        )
    if adv.drafting is None:
        return _who_leads(adv, names)
    spec, base = adv.drafting, other(adv.drafting)
    who = f"speculation ({names[spec]}, against {names[base]})"
    if adv.action == "alike":
        return f"{who} matches it at every level (within ±{adv.margin * 100:g} %): it neither gains nor costs total throughput here"
    if adv.action in ("cannot_tell", "unstable"):
        return _nobody(adv, names, f"{who}: cannot tell whether it gains or costs total throughput")
    wins, losses, speed_wins = adv.leads[spec], adv.losses, adv.speed_leads[spec]
    gains = [f"per-request speed at {where(list(speed_wins), levels)}"] if speed_wins else []
    gains += [f"total throughput at {where(list(wins), levels)}"] if wins else []
    if speed_wins and speed_wins == wins:  # the same levels said once
        gains = [f"per-request speed and total throughput at {where(list(wins), levels)}"]
    helps = " and ".join(gains)
    lost = f"loses total throughput at {where(list(losses), levels)}" if losses else ""
    if adv.action == "keep":
        return f"{who} helps {helps} and costs no total throughput beyond the margin{total_rest}: keep it"
    if adv.action == "open_below":
        under = [c for c in levels if c < losses[0]]
        groups = [(why, [c for c in cs if c in under]) for why, cs in adv.undecided]
        return (
            f"{who} {lost}{undecided_text((), [(w, cs) for w, cs in groups if cs], levels)}: turn drafting off above "
            f"C={adv.cut}, where it loses; whether it pays off at {where(under, levels)} is open"
        )
    if adv.action == "adaptive":
        return f"{who} helps {helps} and {lost}{total_rest}: turn drafting off above C={adv.cut}"
    if gains:
        return f"{who} helps {helps} and {lost}{total_rest}: disable it (its gains lie above where it loses)"
    return f"{who} {lost} and helps nowhere beyond the margin{total_rest}: disable it"


def _nobody(adv: Advice, names: dict[Side, str], head: str) -> str:
    """Nobody leads anywhere and not every level is alike: why, never worded as "no difference"."""
    levels = list(adv.levels)
    if adv.action == "unstable":
        drifted = [names[s] for s in adv.drifted]
        return (
            f"cannot decide: {' and '.join(drifted)} drifted while measured (the server or the machine changed while it "
            f"ran) by more than the difference between the runs at {where(list(adv.undecided[0][1]), levels)}: unstable; "
            f"measure {'them' if len(drifted) > 1 else 'it'} again"
        )
    return head + undecided_text(adv.alike, adv.undecided, levels).removeprefix(";").replace(" cannot tell at", " at", 1)


def _who_leads(adv: Advice, names: dict[Side, str]) -> str:
    """Two runs of the same kind (or a drafting run that drafted nothing): no speculation verdict, who leads where."""
    levels = list(adv.levels)
    if not adv.leads["a"] and not adv.leads["b"]:
        if not adv.undecided:
            return f"{names['a']} and {names['b']} are alike in total throughput at every level (within ±{adv.margin * 100:g} %)"
        return _nobody(adv, names, f"cannot tell whether {names['a']} or {names['b']} leads total throughput")
    parts = []
    sides: tuple[Side, Side] = ("b", "a")
    for side in sides:
        if cs := adv.leads[side]:
            c, ratio = adv.best[side]
            parts.append(f"{names[side]} leads total throughput at {where(list(cs), levels)} (×{ratio:.2f} at C={c})")
    return ", ".join(parts) + undecided_text(adv.alike, adv.undecided, levels)

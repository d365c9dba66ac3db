"""A comparison's recommendation in one line, from its advice (console/sweep/analysis/advice.py): what to do about
speculation, never worded as "no difference" where nobody can tell."""

from __future__ import annotations

from console.sweep.analysis.advice import Advice
from console.sweep.analysis.sides import Side, other
from console.sweep.words.verdicts import at, undecided_text, where


def advice_text(adv: Advice, names: dict[Side, str]) -> str:
    """The recommendation, in the words of the runs named `names`."""
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
        return _nobody(adv, names, "cannot tell whether it gains or costs total throughput", who)
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
            f"{at(adv.cut or 0)}, where it loses; whether it pays off at {where(under, levels)} is open"
        )
    if adv.action == "adaptive":
        return f"{who} helps {helps} and {lost}{total_rest}: turn drafting off above {at(adv.cut or 0)}"
    if gains:
        return f"{who} helps {helps} and {lost}{total_rest}: disable it (its gains lie above where it loses)"
    return f"{who} {lost} and helps nowhere beyond the margin{total_rest}: disable it"


def _nobody(adv: Advice, names: dict[Side, str], question: str, subject: str | None = None) -> str:
    """Nobody leads anywhere and not every level is alike: where they are alike, and why the rest cannot be told,
    never worded as "no difference"."""
    levels = list(adv.levels)
    if adv.action == "unstable":
        drifted = [names[s] for s in adv.drifted]
        return (
            f"cannot decide: {' and '.join(drifted)} drifted while measured (the server or the machine changed while it "
            f"ran) by more than the difference between the runs at {where(list(adv.undecided[0][1]), levels)}: unstable; "
            f"measure {'them' if len(drifted) > 1 else 'it'} again"
        )
    told = undecided_text((), adv.undecided, levels).removeprefix("; cannot tell at ")
    alike = f"alike in total throughput at {where(list(adv.alike), levels)}; " if adv.alike else ""
    return f"{f'{subject}: ' if subject else ''}{alike}{question} at {told}"


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
            parts.append(f"{names[side]} leads total throughput at {where(list(cs), levels)} (×{ratio:.2f} at {at(c)})")
    return ", ".join(parts) + undecided_text(adv.alike, adv.undecided, levels)

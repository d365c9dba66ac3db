"""Speculation's own numbers in a comparison: each level's draft acceptance as its server reported it, and whether a
run set to draft drafted at all."""

from __future__ import annotations

from console.sweep.model import LevelDone
from console.sweep.runs.store import Run, label


def acceptance(level: LevelDone) -> str | None:
    """A level's draft acceptance in words ("97 % accepted, 3.1 tokens a step"), where the server reported it."""
    rate, length = level.accept_rate, level.accept_length
    if rate is None:
        return None
    return f"{rate:.0%} accepted" + (f", {length:.1f} tokens a step" if length is not None else "")


def drafted_nothing(run: Run) -> bool:
    """Set to draft, but by its server's own count of every request (llama-server's timings) it drafted no token at
    any measured level: whatever differs from the other run is not speculation's doing."""
    counts = [level.draft_tokens for level in run.measured()]
    return run.drafting is not None and bool(counts) and all(n == 0 for n in counts)


def acceptance_notes(run: Run) -> list[str]:
    """Speculation's own numbers per level: a level where it loses with 99 % of drafts accepted is a draft too costly,
    one with 30 % a draft that guesses badly."""
    if run.drafting is None:
        return []
    if drafted_nothing(run):
        return [
            f"note: {label(run)} is set to draft ({run.drafting.method}), but its server drafted no token at any "
            "level (its own count of every request)"
        ]
    said = [f"C={level.c}: {text}" for level in run.measured() if (text := acceptance(level))]
    if not said:
        return [f"note: {label(run)} drafts ({run.drafting.method}) but its server reported no draft acceptance"]
    return [f"acceptance: {label(run)}: " + "; ".join(said)]

"""Speculation's own numbers in a comparison: each level's draft acceptance as its server reported it, and whether a
run set to draft drafted at all."""

from __future__ import annotations

from typing import Any

from console.sweep.runs.store import Run, label

ACCEPT_RATE, ACCEPT_LENGTH = "server_spec_accept_rate", "server_spec_accept_length"  # a level's row, from the server


def acceptance(level: dict[str, Any]) -> str | None:
    """A level's draft acceptance in words ("97 % accepted, 3.1 tokens a step"), where the server reported it."""
    rate, length = level.get(ACCEPT_RATE), level.get(ACCEPT_LENGTH)
    if not isinstance(rate, int | float):
        return None
    return f"{rate:.0%} accepted" + (f", {length:.1f} tokens a step" if isinstance(length, int | float) else "")


def drafted_nothing(run: Run) -> bool:
    """Set to draft, but by its server's own count of every request (llama-server's timings) it drafted no token at
    any measured level: whatever differs from the other run is not speculation's doing."""
    frame = run.measured()
    if run.drafting is None or "server_spec_draft_tokens" not in frame.columns:
        return False
    counts = frame["server_spec_draft_tokens"].to_list()
    return bool(counts) and all(n == 0 for n in counts)


def acceptance_notes(run: Run) -> list[str]:
    """Speculation's own numbers per level: a level where it loses with 99 % of drafts accepted is a draft too costly,
    one with 30 % a draft that guesses badly."""
    if run.drafting is None:
        return []
    if drafted_nothing(run):
        return [f"note: {label(run)} is set to draft ({run.drafting.method}), but its server drafted no token at any "
                "level (its own count of every request)"]
    frame = run.measured()
    said = [f"C={row['c']}: {text}" for row in frame.iter_rows(named=True) if (text := acceptance(row))]
    if not said:
        return [f"note: {label(run)} drafts ({run.drafting.method}) but its server reported no draft acceptance"]
    return [f"acceptance: {label(run)}: " + "; ".join(said)]

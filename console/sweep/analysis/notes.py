"""What a comparison must say beside its verdicts, as data: speculation's own numbers, noise that is not the
server's, the quality of each run's evidence, and the drift that bounds what can be decided."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from console.sweep.analysis.drift import Drift
from console.sweep.analysis.intervals import Level
from console.sweep.analysis.sides import SIDES, Side
from console.sweep.runs.store import Run


@dataclass(frozen=True)
class Acceptance:
    """A drafting run's draft acceptance per level, as its server reported it: a level where drafting loses with 99 %
    of drafts accepted is a draft too costly, one with 30 % a draft that guesses badly. `drafted_nothing`: by its
    server's own count it drafted no token at any level; `per_level` empty otherwise: it reported no acceptance."""

    side: Side
    method: str
    per_level: tuple[tuple[int, float, float | None, float | None], ...]  # (C, accepted share, tokens a step, share of output)
    drafted_nothing: bool = False
    synthetic: bool = False  # its prompts were pivot's made-up words, not text users send


@dataclass(frozen=True)
class SyntheticText:
    """A drafting run measured on pivot's synthetic prompts: a draft (n-gram above all) accepts what text repeats, and
    made-up words are not what users send: speculation's gain on them may be none, or more than a real set gives."""

    sides: tuple[Side, ...]


@dataclass(frozen=True)
class Gap:
    """Noise that is not the server's, where it differs between the runs."""

    what: Literal["client_cpu", "load_avg", "host_load_avg", "placement"]
    a: float | str
    b: float | str


@dataclass(frozen=True)
class Evidence:
    """What a run's figures are: "aggregates" imported without per-request data (taken as ±POINT_SPREAD), "records"
    imported with their per-request records (pivot's own intervals), or levels of pivot's own under two requests
    ("no_interval": they decide nothing)."""

    side: Side
    kind: Literal["aggregates", "records", "no_interval"]
    source: str | None = None  # the tool it was imported from


@dataclass(frozen=True)
class Counted:
    """Requests of a run that the operator should know of: "usage_missing" (tokens counted from chunks or
    finish_reason) or "ended_early" (finish_reason stop: their tokens count)."""

    side: Side
    what: Literal["usage_missing", "ended_early"]
    count: int


@dataclass(frozen=True)
class Lagging:
    """Levels where the client's loop ran late: their latencies are not measured."""

    side: Side
    levels: tuple[int, ...]
    of: tuple[int, ...]  # the run's measured levels
    why: str


@dataclass(frozen=True)
class Drifted:
    """A run that drifted while measured: its drift bounds every verdict, and alone leaves `held` undecided."""

    side: Side
    drift: Drift
    held: tuple[int, ...]


Note = Acceptance | SyntheticText | Gap | Evidence | Counted | Lagging | Drifted
GAPS: tuple[tuple[Literal["client_cpu", "load_avg", "host_load_avg"], float], ...] = (
    ("client_cpu", 0.2),  # of a core
    ("load_avg", 1.0),
    ("host_load_avg", 1.0),
)


def drafted_nothing(run: Run) -> bool:
    """Set to draft, but by its server's own count of every request (llama-server's timings) it drafted no token at
    any measured level: whatever differs from the other run is not speculation's doing."""
    counts = [level.draft_tokens for level in run.measured()]
    return run.drafting is not None and bool(counts) and all(n == 0 for n in counts)


def _acceptance(side: Side, run: Run) -> list[Note]:
    if run.drafting is None:
        return []
    per_level = tuple((lv.c, lv.accept_rate, lv.accept_length, lv.draft_share) for lv in run.measured() if lv.accept_rate is not None)
    return [Acceptance(side, run.drafting.method, per_level, drafted_nothing(run), synthetic_prompts(run))]


def synthetic_prompts(run: Run) -> bool:
    """Its requests asked pivot's synthetic words (a run imported from another tool says nothing of its prompts)."""
    return run.meta.prompt_set is None and not run.meta.imported_from and run.meta.settings.get("prompts", "synthetic") == "synthetic"


def _synthetic(a: Run, b: Run) -> list[Note]:
    sides = tuple(side for side, run in zip(SIDES, (a, b), strict=True) if run.drafting is not None and synthetic_prompts(run))
    return [SyntheticText(sides)] if sides else []


def _gaps(a: Run, b: Run) -> list[Note]:
    def worst(run: Run, key: str) -> float | None:
        values = [v for level in run.levels() if (v := getattr(level, key)) is not None]
        return max(values) if values else None

    gaps: list[Note] = []
    for key, gap in GAPS:
        va, vb = worst(a, key), worst(b, key)
        if va is not None and vb is not None and abs(va - vb) >= gap:
            gaps.append(Gap(key, va, vb))
    if a.client_placement and b.client_placement and a.client_placement != b.client_placement:
        gaps.append(Gap("placement", a.client_placement, b.client_placement))
    return gaps


def _quality(side: Side, run: Run) -> list[Note]:
    measured = run.measured()
    notes: list[Note] = []
    for what, count in (
        ("usage_missing", sum(lv.usage_missing for lv in measured)),
        ("ended_early", sum(lv.short for lv in measured)),
    ):
        if count:
            notes.append(Counted(side, what, count))  # type: ignore[arg-type]
    if lagging := [lv for lv in measured if lv.lagging]:
        notes.append(Lagging(side, tuple(lv.c for lv in lagging), tuple(lv.c for lv in measured), lagging[0].lagging or ""))
    without = any(lv.total_tok_s_lo is None for lv in measured)
    if run.meta.imported_from:
        notes.append(Evidence(side, "aggregates" if without else "records", run.meta.source or None))
    elif without:
        notes.append(Evidence(side, "no_interval"))
    return notes


def notes(a: Run, b: Run, drifts: dict[Side, Drift], levels: list[Level]) -> tuple[Note, ...]:
    runs = dict(zip(SIDES, (a, b), strict=True))
    held = tuple(lv.c for lv in levels if lv.total.within_drift)  # (the drifts of both runs together)
    return tuple(
        [n for side in SIDES for n in _acceptance(side, runs[side])]
        + _synthetic(a, b)
        + _gaps(a, b)
        + [n for side in SIDES for n in _quality(side, runs[side])]
        + [Drifted(side, d, held) for side, d in drifts.items()]
    )

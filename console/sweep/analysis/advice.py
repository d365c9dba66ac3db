"""What a comparison advises about speculation, as data: which run drafts, where it leads, loses, is alike or cannot
be told (and why), and the C above which drafting should be off. console/sweep/words/ says it in words; the pane,
the CLI, `--json` and the adaptive profile read this. Only levels judged beyond the margin count as a gain or a loss,
so a profile alike-or-better everywhere is never to be disabled."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from console.sweep.analysis.crossover import Why, unclear
from console.sweep.analysis.intervals import Level
from console.sweep.analysis.sides import Side, other

Action = Literal[
    "keep",  # drafting gains somewhere and costs nothing beyond the margin
    "disable",  # it loses, and helps nowhere below its losses
    "adaptive",  # it helps below where it loses: off above `cut`
    "open_below",  # it loses from some level on, and cannot be told below: off above `cut`, the rest is open
    "alike",  # alike at every level
    "cannot_tell",  # nobody leads anywhere; `undecided` says why
    "unstable",  # nobody leads anywhere, and drift alone is why
    "leads",  # two runs of the same kind: who leads where, no speculation verdict
    "drafted_nothing",  # the drafting run's server drafted no token: who leads where
]


@dataclass(frozen=True)
class Advice:
    action: Action
    levels: tuple[int, ...]  # the compared levels
    drafting: Side | None  # the run whose server drafts; None where both or neither do
    leads: dict[Side, tuple[int, ...]]  # total throughput: where each run leads beyond the margin
    speed_leads: dict[Side, tuple[int, ...]]  # per-request speed: the same
    alike: tuple[int, ...]  # total throughput alike within the margin
    undecided: tuple[tuple[Why, tuple[int, ...]], ...]  # total throughput: where nobody can tell, grouped by why
    cut: int | None = None  # the largest measured C where drafting should stay on (None: no adaptive setting helps)
    drifted: tuple[Side, ...] = ()  # the runs whose drift bounds the verdicts
    margin: float = 0.02
    best: dict[Side, tuple[int, float]] = field(default_factory=dict)  # per leader: its largest lead (C, ×)

    @property
    def gains(self) -> tuple[int, ...]:
        return self.leads[self.drafting] if self.drafting else ()

    @property
    def losses(self) -> tuple[int, ...]:
        return self.leads[other(self.drafting)] if self.drafting else ()


def _leads(cmp_levels: list[Level], metric: str) -> dict[Side, tuple[int, ...]]:
    return {s: tuple(lv.c for lv in cmp_levels if getattr(lv, metric).leader == s) for s in ("a", "b")}


def _best(cmp_levels: list[Level], leads: dict[Side, tuple[int, ...]]) -> dict[Side, tuple[int, float]]:
    best: dict[Side, tuple[int, float]] = {}
    for side, cs in leads.items():
        lead = [(lv.c, (lv.total.ratio or 1) if side == "b" else 1 / (lv.total.ratio or 1)) for lv in cmp_levels if lv.c in cs]
        if lead:
            best[side] = max(lead, key=lambda x: x[1])
    return best


def advise(cmp_levels: list[Level], drafting: Side | None, drafted_nothing: bool, drifted: tuple[Side, ...]) -> Advice:
    """drafting: the side whose command line drafts (None: both or neither); drafted_nothing: its server said it drafted
    no token in this run."""
    levels = tuple(lv.c for lv in cmp_levels)
    verdicts = [(lv.c, lv.total) for lv in cmp_levels]
    leads, speed = _leads(cmp_levels, "total"), _leads(cmp_levels, "per_request")
    groups = tuple((why, tuple(cs)) for why, cs in unclear(verdicts))

    def made(action: Action, cut: int | None = None) -> Advice:
        return Advice(
            action,
            levels,
            drafting,
            leads,
            speed,
            tuple(c for c, v in verdicts if v.alike),
            groups,
            cut,
            drifted,
            cmp_levels[0].total.margin,
            _best(cmp_levels, leads),
        )

    def nobody() -> Advice:
        if not groups:
            return made("alike")
        return made("unstable" if drifted and [w for w, _ in groups] == ["drift"] else "cannot_tell")

    if drafted_nothing:
        return made("drafted_nothing")
    if drafting is None:
        return made("leads") if leads["a"] or leads["b"] else nobody()
    wins, losses, speed_wins = leads[drafting], leads[other(drafting)], speed[drafting]
    if not losses:
        return made("keep") if wins or speed_wins else nobody()
    if not wins and not speed_wins:
        under = [lv.total for lv in cmp_levels if lv.c < losses[0]]
        if under and all(not v.leader and not v.alike for v in under):  # every level under the first loss is open
            return made("open_below", max(c for c in levels if c < losses[0]))
        return made("disable")
    helped_below = [c for c in levels if c < losses[0] and (c in wins or c in speed_wins)]
    return made("adaptive", helped_below[-1]) if helped_below else made("disable")

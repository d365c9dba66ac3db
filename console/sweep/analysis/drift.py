"""How far a run drifted while it was measured: its first level measured again at the end of the sweep
(`[sweep] drift_check`), held against the first measurement with their 95 % intervals. A drift says the server or the
machine changed while the run was measured; it bounds what a comparison can decide, never silences it.

The drift is measured at one level, in tok/s. There it is its share of that level's throughput; at every other level
it is held as the same tok/s, a share of that level's own throughput (a machine that lost 11 tok/s at C = 1 serving
27 lost 40 % there, and about 6 % of the 190 it serves at C = 16). A lead must exceed the margin and the drifts of both
runs at that level; a difference beyond them is still decided."""

from __future__ import annotations

from dataclasses import dataclass

from console.sweep.analysis.intervals import Verdict, estimate, judge
from console.sweep.runs.store import Run


@dataclass(frozen=True)
class Drift:
    c: int
    verdict: Verdict  # the first measurement (a) against the same level at the end (b), total tok/s

    @property
    def amount(self) -> float:
        """How far the level moved, as a fraction (0.03: 3 %), where its intervals say it moved at all."""
        ratio = self.verdict.ratio
        return abs(ratio - 1) if ratio is not None and self.verdict.leader else 0.0

    @property
    def tok_s(self) -> float:
        """How far it moved in total tok/s (0 where its intervals say it did not)."""
        if not self.amount or self.verdict.a.value is None or self.verdict.b.value is None:
            return 0.0
        return abs(self.verdict.b.value - self.verdict.a.value)

    def at(self, total_tok_s: float | None) -> float:
        """The drift as a share of a level's throughput: its measured share at most (a level slower than the one it was
        measured at is not held to more)."""
        if not self.amount:
            return 0.0
        if not total_tok_s:
            return self.amount
        return min(self.amount, self.tok_s / total_tok_s)


def drift(run: Run, margin: float) -> Drift | None:
    """The run's drift, where its sweep measured its first level again; None where it did not."""
    reference = run.reference()
    first = next((lv for lv in run.measured() if reference is not None and lv.c == reference.c), None)
    if reference is None or first is None:
        return None
    return Drift(reference.c, judge(estimate(first, "total"), estimate(reference, "total"), margin=margin))

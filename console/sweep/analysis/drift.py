"""How far a run drifted while it was measured: its first level measured again at the end of the sweep
(`[sweep] drift_check`), held against the first measurement with their 95 % intervals. Two runs on a shared machine
can differ by more than one run's interval; a comparison whose runs drifted beyond the margin widens what it takes
to lead by that much, and says so."""

from __future__ import annotations

from dataclasses import dataclass

from console.sweep.analysis.intervals import Verdict, estimate, judge
from console.sweep.runs.store import Run, label


@dataclass(frozen=True)
class Drift:
    c: int
    verdict: Verdict  # the first measurement (a) against the same level at the end (b), total tok/s

    @property
    def amount(self) -> float:
        """How far the level moved, as a fraction (0.03: 3 %), where its intervals say it moved at all."""
        ratio = self.verdict.ratio
        return abs(ratio - 1) if ratio is not None and self.verdict.leader else 0.0

    def text(self, run: Run) -> str:
        return f"{label(run)} drifted at C={self.c}, measured again at the end: {self.verdict.text('tok/s')}"


def drift(run: Run, margin: float) -> Drift | None:
    """The run's drift, where its sweep measured its first level again; None where it did not."""
    reference = run.reference()
    first = next((lv for lv in run.measured() if reference is not None and lv.c == reference.c), None)
    if reference is None or first is None:
        return None
    return Drift(reference.c, judge(estimate(first, "total"), estimate(reference, "total"), margin=margin))

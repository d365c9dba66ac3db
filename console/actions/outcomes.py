"""What each campaign verb (console/actions/campaign.py) did, as data: the runbook writes its words on the task, a
pane toasts them, the CLI prints them; a caller that needs the numbers reads the fields."""

from __future__ import annotations

from dataclasses import dataclass

from console.actions.adaptive import WrittenProfile
from console.sweep.analysis.compare import Comparison
from console.sweep.analysis.verification import Verification
from console.sweep.words.comparison import recommendation
from console.sweep.words.parts import verification_text


@dataclass(frozen=True)
class Killed:
    pids: tuple[int, ...]  # the stray processes killed (none: there were none)
    released: tuple[str, ...]  # what the GPUs released, as the release was followed

    def __str__(self) -> str:
        return f"killed {len(self.pids)}; " + "; ".join(self.released) if self.pids else "no stray processes"


@dataclass(frozen=True)
class Checked:
    """A check that passed: the GPUs idle, the files present; `said` as the check words it."""

    said: str

    def __str__(self) -> str:
        return self.said


@dataclass(frozen=True)
class ServerNow:
    """A server started, switched (and ready) or stopped, as the lifecycle describes it; `running` what it is now."""

    profile: str | None
    running: bool
    said: str

    def __str__(self) -> str:
        return self.said


@dataclass(frozen=True)
class Swept:
    run: str
    summary: str  # the run's levels in one line (Run.summary)

    def __str__(self) -> str:
        return self.summary


@dataclass(frozen=True)
class Repeated:
    run: str
    against: str
    rounds: int  # the rounds measured
    left: tuple[int, ...]  # the levels that still cannot be told
    stopped: bool = False  # the operator stopped it before round rounds + 1
    refusal: str | None = None  # why nothing was measured

    def __str__(self) -> str:
        head = f"{self.run} against {self.against}: "
        levels = ", ".join(map(str, self.left))
        if self.refusal is not None:
            return head + self.refusal
        if self.stopped:
            return head + f"stopped before round {self.rounds + 1}; C = {levels} still cannot be told"
        if not self.left:
            return head + f"every level settled after {self.rounds} round(s)"
        return head + (
            f"after {self.rounds} round(s), C = {levels} still cannot be told (the cap on rounds: repeat again, or take "
            "them as alike within their spread)"
        )


@dataclass(frozen=True)
class Compared:
    comparison: Comparison

    def __str__(self) -> str:
        verified = "; ".join(map(verification_text, self.comparison.verification))
        return recommendation(self.comparison) + (f"; verification: {verified}" if verified else "")


@dataclass(frozen=True)
class Written:
    profile: WrittenProfile

    def __str__(self) -> str:
        return self.profile.describe()


@dataclass(frozen=True)
class Verified:
    verification: Verification

    def __str__(self) -> str:
        return verification_text(self.verification)

"""Service-level decisions: how many users each run serves within a service-level objective, and at what throughput.

An SLO is any of: TTFT p90 at most so many ms, ITL p90 at most so many ms, a user's speed at least so many tok/s
(`itl_p90_ms<=30,ttft_p90_ms<=500,user_tok_s>=20`, from `--slo` or pivot.toml's `[compare] slo`). A level serves it
when its own TTFT p90 and ITL p90 (over every token of its requests) are within the bounds and its median user's speed
(per-request tok/s p50) reaches the floor; a run serves it up to the largest such level. Goodput is a level's
requests that met it one by one (their own TTFT, ITL p90 and speed), per second, as AIPerf counts it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from console.settings import slo_terms
from console.sweep.analysis.sides import SIDES, Side
from console.sweep.metrics import RequestRecord, percentile
from console.sweep.model import LevelDone

if TYPE_CHECKING:  # the run store is imported where it is needed
    from console.sweep.runs.store import Run


@dataclass(frozen=True)
class Slo:
    ttft_p90_ms: float | None = None
    itl_p90_ms: float | None = None
    user_tok_s: float | None = None

    @classmethod
    def parse(cls, text: str) -> Slo:
        """From `itl_p90_ms<=30,ttft_p90_ms<=500,user_tok_s>=20`; ValueError naming the term that is wrong."""
        try:
            return cls(**slo_terms(text))
        except ValueError as e:
            raise ValueError(f"slo: {e}") from None

    @classmethod
    def read(cls, text: str | None) -> Slo | None:
        """pivot.toml's `[compare] slo` or `--slo`, when given."""
        return cls.parse(text) if text else None

    def __str__(self) -> str:
        parts = [
            f"TTFT p90 ≤ {self.ttft_p90_ms:g} ms" if self.ttft_p90_ms is not None else "",
            f"ITL p90 ≤ {self.itl_p90_ms:g} ms" if self.itl_p90_ms is not None else "",
            f"a user's speed ≥ {self.user_tok_s:g} tok/s" if self.user_tok_s is not None else "",
        ]
        return ", ".join(p for p in parts if p)

    def level_serves(self, level: LevelDone) -> bool | None:
        """Whether the level's own figures meet it; None where a figure it needs was not measured (or its latencies
        cannot be trusted: the client's loop ran late)."""
        if level.lagging and (self.ttft_p90_ms is not None or self.itl_p90_ms is not None):
            return None
        checks = [
            (self.ttft_p90_ms, level.ttft_p90, True),
            (self.itl_p90_ms, level.itl_p90, True),
            (self.user_tok_s, level.req_tok_s_p50, False),
        ]
        if any(bound is not None and value is None for bound, value, _ in checks):
            return None
        return all(bound is None or value is None or (value * 1000 <= bound if is_ms else value >= bound) for bound, value, is_ms in checks)

    def request_meets(self, r: RequestRecord) -> bool:
        if not r.ok or r.warmup:
            return False
        if self.ttft_p90_ms is not None and (r.ttft is None or r.ttft * 1000 > self.ttft_p90_ms):
            return False
        if self.itl_p90_ms is not None and ((p90 := percentile(r.itl(), 90)) is None or p90 * 1000 > self.itl_p90_ms):
            return False
        return self.user_tok_s is None or ((speed := r.decode_tok_s) is not None and speed >= self.user_tok_s)


def goodput(run: Run, slo: Slo) -> dict[int, float]:
    """Per level, the requests per second that met the SLO one by one (of its attempts that count)."""
    from console.sweep.runs.reader import read_run_events

    scan = read_run_events(run.dir)
    assert scan.requests is not None
    rates: dict[int, float] = {}
    for c, attempts in scan.attempts.items():
        good = [a for a in attempts if not a.failed]
        wall = sum(a.done.wall_s or 0 for a in good)
        if good and wall > 0 and any(a.rows for a in good):  # (an imported level has no requests to count)
            met = sum(slo.request_meets(scan.requests.record(row)) for a in good for row in a.rows)
            rates[c] = met / wall
    return rates


def served(levels: list[LevelDone], slo: Slo) -> LevelDone | None:
    """The largest measured level that serves the SLO, when every level below it does too."""
    best = None
    for level in sorted(levels, key=lambda lv: lv.c):
        if not level.measured:
            continue
        if not slo.level_serves(level):
            break
        best = level
    return best


def unknown(levels: list[LevelDone], slo: Slo) -> LevelDone | None:
    """The first measured level that cannot say whether it serves the SLO, before any that does not."""
    for level in sorted(levels, key=lambda lv: lv.c):
        if level.measured and (serves := slo.level_serves(level)) is not True:
            return level if serves is None else None
    return None


@dataclass(frozen=True)
class Served:
    c: int  # the largest level that serves the SLO (every level below it does too)
    tok_s: float  # its total throughput
    per_gpu: float | None  # per GPU, where both runs say how many


@dataclass(frozen=True)
class SloAnswer:
    """Under this SLO, how many users each run serves and at what throughput, and which to run for it."""

    slo: Slo
    served: dict[Side, Served | None]  # None: at no measured level
    blind: dict[Side, int | None]  # the first level that cannot say (a figure the SLO needs was not measured there)
    choice: Side | Literal["either"] | None  # None: it cannot be told (a level cannot say, or neither serves it)
    margin: float


def answer(a: Run, b: Run, slo: Slo, margin: float) -> SloAnswer:
    """Under this SLO, how many users each run serves, at what total throughput (per GPU where known), and which to
    run for it (either, when their throughputs there are within the margin)."""
    per_gpu = bool(a.meta.gpu_count and b.meta.gpu_count)  # per GPU only where both say how many
    served_by: dict[Side, Served | None] = {}
    blind: dict[Side, int | None] = {}
    for side, run in zip(SIDES, (a, b), strict=True):
        level, cannot = served(run.measured(), slo), unknown(run.measured(), slo)
        blind[side] = cannot.c if cannot is not None else None
        gpus = run.meta.gpu_count or 1
        served_by[side] = None if level is None else Served(level.c, level.total_tok_s, level.total_tok_s / gpus if per_gpu else None)
    best = {side: (s.per_gpu if s.per_gpu is not None else s.tok_s) for side, s in served_by.items() if s is not None}
    choice: Side | Literal["either"] | None = None
    if best and not any(c is not None for c in blind.values()):
        if len(best) == 2 and abs(best["b"] / best["a"] - 1) <= margin:
            choice = "either"
        else:
            leader: Side = max(SIDES, key=lambda side: best.get(side, -1.0))
            choice = leader
    return SloAnswer(slo, served_by, blind, choice, margin)

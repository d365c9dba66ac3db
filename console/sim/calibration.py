"""The simulated server's timing, in one place.

Targets come from the campaign in DESIGN.md: measured single-stream and
saturated throughput of a Kimi-K2.5 INT4 server on 8 GPUs, with and without
EAGLE-3. The step-time model is derived from them, so changing a target moves
the whole curve consistently:

    decode step time t(b) = fixed + per_request * b        (b = running batch)
    total throughput(b)   = b * tokens_per_step / t(b)

Two targets (throughput at b=1 and at b=saturation_batch) fix the two
unknowns. Speculative decoding emits `1 + accepted drafts` tokens per request
per step; each of `num_steps` draft tokens is accepted with `accept_prob`
until the first rejection, so the mean accept length is
1 + p + p^2 + ... + p^num_steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StepModel:
    fixed_s: float
    per_request_s: float

    def step_time(self, batch: int) -> float:
        return self.fixed_s + self.per_request_s * batch

    @classmethod
    def from_targets(cls, tps_at_1: float, tps_saturated: float, saturation_batch: int, tokens_per_step: float) -> StepModel:
        t1 = tokens_per_step / tps_at_1
        tn = saturation_batch * tokens_per_step / tps_saturated
        per_request = (tn - t1) / (saturation_batch - 1)
        return cls(fixed_s=t1 - per_request, per_request_s=per_request)


@dataclass(frozen=True)
class Targets:
    """Throughput the simulated server should show, in output tokens per second."""

    tps_at_1: float
    tps_saturated: float
    saturation_batch: int = 250


@dataclass(frozen=True)
class Calibration:
    baseline: Targets = Targets(tps_at_1=92.6, tps_saturated=773.0)
    eagle3: Targets = Targets(tps_at_1=96.1, tps_saturated=354.0)
    accept_prob: float = 0.6  # per draft token; with 3 steps the mean accept length is ~2.18
    default_num_steps: int = 3  # the step count the eagle3 targets were measured with
    prefill_s_per_token: float = 2e-5  # a 512-token prompt costs ~10 ms of one step
    load_seconds: float = 8.0  # simulated weight loading before /health answers 200
    # GPU model
    gpu_name: str = "NVIDIA H200"
    gpu_memory_mib: int = 143771
    idle_power_w: float = 75.0
    max_power_w: float = 700.0
    # process behaviour on a stop that reaches only the main process
    leaked_on_term: tuple[int, ...] = (3, 7)  # TP ranks a SIGTERM to the main process leaves alive
    zombie_rank: int = 3  # this rank's helper becomes a zombie (exited, unreaped) once the server dies
    zombie_mib: int = 1024
    extra: dict[str, float] = field(default_factory=dict)

    def mean_accept_length(self, num_steps: int | None = None) -> float:
        steps = self.default_num_steps if num_steps is None else num_steps
        return sum(self.accept_prob**k for k in range(steps + 1))

    @property
    def baseline_steps(self) -> StepModel:
        t = self.baseline
        return StepModel.from_targets(t.tps_at_1, t.tps_saturated, t.saturation_batch, 1.0)

    @property
    def eagle3_steps(self) -> StepModel:
        t = self.eagle3
        return StepModel.from_targets(t.tps_at_1, t.tps_saturated, t.saturation_batch, self.mean_accept_length())

    def step_time(self, batch: int, draft_steps: int) -> float:
        """One decode step of a running batch: the baseline's, plus the drafting cost in proportion to the draft
        steps (the EAGLE-3 targets were measured at `default_num_steps`; 0 steps is the baseline)."""
        base = self.baseline_steps.step_time(batch)
        if not draft_steps:
            return base
        return base + (self.eagle3_steps.step_time(batch) - base) * draft_steps / self.default_num_steps


DEFAULT = Calibration()

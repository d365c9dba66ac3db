"""A continuous-batching scheduler, as time arithmetic only (no clock, no I/O).

Each `step()` admits waiting requests up to the running limit (their prefill
is paid in that step), then decodes one step for every running request and
says how long the step took and how many tokens each request got. The HTTP
server sleeps for that long (divided by the time scale); tests add the
durations up instead, which is simulated time.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from console.sim.calibration import Calibration

DECODE_LOG_INTERVAL = 40  # SGLang's default `--decode-log-interval` (0.5.23: srt/arg_groups/fields/observability.py)


class DraftPolicy(Protocol):
    """How many draft steps a running batch of this size gets, told how many drafts each request had accepted."""

    def steps_for(self, batch: int) -> int: ...

    def on_verify(self, correct_drafts_per_req: list[int], batch: int) -> None: ...


@dataclass(frozen=True)
class StaticDrafting:
    """Speculative decoding with a fixed draft length, as `--speculative-num-steps` sets it."""

    num_steps: int = 3

    def steps_for(self, batch: int) -> int:
        return self.num_steps

    def on_verify(self, correct_drafts_per_req: list[int], batch: int) -> None:
        pass


@dataclass(eq=False)
class SimRequest:
    prompt_tokens: int
    max_tokens: int
    ignore_eos: bool = True
    id: int = field(default_factory=itertools.count().__next__)
    generated: int = 0
    stop_at: int = 0  # where the simulated model emits EOS when ignore_eos is off

    @property
    def done(self) -> bool:
        return self.generated >= self.max_tokens or (not self.ignore_eos and self.generated >= self.stop_at)


@dataclass
class StepResult:
    duration_s: float
    emitted: list[tuple[SimRequest, int]]
    finished: list[SimRequest]
    batch: int
    drafting: bool


class BatchScheduler:
    def __init__(self, calibration: Calibration, *, spec: DraftPolicy | None = None, max_running: int = 256, seed: int = 0):
        self.cal = calibration
        self.spec = spec
        self.max_running = max_running
        self.rng = random.Random(seed)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.accepted_tokens = 0  # for avg_spec_accept_length
        self.spec_steps = 0
        self.drafted_tokens = 0  # draft tokens proposed, and of them accepted: an engine's spec_decode counters
        self.accepted_drafts = 0
        self.last_num_steps = 0  # draft steps used in the last step (0 = drafting off)
        # SGLang's /metrics gauges of speculation cover its last `decode_log_interval` decode steps, set as it logs them
        # (0.5.23: srt/managers/scheduler_components/metrics_reporter.py), not the server's lifetime. Counted per request
        # of each batch and reset at each log: accept length = accepted tokens (drafts + the bonus one) / forward_ct,
        # accept rate = correct drafts / (forward_ct × (num_draft_tokens − 1)). Here: (accepted drafts + a token,
        # verify steps, draft tokens proposed, accepted drafts) since the last log, and the gauges it set then
        self.window = [0, 0, 0, 0]
        self.decode_steps = 0
        self.gauge_accept_length = 0.0
        self.gauge_accept_rate = 0.0

    def submit(self, request: SimRequest) -> None:
        if not request.ignore_eos:
            request.stop_at = self.rng.randint(max(1, request.max_tokens // 4), max(1, request.max_tokens))
        self.waiting.append(request)

    def cancel(self, request: SimRequest) -> None:
        if request in self.running:
            self.running.remove(request)
        elif request in self.waiting:
            self.waiting.remove(request)

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    def steps_at(self, batch: int) -> int:
        return self.spec.steps_for(batch) if self.spec is not None else 0

    def _accepted_drafts(self, steps: int) -> int:
        n = 0
        for _ in range(steps):
            if self.rng.random() >= self.cal.accept_prob:
                break
            n += 1
        return n

    def step(self) -> StepResult:
        prefill = 0
        while self.waiting and len(self.running) < self.max_running:
            request = self.waiting.popleft()
            prefill += request.prompt_tokens
            self.running.append(request)
        batch = len(self.running)
        steps = self.steps_at(batch) if batch else 0
        duration = prefill * self.cal.prefill_s_per_token + (self.cal.step_time(batch, steps) if batch else 0.0)
        emitted: list[tuple[SimRequest, int]] = []
        correct: list[int] = []
        for request in self.running:
            drafts = self._accepted_drafts(steps)
            correct.append(drafts)
            if steps:
                self.accepted_tokens += drafts + 1
                self.spec_steps += 1
                self.drafted_tokens += steps
                self.accepted_drafts += drafts
                for i, n in enumerate((drafts + 1, 1, steps, drafts)):
                    self.window[i] += n
            limit = request.max_tokens if request.ignore_eos else min(request.max_tokens, request.stop_at)
            n = min(drafts + 1, limit - request.generated)
            request.generated += n
            emitted.append((request, n))
        if self.spec is not None and batch:
            self.spec.on_verify(correct, batch)
        finished = [r for r in self.running if r.done]
        self.running = [r for r in self.running if not r.done]
        self.last_num_steps = steps
        if batch:
            self.decode_steps += 1
            if self.decode_steps % DECODE_LOG_INTERVAL == 0:
                self._log_decode_stats()
        return StepResult(duration, emitted, finished, batch, steps > 0)

    def _log_decode_stats(self) -> None:
        """The gauges over the steps since the last log, 0 where none drafted (SGLang reports 0 when it does not
        speculate: a step keeps at least one token)."""
        tokens, forwards, proposed, accepted = self.window
        self.gauge_accept_length = tokens / forwards if forwards else 0.0
        self.gauge_accept_rate = accepted / proposed if proposed else 0.0
        self.window = [0, 0, 0, 0]

    @property
    def avg_accept_length(self) -> float:
        return self.accepted_tokens / self.spec_steps if self.spec_steps else 0.0


def simulate_level(scheduler: BatchScheduler, concurrency: int, requests: int, *, prompt_tokens: int = 256, max_tokens: int = 512) -> float:
    """Output tokens per simulated second for one closed-loop level: exactly `concurrency` in flight.

    This is how a sweep drives the server; tests use it to check the calibration
    without waiting for real time to pass.
    """
    clock = 0.0
    tokens = 0
    submitted = 0
    while submitted < min(concurrency, requests):
        scheduler.submit(SimRequest(prompt_tokens, max_tokens))
        submitted += 1
    while not scheduler.idle:
        result = scheduler.step()
        clock += result.duration_s
        tokens += sum(n for _, n in result.emitted)
        for _ in result.finished:
            if submitted < requests:
                scheduler.submit(SimRequest(prompt_tokens, max_tokens))
                submitted += 1
    return tokens / clock

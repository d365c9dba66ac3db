"""The simulated server's timing model, measured in simulated time (no waiting)."""

from __future__ import annotations

import pytest

from console.sim.adaptive import AdaptiveParams
from console.sim.calibration import DEFAULT
from console.sim.engine import BatchScheduler, SimRequest, StaticDrafting, simulate_level

LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)


def tps(spec: StaticDrafting | None, concurrency: int) -> float:
    return simulate_level(BatchScheduler(DEFAULT, spec=spec, seed=1), concurrency, max(concurrency, 8))


@pytest.mark.parametrize(
    ("spec", "concurrency", "target"),
    [(None, 1, 92.6), (None, 250, 773.0), (StaticDrafting(3), 1, 96.1), (StaticDrafting(3), 250, 354.0)],
)
def test_calibration_matches_the_campaign_within_5_percent(spec: StaticDrafting | None, concurrency: int, target: float) -> None:
    assert tps(spec, concurrency) == pytest.approx(target, rel=0.05)


def test_baseline_wins_total_throughput_at_every_concurrency_from_2() -> None:
    for c in LEVELS[1:]:
        assert tps(None, c) > tps(StaticDrafting(3), c), c
    assert tps(StaticDrafting(3), 1) > tps(None, 1)


def test_sglangs_default_adaptive_config_stops_drafting_from_batch_64() -> None:
    # SGLang's built-in tiers (no config file): [1,3,5,7] from 1, [0,1,3] from 8, [0,1] from 32, [0] from 64
    for batch, drafting in ((63, True), (64, False)):
        scheduler = BatchScheduler(DEFAULT, spec=AdaptiveParams(3, None, None))
        for _ in range(batch):
            scheduler.submit(SimRequest(16, 8))
        assert scheduler.step().drafting is drafting


def test_fewer_draft_steps_cost_less_and_zero_is_the_baseline() -> None:
    assert DEFAULT.step_time(10, 0) == DEFAULT.baseline_steps.step_time(10)
    assert DEFAULT.step_time(10, 3) == DEFAULT.eagle3_steps.step_time(10)
    assert DEFAULT.step_time(10, 0) < DEFAULT.step_time(10, 1) < DEFAULT.step_time(10, 3)


def test_speculation_emits_several_tokens_per_step_and_never_exceeds_max_tokens() -> None:
    scheduler = BatchScheduler(DEFAULT, spec=StaticDrafting(3), seed=3)
    request = SimRequest(16, 100)
    scheduler.submit(request)
    counts = []
    while not scheduler.idle:
        counts += [n for _, n in scheduler.step().emitted]
    assert sum(counts) == 100 and max(counts) == 4 and min(counts[:-1]) >= 1
    assert 1.9 < scheduler.avg_accept_length < 2.5


def test_the_acceptance_gauges_cover_the_last_logged_steps_not_the_servers_lifetime() -> None:
    """As SGLang's: a level that drafts nothing (adaptive, a big batch) reads 0 once a log interval has passed,
    not the acceptance of the drafting levels before it."""
    from console.sim.engine import DECODE_LOG_INTERVAL

    class OneRequestDrafts:
        def steps_for(self, batch: int) -> int:
            return 3 if batch == 1 else 0

        def on_verify(self, correct: list[int], batch: int) -> None:
            pass

    scheduler = BatchScheduler(DEFAULT, spec=OneRequestDrafts(), seed=3)
    scheduler.submit(SimRequest(16, 10 * DECODE_LOG_INTERVAL, ignore_eos=True))
    for _ in range(DECODE_LOG_INTERVAL):
        scheduler.step()
    assert 1.5 < scheduler.gauge_accept_length < 3.5 and 0.2 < scheduler.gauge_accept_rate <= 1.0
    for _ in range(4):
        scheduler.submit(SimRequest(16, 10 * DECODE_LOG_INTERVAL, ignore_eos=True))
    for _ in range(DECODE_LOG_INTERVAL):
        scheduler.step()
    assert scheduler.gauge_accept_length == 0 and scheduler.gauge_accept_rate == 0
    assert scheduler.avg_accept_length > 1.5  # the lifetime figure (/server_info) keeps the drafting steps


def test_requests_beyond_max_running_wait_in_the_queue() -> None:
    scheduler = BatchScheduler(DEFAULT, max_running=4)
    for _ in range(6):
        scheduler.submit(SimRequest(16, 8))
    assert scheduler.step().batch == 4 and len(scheduler.waiting) == 2

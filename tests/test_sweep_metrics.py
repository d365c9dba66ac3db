"""Sweep metrics on synthetic requests with known answers."""

from __future__ import annotations

import pytest

from console.sweep.level_stats import level_metrics, steady_throughput
from console.sweep.metrics import RequestRecord, percentile


def req(
    index: int, start: float, chunks: list[tuple[float, int]], *, c: int = 1, error: str | None = None, usage_missing: bool = False
) -> RequestRecord:
    tokens = sum(n for _, n in chunks)
    return RequestRecord(
        c,
        index,
        start,
        200 if error is None else 500,
        error,
        chunks[0][0] if chunks else None,
        chunks[-1][0] if chunks and error is None else None,
        tokens if error is None else 0,
        usage_missing,
        tuple(chunks),
    )


def test_several_tokens_in_one_chunk_count_as_tokens_with_per_token_gaps() -> None:
    r = req(0, 0.0, [(0.1, 1), (0.4, 3), (0.5, 1)])
    assert r.tokens == 5
    assert r.itl() == pytest.approx([0.1, 0.1, 0.1, 0.1])  # 0.3 s over 3 tokens, then 0.1 s for 1
    assert r.decode_tok_s == pytest.approx(4 / 0.4)


def test_level_numbers() -> None:
    records = [req(0, 0.0, [(0.1, 1), (1.1, 9)]), req(1, 1.1, [(0.2, 1), (1.2, 9)]), req(2, 2.3, [], error="HTTP 500: boom")]
    m = level_metrics(1, records, wall_s=2.5)
    assert (m.requests, m.errors, m.output_tokens) == (3, 1, 20)
    assert m.total_tok_s == pytest.approx(8.0) and m.requests_per_s == pytest.approx(0.8)
    assert m.error_rate == pytest.approx(1 / 3)
    assert m.ttft_p50 == pytest.approx(0.15) and m.req_tok_s_mean == pytest.approx(9.0)


def test_missing_usage_is_counted_and_visible() -> None:
    m = level_metrics(1, [req(0, 0.0, [(0.1, 1), (0.2, 1)], usage_missing=True)], wall_s=1.0)
    assert m.usage_missing == 1 and m.output_tokens == 2


def test_warmup_requests_are_not_counted() -> None:
    warm = RequestRecord(1, 0, 0.0, 200, None, 0.1, 0.2, 50, chunks=((0.1, 1), (0.2, 49)), warmup=True)
    m = level_metrics(1, [warm, req(1, 0.3, [(0.1, 1), (0.2, 1)])], wall_s=1.0)
    assert m.requests == 1 and m.output_tokens == 2


def test_steady_window_is_when_all_slots_are_busy() -> None:
    # C=2: requests start at 0, 0, 1, 2; the window is [0, 2]
    records = [
        req(0, 0.0, [(0.5, 1), (1.0, 1)], c=2),
        req(1, 0.0, [(0.5, 1), (2.0, 1)], c=2),
        req(2, 1.0, [(0.5, 1), (1.0, 1)], c=2),
        req(3, 2.0, [(0.5, 1), (1.0, 1)], c=2),
    ]
    # chunks at absolute 0.5, 1.0, 0.5, 2.0, 1.5, 2.0 fall in [0, 2]; 2.5 and 3.0 do not
    assert steady_throughput(2, records) == pytest.approx(6 / 2.0)
    assert steady_throughput(4, records) is None  # never more requests than slots: no steady window


def test_percentiles_interpolate() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 99) == 5 and percentile([], 50) is None
    assert percentile(list(range(101)), 90) == 90


def test_a_server_already_busy_before_the_sweep_is_warned_about() -> None:
    from console.sweep.loadgen.gauges import server_gauges
    from console.sweep.loadgen.server_view import warnings_for
    from console.sweep.model import ServerFacts

    exposition = (
        "# HELP sglang:num_running_reqs The number of running requests.\n# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{model_name="m"} 12.0\n'
        "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.\n# TYPE sglang:num_queue_reqs gauge\n"
        'sglang:num_queue_reqs{model_name="m"} 3.0\n'
    )
    gauges = server_gauges(exposition)
    assert gauges == {"running": 12.0, "queued": 3.0}
    busy = warnings_for([1, 2], ServerFacts(busy={"running": 12, "queued": 3}))
    assert busy == ["the server was already serving 12 request(s) (3 queued) before the sweep: another client's load is in these numbers"]
    assert warnings_for([1, 2], ServerFacts(busy={"running": 0, "queued": 0})) == []
    graphs = warnings_for([1, 250], ServerFacts(cuda_graph_max_bs=128, max_running_requests=256))
    assert graphs == ["level 250 exceeds the server's largest CUDA-graph batch (128): those batches decode without graphs, in slower steps"]


def test_every_field_the_client_adds_to_a_level_says_how_repeats_pool_it() -> None:
    """A field added to LevelDone (beyond the numbers computed again from the requests) declares its Pool, or a
    repeated level would lose it: the one place a new field must be described."""
    from console.sweep.model import LevelDone, LevelMetrics

    own = set(LevelDone.model_fields) - set(LevelMetrics.model_fields) - {"type", "repeat", "reference"}
    assert own == set(LevelDone.pooling())


def test_a_long_level_keeps_bounded_memory_with_percentiles_within_the_sketch_accuracy_and_exact_intervals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past EXACT_UP_TO values a distribution goes into a sketch: each percentile stays within SKETCH_ACCURACY of the
    exact one, and the intervals the comparison reads (sums, not values) are what every value gives."""
    import math
    import random

    from console.sweep import level_stats
    from console.sweep.metrics import t975

    monkeypatch.setattr(level_stats, "EXACT_UP_TO", 500)
    monkeypatch.setattr(level_stats, "ITL_EXACT_UP_TO", 500)
    monkeypatch.setattr(level_stats, "TIMELINE_EXACT_UP_TO", 500)
    rng = random.Random(7)
    records = []
    for i in range(400):
        start, t, chunks = i * 0.05, rng.uniform(0.05, 0.4), []
        for _ in range(20):
            chunks.append((t, rng.choice((1, 1, 2, 3))))
            t += rng.uniform(0.005, 0.05)
        records.append(req(i, start, chunks, c=8))
    stats = level_stats.LevelStats(8)
    for r in records:
        stats.add(r)
    m = stats.metrics(wall_s=25.0)
    assert stats.itl_q._sketch is not None and len(stats.itl_q._values) == 0  # the values are not kept
    gaps = [g for r in records for g in r.itl()]
    for q, got in ((50, m.itl_p50), (90, m.itl_p90), (99, m.itl_p99)):
        exact = percentile(gaps, q)
        assert got == pytest.approx(exact, rel=2 * level_stats.SKETCH_ACCURACY), q
    ttft = [r.ttft for r in records if r.ttft is not None]
    assert len(ttft) == len(records)  # every request streamed
    mean = sum(ttft) / len(ttft)
    half = t975(len(ttft) - 1) * math.sqrt(sum((v - mean) ** 2 for v in ttft) / (len(ttft) - 1)) / math.sqrt(len(ttft))
    assert (m.ttft_mean, m.ttft_lo, m.ttft_hi) == pytest.approx((mean, mean - half, mean + half), rel=1e-9)
    xs, ys = [r.e2e for r in records if r.e2e is not None], [r.tokens for r in records]
    assert len(xs) == len(records)  # every request finished
    ratio = sum(ys) / sum(xs)
    se = math.sqrt(sum((y - ratio * x) ** 2 for x, y in zip(xs, ys, strict=True)) / (len(xs) - 1) / len(xs)) / (sum(xs) / len(xs))
    rel = t975(len(xs) - 1) * se / ratio
    assert m.total_tok_s_lo == pytest.approx(m.total_tok_s * (1 - rel), rel=1e-9)
    assert stats.steady.tok_s() == pytest.approx(  # the window is [the 8th start, the last start], binned at 10 ms
        sum(n for r in records if r.e2e for t, n in r.chunks if 7 * 0.05 <= r.start + t <= 399 * 0.05) / (392 * 0.05), rel=0.01
    )


def test_a_scrape_where_the_server_drafted_nothing_adds_no_acceptance_to_the_levels_mean() -> None:
    """An adaptive run above its drafting tier: SGLang's gauges read 0 (or the last interval's, with no step drafting
    now); averaged in as 0 they made a level read 0.6 tokens a step, below the one a step always keeps."""
    from console.sweep.loadgen.server_view import GaugeMeans

    gauges = GaugeMeans()
    gauges.add({"running": 1, "spec_accept_length": 2.0, "spec_accept_rate": 0.4, "spec_steps": 3})
    gauges.add({"running": 5, "spec_accept_length": 0.0, "spec_accept_rate": 0.0, "spec_steps": 0})
    gauges.add({"running": 6, "spec_accept_length": 2.2, "spec_accept_rate": 0.5, "spec_steps": 0})  # stale
    assert gauges.means() == pytest.approx({"running": 4.0, "spec_accept_length": 2.0, "spec_accept_rate": 0.4, "spec_steps": 1.0})
    none = GaugeMeans()
    none.add({"running": 5, "spec_accept_length": 0.0, "spec_accept_rate": 0.0, "spec_steps": 0})
    assert "spec_accept_length" not in none.means() and "spec_accept_rate" not in none.means()

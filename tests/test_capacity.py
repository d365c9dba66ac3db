"""Capacity under an SLO (issue 38): `pivot sweep --find-capacity` doubles the load until a level fails the SLO, then
halves the bracket to the stated precision, holding each level to the SLO with its percentiles' intervals; the run
keeps the search, and `compare` says which of two profiles serves more under the SLO, and by how much."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from console.sweep.capacity import CapacitySearch, decide
from console.sweep.model import LevelDone
from console.sweep.runs.store import list_runs
from tests.test_llama_server_sim import llama_server  # noqa: F401 (the fixture)


def level(c: int, ttft_ms: tuple[float, float], **more: object) -> LevelDone:
    lo, hi = ttft_ms
    return LevelDone.model_validate(
        {"c": c, "requests": 32, "errors": 0, "total_tok_s": 100.0, "ttft_p90_lo": lo / 1000, "ttft_p90_hi": hi / 1000, **more}
    )


def test_a_level_meets_the_slo_only_over_its_whole_interval() -> None:
    slo = "ttft_p90_ms<=500"
    assert decide(level(4, (300, 480)), slo)[0] == "serves"
    assert decide(level(4, (510, 900)), slo) == ("fails", "TTFT p90 510.0–900.0 > 500")
    assert decide(level(4, (300, 700)), slo) == ("unsure", "TTFT p90 300.0–700.0 around 500")
    assert decide(level(4, (100, 200), failed="40 of 40 requests failed"), slo)[0] == "fails"
    assert decide(level(64, (100, 200), peak_in_flight=16), slo)[0] == "unsure"  # never C in flight: not C
    # an interval's end past the largest value measured (too few requests) is unknown: it decides only the other way
    open_top = LevelDone.model_validate({"c": 4, "requests": 16, "errors": 0, "total_tok_s": 1.0, "ttft_p90_lo": 0.2})
    assert decide(open_top, slo) == ("unsure", "TTFT p90 200.0–?: more requests to bound it")
    assert decide(open_top.model_copy(update={"ttft_p90_lo": 0.6}), slo)[0] == "fails"


def test_the_search_doubles_then_halves_the_bracket_to_its_precision() -> None:
    search, capacity = CapacitySearch("ttft_p90_ms<=500", 1, 0.1, rates=False), 37  # a server that serves up to C=37
    measured = []
    while (c := search.next()) is not None:
        measured.append(c)
        search.record(c, "serves" if c <= capacity else "fails", "")
    assert measured[:7] == [1, 2, 4, 8, 16, 32, 64]
    assert search.served is not None and search.failed is not None
    assert search.served <= capacity < search.failed and search.failed - search.served <= 0.1 * search.served + 1  # to 10 %
    first_fails = CapacitySearch("ttft_p90_ms<=500", 8, 0.1, rates=False)
    while (c := first_fails.next()) is not None:
        first_fails.record(c, "serves" if c <= 2 else "fails", "")
    assert (first_fails.served, first_fails.failed) == (2, 3)  # halved below the first level, then bisected


def pivot(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_two_servers_capacities_are_found_and_compared(llama_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def] # noqa: F811
    """Two llama-servers, of 4 slots and of 8: past its slots a request waits in the queue, and its TTFT with it."""
    (tmp_path / "pivot.toml").write_text('campaign_dir = "campaign"\n[sweep]\nmax_tokens = 32\nrequests = 16\n')
    common = ("--config", str(tmp_path / "pivot.toml"))
    for slots in ("4", "8"):
        url = llama_server("-np", slots)
        done = pivot(tmp_path, *common, "sweep", "--url", url, "--find-capacity", "ttft_p90_ms<=300", "--capacity-precision", "0.2")
        assert done.returncode == 0, done.stderr
        assert "capacity under TTFT p90 ≤ 300 ms: C=" in done.stdout
    four, eight = list_runs(tmp_path / "campaign")
    for run, count in ((four, 4), (eight, 8)):
        cap = run.meta.capacity
        assert cap is not None and cap.served is not None and cap.failed is not None
        assert cap.served >= count // 2 and cap.failed <= 4 * count  # about where its slots run out
        assert cap.failed - cap.served <= max(1, 0.2 * cap.served) + 1 and cap.steps  # bracketed, the search kept
        events = [json.loads(line) for line in (run.dir / "events.jsonl").read_text().splitlines()]
        assert [e["c"] for e in events if e["type"] == "level_done"][:2] == [1, 2]  # doubling from the first level
    shown = pivot(tmp_path, *common, "runs", "show", eight.name).stdout
    assert "capacity under TTFT p90 ≤ 300 ms: C=" in shown
    compared = pivot(tmp_path, *common, "compare", four.name, eight.name).stdout
    assert "capacity under TTFT p90 ≤ 300 ms: A C=" in compared or f"capacity under TTFT p90 ≤ 300 ms: {four.name}" in compared
    assert "serves more, about" in compared or "brackets overlap" in compared


def test_a_p90_from_too_few_requests_has_no_upper_end() -> None:
    from console.sweep.level_stats import Quantiles, percentile_interval

    values = Quantiles()
    for v in range(16):
        values.add(float(v))
    assert percentile_interval(values, 90, 16)[1] is None  # its 97.5 % end lies past the largest of 16
    for v in range(16, 100):
        values.add(float(v))
    low, high = percentile_interval(values, 90, 100)
    assert low is not None and high is not None and low < 90 < high < 99

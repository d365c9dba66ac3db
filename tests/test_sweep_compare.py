"""Comparison, the store and the compare command on fixture runs with the campaign's numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from console.sweep.compare import compare, counterpart, saturation, sglang_adaptive_config
from console.sweep.store import list_runs, open_run
from tests.fixtures_runs import BASELINE, EAGLE3, write_run


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    campaign = tmp_path / "campaign"
    write_run(campaign, "base", "baseline", BASELINE, speculative=False)
    write_run(campaign, "spec", "eagle3", EAGLE3, speculative=True)
    return campaign


def test_the_campaigns_verdict(campaign: Path) -> None:
    cmp = compare(open_run(campaign, "base"), open_run(campaign, "spec"))
    assert cmp.table["c"].to_list() == [1, 2, 5, 10, 30, 70, 100, 250]
    assert cmp.table["ratio_total"].to_list()[-1] == pytest.approx(354 / 773)
    assert cmp.total.at is not None and 1 < cmp.total.at < 2 and cmp.total.leader_below == "spec"
    assert cmp.per_request.at is not None and 1 < cmp.per_request.at < 2
    assert cmp.recommendation == ("speculation (eagle3) helps per-request speed only at C ≤ 1, wins total "
                                  "throughput at C ≤ 1 and loses it at C ≥ 2: turn drafting off above C=1")
    assert cmp.helps_up_to == 1
    assert cmp.saturation == {"base": 70, "spec": 30}


def test_a_run_that_never_wins(tmp_path: Path) -> None:
    worse = {c: (t * 0.5, p * 0.5) for c, (t, p) in BASELINE.items()}
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path, "spec", "eagle3", worse, speculative=True)
    cmp = compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec"))
    assert cmp.total.text == "none: base leads at every level"
    assert cmp.recommendation == "speculation (eagle3) loses total throughput at every level and helps nowhere: disable it"
    assert cmp.helps_up_to is None


def test_saturation_is_where_growth_falls_below_ten_percent() -> None:
    assert saturation([1, 2, 4, 8], [100, 190, 200, 205]) == 2
    assert saturation([1, 2], [100, 200]) is None


def test_the_adaptive_config_turns_drafting_off_above_the_crossover() -> None:
    assert sglang_adaptive_config(1) == {"batch_size_tiers": [{"min_batch_size": 1, "candidate_steps": [3]},
                                                              {"min_batch_size": 2, "candidate_steps": [0]}]}


def test_store_tables_partial_and_corrupt_runs(campaign: Path) -> None:
    write_run(campaign, "cut", "baseline", BASELINE, speculative=False, complete=False)
    (campaign / "runs" / "junk").mkdir()
    (campaign / "runs" / "junk" / "run.toml").write_text("not = [toml")
    states = {r.name: ("corrupt" if r.meta.get("corrupt") else r.state) for r in list_runs(campaign)}
    assert states == {"base": "complete", "cut": "partial", "junk": "corrupt", "spec": "complete"}
    levels = pl.read_parquet(campaign / "runs" / "base" / "levels.parquet")
    assert levels["c"].to_list() == sorted(BASELINE) and "total_tok_s" in levels.columns
    with open(campaign / "runs" / "base" / "events.jsonl", "a") as f:
        f.write('{"type": "level_do')  # a line cut by a crash
    assert open_run(campaign, "base").levels().height == 8


def pivot(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", "--config", str(config), *args], capture_output=True,
                          text=True, timeout=60)


def test_compare_command_table_json_markdown_and_profile(campaign: Path, tmp_path: Path) -> None:
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "{campaign}"\n')
    table = pivot(config, "compare", "base", "spec")
    assert table.returncode == 0, table.stderr
    assert "recommendation: speculation (eagle3) helps per-request speed only at C ≤ 1" in table.stdout
    assert "crossover, total tok/s: C ≈ 1." in table.stdout
    data = json.loads(pivot(config, "compare", "base", "spec", "--json").stdout)
    assert 1 < data["crossover_total"] < 2 and len(data["levels"]) == 8
    assert pivot(config, "compare", "base", "spec", "--csv").stdout.startswith("c,")
    report = tmp_path / "report.md"
    written = pivot(config, "compare", "base", "spec", "--markdown", str(report), "--write-profile")
    assert "| 250 | 773.0 | 354.0 | 0.46 |" in report.read_text()
    profile = tmp_path / "profiles" / "eagle3-adaptive.toml"
    assert profile.exists() and 'extends = "eagle3"' in profile.read_text() and "wrote" in written.stdout
    listed = pivot(config, "runs")
    assert "base" in listed.stdout and "complete" in listed.stdout
    missing = pivot(config, "compare", "base", "nope")
    assert missing.returncode == 2 and "no run named 'nope'" in missing.stderr


def test_bench_serving_results_import_as_a_run_and_compare(campaign: Path, tmp_path: Path) -> None:
    lines = [{"backend": "sglang-oai", "max_concurrency": c, "completed": 4 * c, "duration": 10.0,
              "total_output_tokens": int(total * 10), "output_throughput": total, "mean_tpot_ms": 1000 / per,
              "median_ttft_ms": 50.0, "median_itl_ms": 1000 / per, "request_throughput": 0.4 * c}
             for c, (total, per) in EAGLE3.items()]
    results = tmp_path / "old.jsonl"
    results.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "{campaign}"\n')
    imported = pivot(config, "runs", "import", str(results), "--name", "old-eagle3", "--profile", "eagle3")
    assert imported.returncode == 0 and "levels 1, 2, 5, 10, 30, 70, 100, 250" in imported.stdout
    cmp = compare(open_run(campaign, "base"), open_run(campaign, "old-eagle3"))
    assert cmp.table["b_req_tok_s_mean"][0] == pytest.approx(96.1)
    assert cmp.recommendation.startswith("speculation (eagle3)")  # the shipped profile says it drafts
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"output_throughput": 1}\n')
    refused = pivot(config, "runs", "import", str(bad))
    assert refused.returncode == 2 and "bad.jsonl:1: not a bench_serving result line" in refused.stderr


def test_the_simulator_reads_the_adaptive_config_compare_writes(tmp_path: Path) -> None:
    from console.sim.launch_server import _adaptive_off_batch

    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(sglang_adaptive_config(1)))
    assert _adaptive_off_batch(str(path)) == 2  # drafting at a running batch of 1, off from 2


def test_two_runs_of_the_same_kind_get_no_speculation_verdict(tmp_path: Path) -> None:
    # the adaptive profile's check: drafting (EAGLE-3) against drafting turned off above C=1
    adaptive = {c: (EAGLE3[c] if c == 1 else BASELINE[c]) for c in BASELINE}
    write_run(tmp_path, "spec", "eagle3", EAGLE3, speculative=True)
    write_run(tmp_path, "adaptive", "eagle3-adaptive", adaptive, speculative=True)
    cmp = compare(open_run(tmp_path, "spec"), open_run(tmp_path, "adaptive"))
    assert cmp.recommendation == "eagle3-adaptive leads total throughput at C ≥ 2 (×2.18 at C=250); even elsewhere"
    assert cmp.helps_up_to is None  # nothing to write: no adaptive profile is offered
    # against the baseline, the adaptive profile keeps the C=1 gain and costs nothing above: the check passed
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False)
    verified = compare(open_run(tmp_path, "base"), open_run(tmp_path, "adaptive"))
    assert verified.recommendation == ("speculation (eagle3-adaptive) helps per-request speed at C ≤ 1 and total "
                                       "throughput at C ≤ 1, costs no total throughput anywhere: keep it")
    assert verified.helps_up_to is None
    # a sweep that ends is compared with the newest run of the other kind: the adaptive one with the baseline
    assert counterpart(open_run(tmp_path, "adaptive"), list_runs(tmp_path)).name == "base"  # type: ignore[union-attr]
    assert counterpart(open_run(tmp_path, "spec"), list_runs(tmp_path)).name == "base"  # type: ignore[union-attr]
    write_run(tmp_path, "base2", "baseline", BASELINE, speculative=False)
    same = compare(open_run(tmp_path, "base"), open_run(tmp_path, "base2"))
    assert same.recommendation == "baseline and baseline are even (within 3%) at every level"

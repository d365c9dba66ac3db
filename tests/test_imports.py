"""Results other tools measured, imported from real files those tools wrote (tests/fixtures/imports/README.md says
how each was made): per-request records give a level pivot's own intervals, errors count as errors, and two tools'
runs of one server compare level by level."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.sweep.analysis.compare import compare
from console.sweep.analysis.notes import Evidence
from console.sweep.runs.imports import import_results
from console.sweep.runs.store import RunError, open_run

FIXTURES = Path(__file__).parent / "fixtures" / "imports"


def test_aiperf_artifacts_import_with_per_request_intervals_and_their_error(tmp_path: Path) -> None:
    run = import_results(tmp_path, [FIXTURES / "aiperf-c1", FIXTURES / "aiperf-c4" / "profile_export.jsonl"], name="ai", profile="p")
    c1, c4 = run.levels()
    assert (c1.c, c1.requests, c1.errors) == (1, 16, 0) and (c4.c, c4.requests, c4.errors) == (4, 20, 1)
    summary = json.loads((FIXTURES / "aiperf-c4" / "profile_export_aiperf.json").read_text())
    assert c4.total_tok_s == pytest.approx(summary["output_token_throughput"]["avg"], rel=0.01)  # AIPerf's own figure
    for level in (c1, c4):
        assert level.total_tok_s_lo is not None and level.total_tok_s_lo < level.total_tok_s < (level.total_tok_s_hi or 0)
        assert level.req_tok_s_lo is not None and level.ttft_lo is not None
    assert run.meta.source == "aiperf" and "aiperf-c1" in (run.meta.imported_from or "")


def test_a_guidellm_report_imports_each_concurrent_benchmark_as_a_level(tmp_path: Path) -> None:
    run = import_results(tmp_path, [FIXTURES / "guidellm-c1-c4.json"], name="gl", profile="p")
    levels = run.levels()
    assert [(lv.c, lv.requests, lv.errors) for lv in levels] == [(1, 12, 0), (4, 12, 0)]
    report = json.loads((FIXTURES / "guidellm-c1-c4.json").read_text())
    for level, benchmark in zip(levels, report["benchmarks"], strict=True):
        assert level.output_tokens == sum(r["output_tokens"] for r in benchmark["requests"]["successful"])
        assert level.total_tok_s == pytest.approx(benchmark["metrics"]["output_tokens_per_second"]["successful"]["mean"], rel=0.01)
        assert level.total_tok_s_lo is not None and level.ttft_p50 is not None
    rate = report["benchmarks"][0] | {"config": {"strategy": {"type_": "constant", "rate": 2.0}}}
    (tmp_path / "rate.json").write_text(json.dumps(report | {"benchmarks": [rate]}))
    with pytest.raises(RunError, match=r"rate.json benchmark 1: not a guidellm result \(a 'constant' benchmark has no fixed concurrency"):
        import_results(tmp_path, [tmp_path / "rate.json"], name="rate", profile="p")


def test_two_tools_runs_of_one_server_compare_level_by_level_with_intervals_and_neither_is_repeated(tmp_path: Path) -> None:
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "{tmp_path / "campaign"}"\n')
    for name, files in (("ai", ["aiperf-c1", "aiperf-c4"]), ("gl", ["guidellm-c1-c4.json"])):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "console",
                "--config",
                str(config),
                "runs",
                "import",
                *(str(FIXTURES / f) for f in files),
                "--name",
                name,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "(with per-request intervals)" in done.stdout
    cmp = compare(open_run(tmp_path / "campaign", "ai"), open_run(tmp_path / "campaign", "gl"))
    assert [lv.c for lv in cmp.levels] == [1, 4]
    assert all(lv.total.spread and not lv.total.point for lv in cmp.levels)  # the tools' own requests, not ±5 %
    assert all(r.more_requests is None and r.sides == () for r in cmp.repeats)  # nothing imported is measured again
    assert Evidence("a", "records", "aiperf") in cmp.notes


def test_vllm_bench_serve_files_import_with_their_requests_failed_ones_counted(tmp_path: Path) -> None:
    vllm = FIXTURES / "vllm"
    run = import_results(tmp_path, [vllm / "c1.json", vllm / "c4.json"], name="v", profile="p")
    for level, name in zip(run.levels(), ("c1.json", "c4.json"), strict=True):
        saved = json.loads((vllm / name).read_text())
        assert level.c == saved["max_concurrency"] and level.requests == saved["completed"] + saved["failed"]
        assert level.total_tok_s == pytest.approx(saved["output_throughput"], rel=0.01)  # vLLM's own figure, from its requests
        assert level.total_tok_s_lo is not None and level.ttft_lo is not None
    failing = import_results(tmp_path, [vllm / "c1-keepalive.json"], name="v-keepalive", profile="p").levels()[0]
    assert (failing.requests, failing.errors) == (24, 3) and failing.failed == "3 of 24 requests failed"
    bare = import_results(tmp_path, [vllm / "c4-aggregate.json"], name="v-aggregate", profile="p").levels()[0]
    assert bare.total_tok_s_lo is None and bare.req_tok_s_mean is not None  # --save-result alone: aggregates
    assert run.meta.source == "vllm bench serve"


def test_sglang_bench_serving_lines_with_and_without_their_details(tmp_path: Path) -> None:
    sglang = FIXTURES / "sglang"
    detailed = import_results(tmp_path, [sglang / "sglang.jsonl"], name="s", profile="p").levels()
    assert [lv.c for lv in detailed] == [1, 4] and all(lv.total_tok_s_lo is not None for lv in detailed)
    aggregate = import_results(tmp_path, [sglang / "sglang-aggregate.jsonl"], name="s-aggregate", profile="p").levels()
    assert aggregate[0].c == 4 and aggregate[0].total_tok_s_lo is None  # (its request_rate is Infinity: a setting)
    cmp = compare(open_run(tmp_path, "s"), open_run(tmp_path, "s-aggregate"))
    c4 = cmp.levels[0].total
    assert c4.b.point and not c4.a.point and c4.leader is None  # 0.4 % apart: the ±5 % an aggregate is taken to carry decides nothing

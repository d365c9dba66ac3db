"""Comparison, the store and the compare command on fixture runs with the campaign's numbers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from console.sweep.analysis.compare import compare, counterpart, saturation
from console.sweep.analysis.energy import Energy
from console.sweep.analysis.notes import Drifted, Evidence, Gap, Lagging
from console.sweep.analysis.repeats import repeat_plan
from console.sweep.model import LevelDone, RunMeta
from console.sweep.runs.files import RunError
from console.sweep.runs.store import EVENTS, create_run, list_runs, open_run
from console.sweep.words.comparison import report
from console.sweep.words.levels import level_notes, level_row
from console.sweep.words.repeats import plan_lines, refusal_text, repeat_time
from tests.fixtures_runs import BASELINE, EAGLE3, level, write_run


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
    assert cmp.total.at is not None and 1 < cmp.total.at < 2 and cmp.total.leader_below == "b"
    assert cmp.per_request.at is not None and 1 < cmp.per_request.at < 2
    assert (cmp.advice.action, cmp.advice.drafting, cmp.advice.gains, cmp.advice.speed_leads["b"]) == ("adaptive", "b", (1,), (1,))
    assert cmp.advice.losses == (2, 5, 10, 30, 70, 100, 250) and cmp.helps_up_to == 1
    assert cmp.saturation == {"a": 70, "b": 30}
    assert cmp.table["ratio_itl"][0] == pytest.approx(92.6 / 96.1)  # ITL shown beside the throughput ratios


def test_a_run_that_never_wins(tmp_path: Path) -> None:
    worse = {c: (t * 0.5, p * 0.5) for c, (t, p) in BASELINE.items()}
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path, "spec", "eagle3", worse, speculative=True)
    cmp = compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec"))
    assert (cmp.total.shape, cmp.total.leader_below) == ("one", "a")
    assert cmp.advice.action == "disable" and cmp.advice.losses == cmp.advice.levels and not cmp.advice.gains
    assert cmp.helps_up_to is None


def test_a_level_is_called_even_only_where_the_intervals_cannot_tell(tmp_path: Path) -> None:
    # C=1: the same total throughput with ±4 % intervals: B/A ± 5.7 % crosses the ±2 % margin: cannot tell, said with
    # the numbers, and how many requests would bring it within the margin
    base = {1: (84.5, 92.6), 2: (166.0, 84.0), 5: (315.0, 64.0)}
    spec = {1: (84.5, 96.1), 2: (150.0, 76.0), 5: (225.0, 46.0)}
    write_run(tmp_path, "base", "baseline", base, speculative=False, spread=0.04)
    write_run(tmp_path, "spec", "eagle3", spec, speculative=True, spread=0.04)
    cmp = compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec"))
    assert cmp.levels[0].per_request.leader is None and cmp.levels[0].total.leader is None
    assert (cmp.advice.action, cmp.advice.losses, cmp.advice.undecided) == ("open_below", (2, 5), (("repeat", (1,)),))
    assert cmp.helps_up_to == 1  # drafting stops where it is shown to lose, not where it is open
    assert (cmp.total.shape, cmp.total.leader_below) == ("one", "a")
    assert [(r.c, r.metric, r.why, r.more_requests, r.sides) for r in cmp.repeats] == [(1, "total", "estimate", 11, ("a", "b"))]
    assert cmp.repeats[0].alone == {}  # either run's ±4 % alone is wider than the margin: u must say both are needed
    table_leaders = cmp.table["leader_total"].to_list()
    assert table_leaders == [None, "a", "a"]  # the recommendation and the table say the same


def test_two_identical_runs_name_no_winner_and_no_crossover(tmp_path: Path) -> None:
    # ±2 % each: B/A ± 2.8 % cannot lie within a ±2 % margin: cannot tell, and more requests would make them alike
    jitter = {c: (t * (1.003 if c % 2 else 0.997), p) for c, (t, p) in BASELINE.items()}
    write_run(tmp_path, "one", "direct", BASELINE, speculative=False, spread=0.02)
    write_run(tmp_path, "two", "direct", jitter, speculative=False, spread=0.02)
    cmp = compare(open_run(tmp_path, "one"), open_run(tmp_path, "two"))
    assert (cmp.advice.action, cmp.advice.drafting, cmp.advice.undecided) == ("cannot_tell", None, (("repeat", tuple(BASELINE)),))
    assert cmp.total.at is None and cmp.total.shape == "nobody"
    assert [r.c for r in cmp.repeats] == sorted(BASELINE) and all(r.more_requests for r in cmp.repeats)


def test_u_says_what_it_will_measure_and_about_how_long_before_it_starts(tmp_path: Path) -> None:
    from console.sweep.analysis.repeats import REPEAT_CAP, RepeatPlan, repeat_seconds

    write_run(tmp_path, "one", "direct", BASELINE, speculative=False, spread=0.005, every_level={"requests_per_s": 2.0})
    write_run(tmp_path, "two", "other", BASELINE, speculative=False, spread=0.02, every_level={"requests_per_s": 2.0})
    cmp = compare(open_run(tmp_path, "one"), open_run(tmp_path, "two"))
    plan = repeat_plan(cmp.repeats, "b")  # the pane's `u` and --repeat-uncertain alike
    wanted = plan.wanted
    assert plan.refusal is None and wanted, "two's wider intervals alone are in the way"
    elsewhere = repeat_plan(cmp.repeats, None)
    assert (elsewhere.refusal, elsewhere.need) == ("other_server", ("b",))
    requests = min(REPEAT_CAP, max(wanted.values()))
    assert repeat_seconds(cmp.levels, "b", sorted(wanted), requests) == pytest.approx(len(wanted) * requests / 2.0)
    assert repeat_seconds(cmp.levels, "b", [3], 10) is None  # a level not measured
    # the words: the question before the first round, and the refusal
    assert (
        refusal_text(elsewhere, cmp.names, {"a": "direct", "b": "other"}) == "the levels to repeat are two (other)'s: switch to other first"
    )
    said = plan_lines(plan, cmp.levels, "two (other)")
    assert said[0].startswith(f"C = {', '.join(map(str, sorted(wanted)))} of two (other): {requests} requests each")
    seconds = len(wanted) * requests / 2.0
    assert (
        said[1]
        == "this round: " + ("under a minute" if seconds < 60 else f"about {round(seconds / 60)} min") + " at the rates they measured"
    )
    assert said[2].startswith("compared again after it") and said[2].endswith("asked before it starts")
    assert (
        plan_lines(RepeatPlan("b", {250: 5000}), cmp.levels, "two (other)")[0]
        == f"C = 250 of two (other): {REPEAT_CAP} requests (the estimate, 5000, capped at {REPEAT_CAP})"
    )
    assert repeat_time(cmp.levels, "b", [250], 1200) == "about 10 min at the rates they measured"
    assert repeat_time(cmp.levels, "b", [3], 10).startswith("how long it takes is not known")  # a level not measured


def test_differences_within_the_margin_are_alike_however_tight_the_intervals(tmp_path: Path) -> None:
    """The adaptive profile's curve on the baseline's: 0.3-0.5 % apart with ±0.3 % intervals is significant and not
    worth acting on: alike, marked ≈, and never a reason to disable it."""
    near = {c: (t * (1.005 if c % 2 else 0.996), p * 1.002) for c, (t, p) in BASELINE.items()}
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False, spread=0.003)
    write_run(tmp_path, "adaptive", "adaptive", near, speculative=True, spread=0.003)
    cmp = compare(open_run(tmp_path, "base"), open_run(tmp_path, "adaptive"))
    assert all(lv.total.alike and lv.total.leader is None for lv in cmp.levels)
    assert cmp.advice.action == "alike" and cmp.advice.alike == cmp.advice.levels
    assert cmp.total.shape == "alike" and not cmp.repeats
    assert cmp.table["alike_total"].to_list() == [True] * len(BASELINE)
    wider = compare(open_run(tmp_path, "base"), open_run(tmp_path, "adaptive"), margin=0.0005)  # 0.05 %: the old rule, near enough
    assert any(lv.total.leader for lv in wider.levels)  # and cmp, alike above, is no reason to disable


def test_failed_levels_are_in_no_verdict_and_errors_are_shown(tmp_path: Path) -> None:
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path, "spec", "eagle3", EAGLE3, speculative=True)
    with open(tmp_path / "runs" / "spec" / EVENTS, "a") as f:  # a retry of C=2 that failed: 40 of 40 requests
        f.write(json.dumps({"type": "level_started", "c": 2, "requests": 40}) + "\n")
        f.write(json.dumps(level(2, 3.0, 1.0, errors=40, requests=40, failed="40 of 40 requests failed")) + "\n")
    cmp = compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec"))
    assert 2 not in [lv.c for lv in cmp.levels]
    assert cmp.excluded == {2: {"b": "failed (40 of 40 requests failed)"}}
    assert "C=2: left out: spec (eagle3): failed (40 of 40 requests failed)" in report(cmp)
    assert cmp.table["a_errors"].to_list()[0] == 0 and "b_errors" in cmp.table.columns


def test_saturation_is_where_growth_falls_below_ten_percent() -> None:
    assert saturation([1, 2, 4, 8], [100, 190, 200, 205]) == 2
    assert saturation([1, 2], [100, 200]) is None


def test_store_tables_partial_and_corrupt_runs(campaign: Path) -> None:
    write_run(campaign, "cut", "baseline", BASELINE, speculative=False, complete=False)
    (campaign / "runs" / "junk").mkdir()
    (campaign / "runs" / "junk" / "run.toml").write_text("not = [toml")
    (campaign / "runs" / "typo").mkdir()
    (campaign / "runs" / "typo" / "run.toml").write_text("profile = 3\nsettings = { levels = [1] }\n")
    runs = {r.name: r for r in list_runs(campaign)}
    assert {name: r.state for name, r in runs.items()} == {
        "base": "complete",
        "cut": "partial",
        "junk": "corrupt",
        "spec": "complete",
        "typo": "corrupt",
    }
    assert runs["typo"].corrupt == f"{campaign / 'runs' / 'typo' / 'run.toml'}: profile: Input should be a valid string"
    levels = pl.read_parquet(campaign / "runs" / "base" / "levels.parquet")
    assert levels["c"].to_list() == sorted(BASELINE) and "total_tok_s" in levels.columns
    with open(campaign / "runs" / "base" / "events.jsonl", "a") as f:
        f.write('{"type": "level_do')  # a line cut by a crash
    assert len(open_run(campaign, "base").levels()) == 8


def test_runs_started_in_the_same_second_get_their_own_directories_and_a_named_one_is_never_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import console.sweep.runs.store as store

    monkeypatch.setattr(store.time, "strftime", lambda _format, _when: "20261203-010318")  # every run in that one second
    meta = RunMeta(profile="t-baseline", settings={"levels": [1]})
    names = [create_run(tmp_path, meta).name for _ in range(11)]
    assert names[0] == "20261203-010318-t-baseline" and names[1:3] == [f"{names[0]}-2", f"{names[0]}-3"] and len(set(names)) == 11
    assert [r.name for r in list_runs(tmp_path)] == names  # in the order made: stem-10 after stem-9, so `last` is the last
    create_run(tmp_path, meta, "mine")
    with pytest.raises(RunError, match="run 'mine' already exists"):
        create_run(tmp_path, meta, "mine")


def pivot(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", "--config", str(config), *args], capture_output=True, text=True, timeout=60)


def test_compare_command_table_json_markdown_and_profile(campaign: Path, tmp_path: Path) -> None:
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "{campaign}"\n')
    table = pivot(config, "compare", "base", "spec")
    assert table.returncode == 0, table.stderr
    assert (
        "recommendation: speculation (B, against A) helps per-request speed and total throughput at C ≤ 1" in table.stdout
    )  # the table's title says A = base (baseline), B = spec (eagle3)
    assert "A = base (baseline)" in table.stdout and "B = spec (eagle3)" in table.stdout
    assert "crossover, total tok/s: C ≈ 1." in table.stdout and "ITL B/A" in table.stdout
    data = json.loads(pivot(config, "compare", "base", "spec", "--json").stdout)
    assert 1 < data["crossover_total"]["at"] < 2 and len(data["levels"]) == 8 and data["drafting_up_to"] == 1
    assert pivot(config, "compare", "previous", "last", "--json").stdout == pivot(config, "compare", "base", "spec", "--json").stdout
    assert pivot(config, "compare", "base", "spec", "--csv").stdout.startswith("c,")
    report = tmp_path / "report.md"
    written = pivot(config, "compare", "base", "spec", "--markdown", str(report), "--write-profile")
    assert "| 250 | 773.0 | 354.0 | 0.458±0.006 A |" in report.read_text()
    profile = tmp_path / "profiles" / "eagle3-adaptive.toml"
    assert profile.exists() and 'extends = "eagle3"' in profile.read_text() and "wrote" in written.stdout
    assert json.loads((tmp_path / "profiles" / "eagle3-adaptive.json").read_text()) == {
        "1": {"candidate_steps": [3]},
        "2": {"candidate_steps": [0]},
    }
    profile.write_text(profile.read_text() + "# the operator's note\n")
    kept = subprocess.run(
        [sys.executable, "-m", "console", "--config", str(config), "compare", "base", "spec", "--write-profile"],
        input="no\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    # no terminal to ask on (stdin a pipe): nothing replaced, said on stderr (stdout may be --json's)
    assert kept.returncode == 1 and "no profile written (--yes replaces it without asking)" in kept.stderr and kept.stdout.strip()
    assert "replace it?" not in kept.stdout + kept.stderr and profile.read_text().endswith("# the operator's note\n")
    replaced = pivot(config, "compare", "base", "spec", "--write-profile", "--yes")
    assert replaced.returncode == 0 and "# the operator's note" not in profile.read_text()
    listed = pivot(config, "runs")
    assert "base" in listed.stdout and "complete" in listed.stdout
    shown = pivot(config, "runs", "show", "base").stdout + table.stdout
    assert not [line for line in shown.splitlines() if line != line.rstrip()]  # no padding at the ends of lines
    missing = pivot(config, "compare", "base", "nope")
    assert missing.returncode == 2 and "no run named 'nope'" in missing.stderr
    nothing = pivot(config, "compare", "base", "base", "--write-profile")
    assert nothing.returncode == 1 and nothing.stdout.splitlines()[-1].startswith("no adaptive profile: ")


def test_bench_serving_results_import_as_a_run_and_compare(campaign: Path, tmp_path: Path) -> None:
    lines = [
        {
            "backend": "sglang-oai",
            "max_concurrency": c,
            "completed": 4 * c,
            "duration": 10.0,
            "total_output_tokens": int(total * 10),
            "output_throughput": total,
            "mean_tpot_ms": 1000 / per,
            "median_ttft_ms": 50.0,
            "median_itl_ms": 1000 / per,
            "request_throughput": 0.4 * c,
        }
        for c, (total, per) in EAGLE3.items()
    ]
    results = tmp_path / "old.jsonl"
    results.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "{campaign}"\n')
    imported = pivot(config, "runs", "import", str(results), "--name", "old-eagle3", "--profile", "eagle3")
    assert imported.returncode == 0 and "levels 1, 2, 5, 10, 30, 70, 100, 250" in imported.stdout
    cmp = compare(open_run(campaign, "base"), open_run(campaign, "old-eagle3"))
    assert cmp.table["b_per_request"][0] == pytest.approx(96.1)
    assert cmp.advice.drafting == "b"  # the shipped profile says it drafts
    assert Evidence("b", "aggregates", "sglang bench_serving") in cmp.notes
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"output_throughput": 1}\n')
    refused = pivot(config, "runs", "import", str(bad))
    assert refused.returncode == 2 and "bad.jsonl:1: not a sglang bench_serving result (no max_concurrency" in refused.stderr


def test_two_runs_of_the_same_kind_get_no_speculation_verdict(tmp_path: Path) -> None:
    # the adaptive profile's check: drafting (EAGLE-3) against drafting turned off above C=1
    adaptive = {c: (EAGLE3[c] if c == 1 else BASELINE[c]) for c in BASELINE}
    write_run(tmp_path, "spec", "eagle3", EAGLE3, speculative=True)
    write_run(tmp_path, "adaptive", "eagle3-adaptive", adaptive, speculative=True)
    cmp = compare(open_run(tmp_path, "spec"), open_run(tmp_path, "adaptive"))
    assert (cmp.advice.action, cmp.advice.drafting, cmp.advice.leads["b"], cmp.advice.alike) == (
        "leads",
        None,
        (2, 5, 10, 30, 70, 100, 250),
        (1,),
    )
    c, ratio = cmp.advice.best["b"]
    assert c == 250 and ratio == pytest.approx(773 / 354)
    assert cmp.helps_up_to is None  # nothing to write: no adaptive profile is offered
    # against the baseline, the adaptive profile keeps the C=1 gain and costs nothing above: the check passed
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False)
    verified = compare(open_run(tmp_path, "base"), open_run(tmp_path, "adaptive"))
    assert (verified.advice.action, verified.advice.gains, verified.advice.alike) == ("keep", (1,), (2, 5, 10, 30, 70, 100, 250))
    assert verified.helps_up_to is None
    # a sweep that ends is compared with the newest run of the other kind: the adaptive one with the baseline
    assert counterpart(open_run(tmp_path, "adaptive"), list_runs(tmp_path)).name == "base"  # type: ignore[union-attr]
    assert counterpart(open_run(tmp_path, "spec"), list_runs(tmp_path)).name == "base"  # type: ignore[union-attr]


def test_client_bound_levels_are_in_no_verdict_and_lagging_ones_have_no_latency_ratio(tmp_path: Path) -> None:
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path, "spec", "eagle3", EAGLE3, speculative=True)
    with open(tmp_path / "runs" / "spec" / EVENTS, "a") as f:
        for c, extra in (
            (250, {"client_bound": "the load generator used 97% of a core"}),
            (100, {"lagging": "the load generator's loop ran late (p90 12.0 ms)", "client_cpu": 0.6}),
        ):
            total, per = EAGLE3[c]
            f.write(json.dumps({"type": "level_started", "c": c, "requests": c}) + "\n")
            f.write(json.dumps(level(c, total, per, **extra)) + "\n")
    cmp = compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec"))
    assert cmp.excluded == {250: {"b": "client-bound (the load generator used 97% of a core)"}}
    at_100 = next(lv for lv in cmp.levels if lv.c == 100)
    assert at_100.itl is None and at_100.ttft is None and at_100.total.leader == "a"
    assert Lagging("b", (100,), tuple(sorted(EAGLE3)), "the load generator's loop ran late (p90 12.0 ms)") in cmp.notes


def test_a_difference_in_where_the_load_generator_ran_refuses_and_is_noted_when_compared_anyway(campaign: Path) -> None:
    from console.sweep.model import ClientPlacement
    from console.sweep.runs.store import write_meta

    for name, client in (
        ("base", {"machine": "jump1", "cpus": 8, "path": "ssh-forward", "forwarded_from": "gpu1"}),  # older word
        ("spec", {"machine": "gpu1", "cpus": 64, "path": "direct"}),
    ):
        run = open_run(campaign, name)
        write_meta(run.dir, run.meta.model_copy(update={"client": ClientPlacement.model_validate(client)}))
    with pytest.raises(ValueError, match="client ssh-forward in A, direct in B"):
        compare(open_run(campaign, "base"), open_run(campaign, "spec"))
    notes = compare(open_run(campaign, "base"), open_run(campaign, "spec"), anyway=True).notes
    assert Gap("placement", "on jump1, through an SSH forward to gpu1", "on gpu1, direct") in notes, notes


def test_runs_that_measured_different_things_are_compared_only_when_asked(tmp_path: Path) -> None:
    """max_tokens 16 against 64, one host against another, default prompts against a prompt file: no verdict without
    --anyway, and with it each difference heads the report. The speculation flags may differ; a named key may too."""
    from console.sweep.analysis.comparable import NotComparable

    write_run(tmp_path, "short", "baseline", BASELINE, speculative=False, settings={"max_tokens": 16}, host="gpu1")
    write_run(tmp_path, "long", "eagle3", EAGLE3, speculative=True, settings={"max_tokens": 64}, host="gpu2")
    write_run(tmp_path, "file", "eagle3", EAGLE3, speculative=True, settings={"max_tokens": 16, "prompt_file": "p.jsonl"}, host="gpu1")
    short, long, file = (open_run(tmp_path, n) for n in ("short", "long", "file"))
    with pytest.raises(NotComparable) as refused:
        compare(short, long)
    assert str(refused.value) == (
        "short (baseline) and long (eagle3) did not measure the same thing: max_tokens 16 in A, 64 in B; host gpu1 in A, "
        "gpu2 in B (pivot compare --anyway compares them, saying so; --may-differ KEY lets one key differ)"
    )
    anyway = compare(short, long, anyway=True)
    assert report(anyway)[:2] == [
        "not comparable, compared anyway: max_tokens 16 in A, 64 in B",
        "not comparable, compared anyway: host gpu1 in A, gpu2 in B",
    ]
    with pytest.raises(NotComparable, match=r"prompts synthetic, unique per request in A, the file p\.jsonl in B"):
        compare(short, file)
    assert compare(short, file, may_differ=frozenset({"prompts"})).differences == []
    humaneval = {"name": "humaneval", "size": 164, "sha256": "04a75f083504" + "0" * 52}
    code = {"prompts": "humaneval"}
    write_run(tmp_path, "he-base", "baseline", BASELINE, speculative=False, settings=code, host="gpu1", prompt_set=humaneval)
    write_run(tmp_path, "he-spec", "eagle3", EAGLE3, speculative=True, settings=code, host="gpu1", prompt_set=humaneval)
    he_base, he_spec = open_run(tmp_path, "he-base"), open_run(tmp_path, "he-spec")
    with pytest.raises(NotComparable, match=r"prompts synthetic, unique per request in A, humaneval \(164 prompts, 04a75f083504\) in B"):
        compare(short, he_spec)
    assert compare(he_base, he_spec).differences == []  # the same set: compared, and no note that its text was made up
    assert not [n for n in compare(he_base, he_spec).notes if type(n).__name__ == "SyntheticText"]
    assert counterpart(long, [short, long, file]) is None  # nothing of the other kind measured it the same way
    assert counterpart(file, [short, file]) is None
    write_run(tmp_path, "same", "baseline", BASELINE, speculative=False, settings={"max_tokens": 64}, host="gpu2")
    same = counterpart(long, [short, open_run(tmp_path, "same"), long])
    assert same is not None and same.name == "same"


def test_the_compare_command_refuses_in_one_line_and_compares_anyway_when_told(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign"
    write_run(campaign, "short", "baseline", BASELINE, speculative=False, settings={"max_tokens": 16})
    write_run(campaign, "long", "eagle3", EAGLE3, speculative=True, settings={"max_tokens": 64})
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "{campaign}"\n[compare]\nmargin = 3\n')
    refused = pivot(config, "compare", "previous", "last")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        "pivot: short (baseline) and long (eagle3) did not measure the same thing: max_tokens 16 in A, 64 in B (pivot "
        "compare --anyway compares them, saying so; --may-differ KEY lets one key differ)"
    ]
    anyway = pivot(config, "compare", "previous", "last", "--anyway")
    assert anyway.returncode == 0, anyway.stderr
    assert "±3 %" in anyway.stdout and "not comparable, compared anyway: max_tokens 16 in A, 64 in B" in anyway.stdout
    assert pivot(config, "compare", "previous", "last", "--may-differ", "max_tokens").returncode == 0
    typo = pivot(config, "compare", "previous", "last", "--may-differ", "max_token")
    assert typo.returncode == 2 and "--may-differ max_token: no such key (keys: max_tokens," in typo.stderr


def test_an_adaptive_profiles_run_is_verified_against_the_runs_it_was_written_from(tmp_path: Path) -> None:
    """The profile `w` writes names its comparison's runs; a sweep of it records them, and every comparison of it
    says whether it kept the drafting run's gain where that one led and the baseline's throughput elsewhere."""
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path, "spec", "eagle3", EAGLE3, speculative=True)
    good = {c: (EAGLE3[c] if c == 1 else BASELINE[c]) for c in BASELINE}
    write_run(tmp_path, "adaptive", "eagle3-adaptive", good, speculative=True, measured_from=["base", "spec"])
    cmp = compare(open_run(tmp_path, "base"), open_run(tmp_path, "adaptive"))
    (kept,) = cmp.verification
    assert (kept.run, kept.base, kept.spec) == ("adaptive (eagle3-adaptive)", "base (baseline)", "spec (eagle3)")
    assert (kept.kept_gain, kept.matched, kept.alike, kept.unsure, kept.short) == ((1,), (2, 5, 10, 30, 70, 100, 250), True, (), ())
    # a schedule that costs: 10 % under the baseline at C = 30 and above (a downgrade of CUDA graphs, say)
    costly = {c: (t * 0.9, p) if c >= 30 else good[c] for c, (t, p) in good.items()}
    vllm = tmp_path / "vllm"
    spec_argv = ["vllm", "serve", "m", "--speculative-config", '{"method": "eagle3"}']
    write_run(vllm, "base", "baseline", BASELINE, speculative=False, kind="vllm", argv=["vllm", "serve", "m"])
    write_run(vllm, "spec", "eagle3", EAGLE3, speculative=True, kind="vllm", argv=spec_argv)
    write_run(vllm, "adaptive", "eagle3-adaptive", costly, speculative=True, measured_from=["base", "spec"], kind="vllm", argv=spec_argv)
    (short,) = compare(open_run(vllm, "base"), open_run(vllm, "adaptive")).verification
    assert (short.kept_gain, short.matched, short.engine) == ((1,), (2, 5, 10), "vllm")
    assert [(s.c, s.parent, s.verdict.leader) for s in short.short] == [(c, "base", "a") for c in (30, 70, 100, 250)]
    assert short.short[0].verdict.ratio == pytest.approx(0.9)
    assert compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec")).verification == ()


def test_an_slo_is_read_checked_and_answered_per_level() -> None:
    from console.sweep.analysis.slo import Slo, served
    from console.sweep.model import LevelDone

    slo = Slo.parse("itl_p90_ms<=30, ttft_p90_ms<=500,user_tok_s>=20")
    assert str(slo) == "TTFT p90 ≤ 500 ms, ITL p90 ≤ 30 ms, a user's speed ≥ 20 tok/s"
    for text, problem in (
        ("itl<30", "slo: 'itl<30' is not one of ttft_p90_ms<=MS, itl_p90_ms<=MS, user_tok_s>=TOK_S"),
        ("user_tok_s<=20", "slo: user_tok_s takes >=, not <="),
    ):
        with pytest.raises(ValueError) as e:
            Slo.parse(text)
        assert str(e.value) == problem

    def at(c: int, itl_ms: float, total: float) -> LevelDone:
        return LevelDone(c=c, requests=8, errors=0, total_tok_s=total, ttft_p90=0.2, itl_p90=itl_ms / 1000, req_tok_s_p50=1000 / itl_ms)

    levels = [at(1, 10, 90), at(2, 20, 170), at(5, 29, 300), at(10, 35, 450), at(30, 25, 600)]
    assert served(levels, slo).c == 5  # type: ignore[union-attr]  # C = 30 meets it again, but C = 10 does not
    assert served([at(1, 40, 90)], slo) is None
    assert Slo.parse("itl_p90_ms<=30").level_serves(LevelDone(c=1, requests=1, errors=0, total_tok_s=1.0)) is None


def test_a_bad_slo_in_pivot_toml_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "pivot.toml"
    config.write_text('[compare]\nslo = "itl<30"\n')
    refused = pivot(config, "runs")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"pivot: {config}: compare.slo: 'itl<30' is not one of ttft_p90_ms<=MS, itl_p90_ms<=MS, user_tok_s>=TOK_S"
    )


def test_the_frontier_says_where_one_run_gives_more_throughput_per_gpu_at_a_users_speed(tmp_path: Path) -> None:
    from console.sweep.analysis.frontier import dominance, points

    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False, gpu_count=8)
    write_run(tmp_path, "spec", "eagle3", EAGLE3, speculative=True, gpu_count=8)
    base, spec = open_run(tmp_path, "base"), open_run(tmp_path, "spec")
    assert points(base.measured(), 8)[0] == (3.1, 773.0 / 8)  # the slowest user, at C = 250
    found = dominance(base, spec, 0.02)
    assert found is not None and found.per_gpu and found.spans[0].leader == "a" and found.spans[0].lo == 3.1
    assert found.spans[-1].leader == "b" and found.spans[-1].lo == found.spans[-1].hi == 92.6  # EAGLE-3 between C 1 and 2
    assert compare(base, spec).frontier == found


def test_a_run_that_drifted_beyond_the_margin_widens_what_it_takes_to_lead(tmp_path: Path) -> None:
    """Its first level, measured again at the end of its sweep, came back 8 % faster: two levels 5 % apart are then
    not called a lead, the note says why, and `runs show` says how far the run moved."""
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path, "spec", "eagle3", {c: (t * 1.05, p) for c, (t, p) in BASELINE.items()}, speculative=True)
    assert all(lv.total.leader == "b" for lv in compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec")).levels)
    with open(tmp_path / "runs" / "spec" / EVENTS, "a") as f:  # the sweep's last level: its first one again
        f.write(json.dumps({"type": "level_started", "c": 1, "requests": 4, "reference": True}) + "\n")
        f.write(json.dumps(level(1, 84.5 * 1.05 * 1.08, 92.6, reference=True)) + "\n")
    spec = open_run(tmp_path, "spec")
    assert [lv.c for lv in spec.levels()] == sorted(BASELINE) and spec.reference().c == 1  # type: ignore[union-attr]
    cmp = compare(open_run(tmp_path, "base"), spec)
    # its drift is 7.1 tok/s: 8 % at C = 1, a smaller share of each faster level's throughput
    assert [lv.c for lv in cmp.levels if lv.total.within_drift] == [1, 2, 5]
    assert [lv.c for lv in cmp.levels if lv.total.leader == "b"] == [10, 30, 70, 100, 250]
    assert cmp.levels[0].total.drift == pytest.approx(0.08, abs=0.001)
    assert cmp.levels[-1].total.drift == pytest.approx(7.1 / (773 * 1.05), abs=0.001)
    assert (cmp.repeats[0].more_requests, cmp.repeats[0].why) == (None, "drift")


def test_a_difference_beyond_the_drift_is_decided_and_drift_is_the_reason_where_it_is_not(tmp_path: Path) -> None:
    """Every level 40 % apart with ±5 % spreads, one run drifting 70 % at C = 1: decided wherever the difference
    exceeds the drift's share of that level's throughput; where it does not, the drift is the reason said, never
    "no gain or loss"."""
    base = {c: (t, p) for c, (t, p) in BASELINE.items()}
    spec = {c: (t * 0.6, p * 0.6) for c, (t, p) in BASELINE.items()}
    write_run(tmp_path, "base", "baseline", base, speculative=False, spread=0.05)
    write_run(tmp_path, "spec", "eagle3", spec, speculative=True, spread=0.05)
    with open(tmp_path / "runs" / "spec" / EVENTS, "a") as f:
        f.write(json.dumps({"type": "level_started", "c": 1, "requests": 4, "reference": True}) + "\n")
        f.write(json.dumps(level(1, 84.5 * 0.6 * 1.7, 92.6, spread=0.05, reference=True)) + "\n")
    cmp = compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec"))
    held = [lv.c for lv in cmp.levels if lv.total.within_drift]
    decided = [lv.c for lv in cmp.levels if lv.total.leader == "a"]
    assert held == [1, 2] and decided == [5, 10, 30, 70, 100, 250]
    assert all(lv.total.leader is None and not lv.total.alike for lv in cmp.levels if lv.c in held)
    assert cmp.advice.action == "open_below" and cmp.advice.losses == (5, 10, 30, 70, 100, 250) and cmp.advice.cut == 2
    assert cmp.advice.undecided == (("drift", (1, 2)),) and cmp.advice.drifted == ("b",)
    (drifted,) = [n for n in cmp.notes if isinstance(n, Drifted)]
    assert (drifted.side, drifted.drift.c, drifted.held) == ("b", 1, (1, 2))


def test_a_run_whose_drift_dwarfs_every_difference_is_called_unstable(tmp_path: Path) -> None:
    base = {c: (t, p) for c, (t, p) in BASELINE.items() if c <= 5}
    spec = {c: (t * 0.9, p) for c, (t, p) in base.items()}
    write_run(tmp_path, "base", "baseline", base, speculative=False, spread=0.01)
    write_run(tmp_path, "spec", "eagle3", spec, speculative=True, spread=0.01)
    with open(tmp_path / "runs" / "spec" / EVENTS, "a") as f:
        f.write(json.dumps({"type": "level_started", "c": 1, "requests": 4, "reference": True}) + "\n")
        f.write(json.dumps(level(1, 84.5 * 0.9 * 5, 92.6, reference=True)) + "\n")
    cmp = compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec"))
    assert all(lv.total.within_drift for lv in cmp.levels) and cmp.helps_up_to is None
    assert cmp.advice.action == "unstable" and cmp.advice.drifted == ("b",)


def test_a_campaign_of_imported_aggregates_is_decided_by_its_stated_rule(tmp_path: Path) -> None:
    """The campaign's own shape, both runs imported from bench_serving without per-request data: each figure is
    taken as ±5 %, so the baseline leads total throughput from C = 2 on (10 % and more), C = 1 (4 %) stays open and
    is never offered for a repeat, and --write-profile writes the profile that stops drafting above C = 1, saying
    the evidence is aggregates."""
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "{tmp_path / "campaign"}"\n')
    for name, data, profile in (("old-base", BASELINE, "baseline"), ("old-eagle3", EAGLE3, "eagle3")):
        lines = [
            {"max_concurrency": c, "completed": 100, "duration": 10.0, "output_throughput": t, "mean_tpot_ms": 1000 / per}
            for c, (t, per) in data.items()
        ]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
        assert pivot(config, "runs", "import", str(tmp_path / f"{name}.jsonl"), "--name", name, "--profile", profile).returncode == 0
    cmp = compare(open_run(tmp_path / "campaign", "old-base"), open_run(tmp_path / "campaign", "old-eagle3"))
    assert cmp.advice.losses == (2, 5, 10, 30, 70, 100, 250) and cmp.advice.undecided == (("aggregate", (1,)),)
    assert cmp.advice.action == "open_below" and cmp.helps_up_to == 1 and cmp.levels[0].total.point
    assert [(r.c, r.more_requests, r.sides) for r in cmp.repeats] == [(1, None, ())]  # nothing imported is repeated
    refused = repeat_plan(cmp.repeats, "b")
    assert (refused.refusal, refused.levels, cmp.repeats[0].why) == ("imported", (1,), "aggregate")
    written = pivot(config, "compare", "old-base", "old-eagle3", "--write-profile", "--yes")
    assert written.returncode == 0, written.stderr
    profile = (tmp_path / "profiles" / "eagle3-adaptive.toml").read_text()
    assert "# warning: the evidence is aggregates imported from sglang bench_serving" in profile
    assert json.loads((tmp_path / "profiles" / "eagle3-adaptive.json").read_text())["2"] == {"candidate_steps": [0]}
    # a 3 % difference between aggregates decides nothing, and is not called alike
    from console.sweep.analysis.intervals import Estimate, judge

    near = judge(Estimate(100.0, 95.0, 105.0, point=True), Estimate(103.0, 97.85, 108.15, point=True))
    assert near.leader is None and not near.alike


def test_figures_without_intervals_decide_nothing_and_a_drift_edge_settles_by_no_repeat() -> None:
    from console.sweep.analysis.intervals import Estimate, judge
    from console.sweep.analysis.slo import Slo, answer
    from console.sweep.model import LevelDone

    bare = judge(Estimate(100.0, None, None), Estimate(120.0, None, None))  # an imported run's: no interval
    assert bare.leader is None and not bare.alike and bare.word == "cannot tell"
    # 4 % apart, ±1 % each, runs that drifted 3 %: a lead needs more than 5 %, and no repeat reaches it
    drifted = judge(Estimate(100.0, 99.0, 101.0), Estimate(104.0, 103.0, 105.0), drift=0.03)
    assert drifted.leader is None and drifted.needed() is None
    assert judge(Estimate(100.0, 99.0, 101.0), Estimate(104.0, 103.0, 105.0)).leader == "b"
    # an SLO on a speed no level of a run recorded: it cannot say, and names no run to choose
    levels = [LevelDone(c=c, requests=8, errors=0, total_tok_s=t, itl_p90=0.01) for c, t in ((1, 90.0), (2, 170.0))]
    slo = Slo.parse("user_tok_s>=20")

    class Imported:  # what answer() reads of a run
        def __init__(self, name: str) -> None:
            from console.sweep.model import RunMeta

            self.name, self.meta, self.profile = name, RunMeta(profile=name), name

        def measured(self) -> list[LevelDone]:
            return levels

    said = answer(Imported("old"), Imported("new"), slo, 0.02)  # type: ignore[arg-type]
    assert (said.served, said.blind, said.choice) == ({"a": None, "b": None}, {"a": 1, "b": 1}, None)


def test_energy_per_token_is_the_gpus_power_over_throughput_compared_as_a_ratio_or_said_unknown(tmp_path: Path) -> None:
    """Both servers' GPUs drew 4 kW (±1 %): whoever streams more tokens spends fewer joules on each; a run whose host
    read no power has no energy column to judge, and the comparison says so instead of guessing."""
    power = {"gpu_watts": 4000.0, "gpu_watts_lo": 3960.0, "gpu_watts_hi": 4040.0}
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False, gpu_count=8, every_level=power)
    write_run(tmp_path, "spec", "eagle3", EAGLE3, speculative=True, gpu_count=8, every_level=power)
    write_run(tmp_path, "dark", "eagle3", EAGLE3, speculative=True, gpu_count=8)
    base, spec = open_run(tmp_path, "base"), open_run(tmp_path, "spec")
    assert base.levels()[0].joules_per_token == pytest.approx(4000 / 84.5)  # read back from the run's table
    cmp = compare(base, spec)
    at = {lv.c: lv.energy for lv in cmp.levels}
    assert at[1] is not None and at[1].ratio == pytest.approx(84.5 / 88.0) and at[1].leader is None  # 4 % ± 4 %
    assert at[250] is not None and at[250].leader == "a" and at[250].ratio == pytest.approx(773 / 354)
    assert cmp.energy is not None and cmp.energy.most == pytest.approx({"a": 354 / 773})
    assert cmp.energy == Energy((), tuple(sorted(BASELINE)), 8, {"a": (2, 5, 10, 30, 70, 100, 250)}, cmp.energy.most)
    assert cmp.table["ratio_energy"].to_list()[0] == pytest.approx(84.5 / 88.0)
    dark = compare(base, open_run(tmp_path, "dark"))
    assert all(lv.energy is None for lv in dark.levels)
    assert dark.energy is not None and dark.energy.dark == ("b",) and not dark.energy.levels


def test_gpu_power_is_summed_over_every_gpu_or_unknown_when_one_has_no_reading() -> None:
    from console.sweep.loadgen.generator import gpu_watts, power_figures

    assert gpu_watts("115.00\n 230.5\n") == pytest.approx(345.5)
    assert gpu_watts("115.00\n[N/A]\n") is None and gpu_watts("") is None and gpu_watts("nan\n") is None
    # too few readings for a figure: the count is kept (the level says why it has no J/tok), the power is not
    assert power_figures([]) == {} and power_figures([500.0, 510.0, 505.0]) == {"power_readings": 3}
    four = power_figures([400.0, 600.0, 500.0, 500.0])
    hi = four["gpu_watts_hi"]
    assert four["gpu_watts"] == 500.0 and four["power_readings"] == 4 and hi is not None and hi > 600  # t with 3 df: wide
    short = LevelDone(c=10, requests=10, errors=0, total_tok_s=250.0, power_readings=2)
    assert short.joules_per_token is None and short.energy_unknown == "2 power reading(s), too few for a figure"
    assert "J/tok —: 2 power reading(s), too few" in level_notes(short) and level_row(short)[7] == "—"


def test_power_is_read_only_while_requests_are_in_flight_from_a_second_after_the_load_began() -> None:
    """NVIDIA's power.draw averages about the last second: a reading before then, or while nothing is in flight, would
    put idle time into the level's figure."""
    from console.sweep.loadgen import generator

    async def scenario() -> tuple[list[float], list[float]]:
        loop = asyncio.get_running_loop()
        t0, flight = loop.time(), {"n": 0}
        asked: list[float] = []

        async def meter() -> float:
            asked.append(loop.time() - t0)
            return 1000.0 if flight["n"] else 100.0

        samples: list[float] = []
        task = asyncio.create_task(generator.sample_power(meter, samples, lambda: flight["n"]))
        await asyncio.sleep(0.3)  # the level is made; nothing in flight yet
        flight["n"] = 4
        loaded = loop.time() - t0
        while len(samples) < 5:  # noqa: ASYNC110 (the sampler's list, filled as it reads)
            await asyncio.sleep(0.05)
        flight["n"] = 0  # the tail: nothing in flight
        before = len(asked)
        await asyncio.sleep(4 * generator.POWER_EVERY_S)
        task.cancel()
        assert len(asked) == before  # idle: not read
        return [t - loaded for t in asked], samples

    asked, samples = asyncio.run(scenario())
    assert min(asked) >= generator.POWER_WINDOW_S and set(samples) == {1000.0}


def test_compare_json_holds_every_verdict_the_table_prints(campaign: Path, tmp_path: Path) -> None:
    """Each ratio cell of the terminal's table (A, B, ≈, ?) is a verdict in --json, with its reason where nobody leads,
    and the sentences under the table (frontier, energy, refine) are there too."""
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "{campaign}"\n')
    table = pivot(config, "compare", "base", "spec")
    data = json.loads(pivot(config, "compare", "base", "spec", "--json").stdout)
    assert data["schema_version"] == 4 and data["frontier"]["spans"] and data["energy"]["dark"] == ["a", "b"]
    assert data["words"]["report"] == list(report(compare(open_run(campaign, "base"), open_run(campaign, "spec"))))
    assert [n["note"] for n in data["notes"]] == ["Acceptance", "SyntheticText"] and data["notes"][0]["side"] == "b"  # each note named
    assert data["advice"]["action"] == "adaptive" and data["advice"]["cut"] == data["drafting_up_to"] == 1
    marks = {"A": "a", "B": "b"}
    rows = [line.split() for line in table.stdout.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [int(r[0]) for r in rows] == [v["c"] for v in data["verdicts"]]
    for row, verdicts in zip(rows, data["verdicts"], strict=True):
        cells = [row[i : i + 2] for i in range(len(row) - 1) if "±" in row[i] and row[i + 1] in ("A", "B", "≈", "?")]
        for (ratio, mark), metric in zip(cells, ("total", "per_request", "itl", "ttft"), strict=False):
            v = verdicts[metric]
            assert float(ratio.split("±")[0]) == pytest.approx(v["ratio"], abs=0.0005)
            if mark in marks:
                assert v["leader"] == marks[mark]
            elif mark == "≈":
                assert v["alike"] and v["leader"] is None
            else:
                assert v["leader"] is None and not v["alike"] and v["undecided_because"] in ("drift", "aggregate", "repeat", "edge")


def test_each_kind_of_advice_in_words() -> None:
    """The recommendation's sentences, one per kind of advice: the statistics tests hold the advice itself."""
    from console.sweep.analysis.advice import Advice
    from console.sweep.words.advice import advice_text

    names = {"a": "base (baseline)", "b": "spec (eagle3)"}
    levels = (1, 2, 5)
    none: dict[str, tuple[int, ...]] = {"a": (), "b": ()}

    def said(action: str, **kw: object) -> str:
        fields: dict[str, object] = {"leads": none, "speed_leads": none, "alike": (), "undecided": (), "drafting": "b"}
        return advice_text(Advice(action, levels, **{**fields, **kw}), names)  # type: ignore[arg-type]

    who = "speculation (spec (eagle3), against base (baseline))"
    assert said("alike", alike=levels) == f"{who} matches it at every level (within ±2 %): it neither gains nor costs total throughput here"
    assert said("cannot_tell", undecided=(("repeat", levels),)) == (
        f"{who}: cannot tell whether it gains or costs total throughput at every level "
        "(the intervals cross the margin: repeat them to know)"
    )
    assert said("unstable", undecided=(("drift", levels),), drifted=("b",)) == (
        "cannot decide: spec (eagle3) drifted while measured (the server or the machine changed while it ran) by more "
        "than the difference between the runs at every level: unstable; measure it again"
    )
    assert said("keep", leads={"a": (), "b": (1,)}, speed_leads={"a": (), "b": (1,)}, alike=(2, 5)) == (
        f"{who} helps per-request speed and total throughput at C ≤ 1 and costs no total throughput beyond the margin; "
        "alike in total throughput at C ≥ 2: keep it"
    )
    assert said("adaptive", leads={"a": (2, 5), "b": (1,)}, speed_leads={"a": (), "b": (1,)}, cut=1) == (
        f"{who} helps per-request speed and total throughput at C ≤ 1 and loses total throughput at C ≥ 2: turn drafting off above C=1"
    )
    assert said("open_below", leads={"a": (2, 5), "b": ()}, undecided=(("aggregate", (1,)),), cut=1) == (
        f"{who} loses total throughput at C ≥ 2; cannot tell at C ≤ 1 (imported aggregates are taken as ±5 %: measure "
        "them with pivot to know): turn drafting off above C=1, where it loses; whether it pays off at C ≤ 1 is open"
    )
    assert said("disable", leads={"a": levels, "b": ()}) == (
        f"{who} loses total throughput at every level and helps nowhere beyond the margin: disable it"
    )
    assert said("leads", drafting=None, leads={"a": (), "b": (5,)}, alike=(1, 2), best={"b": (5, 1.5)}) == (
        "spec (eagle3) leads total throughput at C ≥ 5 (×1.50 at C=5); alike at C ≤ 2"
    )
    assert said("drafted_nothing", alike=levels).startswith("spec (eagle3) drafted no token in this run")

"""The comparison's sentences, one test per family (console/sweep/words/): the statistics tests assert on the model;
these hold what the operator reads for each kind of it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from console.sweep.analysis.compare import Comparison, compare
from console.sweep.analysis.drift import Drift
from console.sweep.analysis.frontier import Frontier, Span
from console.sweep.analysis.intervals import Estimate, Verdict, judge
from console.sweep.analysis.notes import Acceptance, Counted, Drifted, Evidence, Gap, Lagging, SyntheticText
from console.sweep.analysis.repeats import Refusal, Repeat, RepeatPlan, RepeatWhy
from console.sweep.analysis.sides import Side
from console.sweep.analysis.slo import Served, Slo, SloAnswer
from console.sweep.analysis.verification import Shortfall, Verification
from console.sweep.runs.store import EVENTS, open_run
from console.sweep.words.comparison import crossover_text, report
from console.sweep.words.parts import energy_line, frontier_text, notes_text, slo_text, verification_text
from console.sweep.words.repeats import refusal_text, repeat_text
from tests.fixtures_runs import BASELINE, EAGLE3, level, write_run

NAMES: dict[Side, str] = {"a": "base (baseline)", "b": "spec (eagle3)"}


def compared(
    tmp_path: Path,
    base: dict[int, tuple[float, float]],
    spec: dict[int, tuple[float, float]],
    *,
    spread: float = 0.01,
    every_level: Mapping[str, object] | None = None,
    gpu_count: int | None = None,
) -> Comparison:
    for name, profile, numbers, speculative in (("base", "baseline", base, False), ("spec", "eagle3", spec, True)):
        write_run(tmp_path, name, profile, numbers, speculative=speculative, spread=spread, every_level=every_level, gpu_count=gpu_count)
    return compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec"))


def test_crossovers_in_words(tmp_path: Path) -> None:
    campaign = compared(tmp_path / "1", BASELINE, EAGLE3)
    assert crossover_text(campaign.total, campaign).startswith("C ≈ 1.")
    assert crossover_text(campaign.total, campaign).endswith(": spec (eagle3) leads below (C ≤ 1), base (baseline) from C = 2")
    worse = compared(tmp_path / "2", BASELINE, {c: (t * 0.5, p * 0.5) for c, (t, p) in BASELINE.items()})
    assert crossover_text(worse.total, worse) == "none: base (baseline) leads at every level"
    near = {c: (t * (1.005 if c % 2 else 0.996), p) for c, (t, p) in BASELINE.items()}
    alike = compared(tmp_path / "3", BASELINE, near, spread=0.003)
    assert crossover_text(alike.total, alike) == "none: alike at every level (within ±2 %)"
    base, spec = {1: (84.5, 92.6), 2: (166.0, 84.0), 5: (315.0, 64.0)}, {1: (84.5, 96.1), 2: (150.0, 76.0), 5: (225.0, 46.0)}
    open_low = compared(tmp_path / "4", base, spec, spread=0.04)
    assert crossover_text(open_low.total, open_low) == (
        "none: base (baseline) leads at C ≥ 2; cannot tell at C ≤ 1 (the intervals cross the margin: repeat them to know)"
    )
    jitter = {c: (t * (1.003 if c % 2 else 0.997), p) for c, (t, p) in BASELINE.items()}
    nobody = compared(tmp_path / "5", BASELINE, jitter, spread=0.02)
    assert crossover_text(nobody.total, nobody) == (
        "none: nobody leads by more than the margin; cannot tell at every level (the intervals cross the margin: repeat them to know)"
    )


def test_repeat_lines_and_refusals_in_words(tmp_path: Path) -> None:
    base, spec = {1: (84.5, 92.6), 2: (166.0, 84.0), 5: (315.0, 64.0)}, {1: (84.5, 96.1), 2: (150.0, 76.0), 5: (225.0, 46.0)}
    cmp = compared(tmp_path, base, spec, spread=0.04)
    assert repeat_text(cmp.repeats[0], NAMES) == (
        "C=1: 84.5 vs 84.5 tok/s, +0.0 % ± 5.7 %: cannot tell; about 11 more request(s) in each run would settle it (an estimate)"
    )
    drifted = judge(Estimate(100.0, 99.0, 101.0), Estimate(104.0, 103.0, 105.0), drift=0.03)
    cases: tuple[tuple[Verdict, RepeatWhy], ...] = (
        (judge(Estimate(100.0, 99.0, 101.0), Estimate(102.0, 101.0, 103.0)), "edge"),
        (drifted, "drift"),
        (judge(Estimate(100.0, 95.0, 105.0, point=True), Estimate(103.0, 97.85, 108.15, point=True)), "aggregate"),
    )
    edge, drift, aggregate = (repeat_text(Repeat(1, "total", v, why), NAMES) for v, why in cases)
    assert edge.endswith("cannot tell; it sits on the margin's edge (±2.0 %): more requests would hardly settle it")
    assert drift.endswith(
        "the runs' drift (±5.0 % here) hides the difference: more requests would not settle it; measuring the drifting run again would"
    )
    assert aggregate.endswith(
        "base (baseline) and spec (eagle3) are imported aggregates (taken as ±5 %): a sweep of C=1 with pivot, per request, "
        "would give it an interval to decide on"
    )
    refusals: dict[Refusal, str] = {
        "settled": "every level is settled",
        "imported": "C = 1: imported results are not measured again; a sweep of those levels with pivot would give them intervals "
        "to decide on",
        "unsettleable": "no level is uncertain enough for more requests to settle (see the repeat: lines)",
        "not_alone": "spec (eagle3) alone would not settle them (C = 1: both runs' levels must be repeated; repeat the other run on "
        "its server too)",
    }
    for why, said in refusals.items():
        assert refusal_text(RepeatPlan("b", {}, why, levels=(1,)), NAMES) == said


def test_a_verification_in_words() -> None:
    kept = Verification("adaptive (eagle3-adaptive)", "base (baseline)", "spec (eagle3)", "sglang", (1, 2, 5), (1,), (2, 5))
    assert (
        verification_text(kept) == "adaptive (eagle3-adaptive) keeps the gain of spec (eagle3) at C ≤ 1, matches base (baseline) at C ≥ 2"
    )
    behind = judge(Estimate(631.0, 624.7, 637.3), Estimate(567.9, 562.2, 573.6))
    short = Verification(
        "adaptive (eagle3-adaptive)",
        "base (baseline)",
        "spec (eagle3)",
        "vllm",
        (1, 2, 30),
        (1,),
        (2,),
        short=(Shortfall(30, "base", behind),),
    )
    assert verification_text(short).startswith(
        "adaptive (eagle3-adaptive) keeps the gain of spec (eagle3) at C ≤ 1, matches base (baseline) at C = 2; falls short "
        "at C=30: base (baseline) leads it (631.0 vs 567.9 tok/s, -10.0 % ± 1.3 %)"
    )
    assert "vllm-project/vllm issues 48494 and 49548" in verification_text(short)
    aliases = {"adaptive (eagle3-adaptive)": "B", "base (baseline)": "A"}  # the pane's names for the runs it compares
    assert verification_text(kept, aliases) == "B keeps the gain of spec (eagle3) at C ≤ 1, matches A at C ≥ 2"
    lost = Verification("adaptive (eagle3-adaptive)", "base", "spec", "sglang", error="no run named 'base'")
    assert verification_text(lost) == "adaptive (eagle3-adaptive) cannot be held against the runs it was written from: no run named 'base'"


def test_an_slo_answer_in_words() -> None:
    slo = Slo.parse("ttft_p90_ms<=500,user_tok_s>=20")
    served = SloAnswer(slo, {"a": Served(10, 450.0, 56.25), "b": Served(5, 225.0, 28.1)}, {"a": None, "b": None}, "a", 0.02)
    assert slo_text(served, NAMES) == (
        "under TTFT p90 ≤ 500 ms, a user's speed ≥ 20 tok/s: base (baseline) up to C = 10 at 450.0 tok/s, 56.2 per GPU; "
        "spec (eagle3) up to C = 5 at 225.0 tok/s, 28.1 per GPU: for this SLO run base (baseline)"
    )
    blind = SloAnswer(slo, {"a": None, "b": None}, {"a": 1, "b": None}, None, 0.02)
    assert slo_text(blind, NAMES) == (
        "under TTFT p90 ≤ 500 ms, a user's speed ≥ 20 tok/s: base (baseline) cannot say from C = 1 (a figure the SLO needs "
        "was not measured there); spec (eagle3) serves it at no measured level"
    )
    either = SloAnswer(slo, {"a": Served(5, 300.0, None), "b": Served(5, 301.0, None)}, {"a": None, "b": None}, "either", 0.02)
    assert slo_text(either, NAMES).endswith(": for this SLO either serves alike (within ±2 %)")


def test_a_frontier_in_words() -> None:
    spans = (Span("a", 3.1, 84.0, 2.22), Span(None, 86.0, 88.0, 1.0), Span("b", 92.6, 92.6, 1.17))
    assert frontier_text(Frontier(True, 0.02, spans), NAMES) == (
        "frontier (total tok/s per GPU against a user's tok/s, within ±2 %): base (baseline) gives more at 3.1–84.0 tok/s "
        "a user (up to ×2.22); alike at 86.0–88.0 tok/s a user; spec (eagle3) gives more at 92.6 tok/s a user (up to ×1.17)"
    )
    assert (
        frontier_text(Frontier(False, 0.02, ()), NAMES)
        == "frontier (total tok/s against a user's tok/s): the two reach no user's speed in common"
    )


def test_energy_in_words(tmp_path: Path) -> None:
    power = {"gpu_watts": 4000.0, "gpu_watts_lo": 3960.0, "gpu_watts_hi": 4040.0}
    cmp = compared(tmp_path / "lit", BASELINE, EAGLE3, gpu_count=8, every_level=power)
    assert cmp.energy is not None and energy_line(cmp.energy, cmp.levels, cmp.names) == (
        "energy: J per output token of 8 GPU(s), A 47.34 vs B 45.45 at C=1; base (baseline) spends "
        "less at C ≥ 2 (down to ×0.46); cannot tell at C ≤ 1 (the intervals cross the margin: repeat them to know)"
    )
    dark = compared(tmp_path / "dark", BASELINE, EAGLE3)
    assert dark.energy is not None and energy_line(dark.energy, dark.levels, dark.names).startswith(
        "energy per token: not known: base (baseline) and spec (eagle3) read no GPU power"
    )


def test_each_kind_of_note_in_words() -> None:
    moved = Drift(1, judge(Estimate(50.7, 50.2, 51.2), Estimate(86.2, 85.3, 87.1)))
    notes = (
        Acceptance("b", "EAGLE3", ((1, 0.97, 3.1, 0.68), (2, 0.9, None, None))),
        Acceptance("b", "EAGLE3", ()),
        Acceptance("b", "ngram", (), drafted_nothing=True),
        Acceptance("b", "ngram", (), drafted_nothing=True, synthetic=True),
        SyntheticText(("a", "b")),
        Gap("client_cpu", 0.95, 0.4),
        Gap("placement", "on jump1", "on gpu1, direct"),
        Counted("a", "usage_missing", 3),
        Counted("b", "ended_early", 2),
        Lagging("b", (100,), (1, 10, 100), "the load generator's loop ran late (p90 12.0 ms)"),
        Evidence("a", "aggregates", "sglang bench_serving"),
        Evidence("b", "records", "aiperf"),
        Evidence("b", "no_interval"),
        Drifted("b", moved, (1, 10)),
    )
    assert notes_text(notes, NAMES, 0.02, [1, 10, 100]) == [
        "acceptance: spec (eagle3): C=1: 97% accepted, 68% of the output drafted, 3.1 tokens a step; C=2: 90% accepted",
        "note: spec (eagle3) drafts (EAGLE3) but its server reported no draft acceptance",
        "note: spec (eagle3) is set to draft (ngram), but its server drafted no token at any level (its own count of every request)",
        "note: spec (eagle3) is set to draft (ngram), but its server drafted no token at any level (its own count of every "
        "request); pivot's synthetic words give an n-gram draft nothing to match",
        "note: base (baseline) and spec (eagle3) drafted on pivot's synthetic prompts, words made up per request, not text "
        "users send: a draft accepts what text repeats, so its gain there is not the one users get (measure with prompts = "
        '"humaneval" or a set of yours)',
        "note: its load generator's CPU peaked at 95% of a core in base (baseline) and 40% of a core in spec (eagle3); the load "
        "generator ran on jump1 in base (baseline) and on gpu1, direct in spec (eagle3)",
        "note: base (baseline): 3 request(s) usage missing: tokens counted from chunks or finish_reason",
        "note: spec (eagle3): 2 request(s) ended early (finish_reason stop): their tokens count",
        "note: spec (eagle3): latencies not measured at C ≥ 100 (the load generator's loop ran late (p90 12.0 ms))",
        "note: base (baseline) is aggregates imported from sglang bench_serving, without per-request data: each figure it "
        "gave without an interval is taken as ±5 %, so a lead must exceed that",
        "note: spec (eagle3) was imported from aiperf with its per-request records: its intervals are pivot's own",
        "note: spec (eagle3) has levels under two requests: their numbers carry no interval and decide nothing",
        "note: spec (eagle3) drifted at C=1, measured again at the end: 50.7 vs 86.2 tok/s, +70.0 % ± 2.4 %: the server or "
        "the machine changed while it ran. A lead must exceed the ±2 % margin and that drift: ±70.0 % at C=1, its 35.5 "
        "tok/s as a share of each other level's throughput; the drift alone leaves C ≤ 10 undecided",
    ]


def test_the_report_names_the_runs_as_asked_and_says_what_was_left_out(tmp_path: Path) -> None:
    write_run(tmp_path, "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path, "spec", "eagle3", EAGLE3, speculative=True)
    with open(tmp_path / "runs" / "spec" / EVENTS, "a") as f:
        f.write(json.dumps({"type": "level_started", "c": 2, "requests": 40}) + "\n")
        f.write(json.dumps(level(2, 3.0, 1.0, errors=40, requests=40, failed="40 of 40 requests failed")) + "\n")
    cmp = compare(open_run(tmp_path, "base"), open_run(tmp_path, "spec"))
    said = report(cmp)
    assert said[0].startswith("recommendation: speculation (spec (eagle3), against base (baseline)) helps")
    assert "C=2: left out: spec (eagle3): failed (40 of 40 requests failed)" in said
    assert "saturation (< 10 % more to the next level): base (baseline): C=70; spec (eagle3): C=30" in said
    short = report(cmp, {"a": "A", "b": "B"})  # the pane's
    assert (
        short[0].startswith("recommendation: speculation (B, against A) helps")
        and "C=2: left out: B: failed (40 of 40 requests failed)" in short
    )
    assert not any("(eagle3)" in line for line in short)


@pytest.mark.parametrize("how", ["pane", "cli"])
def test_nothing_is_said_twice_differently(tmp_path: Path, how: str) -> None:
    """The report's recommendation is the advice's words, whoever prints it."""
    from console.sweep.words.comparison import recommendation

    cmp = compared(tmp_path, BASELINE, EAGLE3)
    names: dict[Side, str] | None = {"a": "A", "b": "B"} if how == "pane" else None
    assert report(cmp, names)[0] == f"recommendation: {recommendation(cmp, names)}"


def test_a_recommendation_where_some_levels_are_alike_and_the_rest_undecided() -> None:
    """An adaptive profile's run against the baseline (issue 36): alike at the high levels, undecided below. It read
    "cannot tell whether it gains or costs total throughput alike at C ≥ 30; at C ≤ 10"."""
    from console.sweep.analysis.advice import Advice
    from console.sweep.words.advice import advice_text

    levels = (1, 2, 5, 10, 30, 70)
    nobody: dict[Side, tuple[int, ...]] = {"a": (), "b": ()}
    adv = Advice("cannot_tell", levels, "b", dict(nobody), dict(nobody), (30, 70), (("repeat", (1, 2, 5, 10)),))
    said = advice_text(adv, {"a": "A", "b": "B"})
    assert said.startswith(
        "speculation (B, against A): alike in total throughput at C ≥ 30; cannot tell whether it gains or costs total "
        "throughput at C ≤ 10 ("
    )
    neither = Advice("cannot_tell", (1, 2, 5), None, dict(nobody), dict(nobody), (5,), (("repeat", (1, 2)),))
    assert advice_text(neither, {"a": "A", "b": "B"}).startswith("alike in total throughput at C ≥ 5; cannot tell whether A or B leads")

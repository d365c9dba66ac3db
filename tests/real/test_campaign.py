"""The campaign on a real drafting engine, with pivot's own commands only (issue 20): on a host new to pivot, start the
baseline llama-server, sweep C = 1, 2, 4, 8, switch to a drafting profile, sweep, compare, write-profile; for
n-gram self-speculation and for a draft as costly as the target. What is asserted is what the operator reads."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.faults.conftest import run_pivot
from tests.real.conftest import RealHost, user_processes

pytestmark = pytest.mark.slow  # a real engine


def pivot(host: RealHost, *args: str) -> str:
    done = run_pivot(host.config, *args, timeout=1200)  # a sweep of a CPU engine takes minutes
    assert done.returncode == 0, f"pivot {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def sweep(host: RealHost) -> dict:
    out = pivot(host, "sweep", "--json")
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    levels = [e for e in events if e["type"] == "level_done" and not e.get("reference")]  # C = 1 again: the drift
    assert [e["c"] for e in levels] == [1, 2, 4, 8]
    assert all(e["errors"] == 0 and not e.get("failed") for e in levels), levels  # none lost to closed connections
    return {"events": events, "levels": levels}


def newest_runs(host: RealHost, n: int) -> list[str]:
    runs = sorted((host.config.parent.parent / "campaign" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    return [p.name for p in runs[-n:]]


def test_the_campaign_on_llama_server(real_host: RealHost) -> None:
    host = real_host
    assert not any(host.home.iterdir())  # a home new and empty: nothing of pivot's
    started = pivot(host, "server", "start", "ls-base")
    assert "ok   flags known" in started, started
    workdir = host.home / ".pivot"
    assert stat.S_IMODE(workdir.stat().st_mode) == 0o700
    assert "ready" in pivot(host, "server", "status")
    shows = pivot(host, "profiles", "show", "ls-ngram")
    assert "speculative decoding: ngram-simple" in shows and "--spec-type ngram-simple" in shows

    base = sweep(host)
    assert not any(e.get("lagging") for e in base["levels"])
    assert all("spec_accept_rate" not in (e.get("server") or {}) for e in base["levels"])  # the baseline drafts nothing

    switched = pivot(host, "server", "switch", "ls-draft")
    assert "ready" in pivot(host, "server", "status"), switched
    costly = sweep(host)
    rates = [(e.get("server") or {}).get("spec_accept_rate") for e in costly["levels"]]
    assert all(isinstance(r, float) and r > 0.5 for r in rates), rates  # its own draft: most tokens accepted
    assert not any(e.get("lagging") for e in costly["levels"])  # bursts are the server's, not a late client
    base_run, draft_run = newest_runs(host, 2)
    shown = pivot(host, "runs", "show", draft_run)
    assert "accepted" in shown
    verdict = json.loads(pivot(host, "compare", base_run, draft_run, "--json"))
    assert verdict["advice"]["drafting"] == "b"
    levels = {row["c"]: row for row in verdict["levels"]}
    for c, row in levels.items():  # the verdict agrees with the numbers: a draft this costly never helps
        assert row["leader_total"] != "b" or row["b_total"] > row["a_total"], (c, row)
    assert verdict["advice"]["action"] != "keep", verdict["words"]["recommendation"]  # it never helps without losing
    assert any(n["note"] == "Acceptance" and n["per_level"] for n in verdict["notes"])

    pivot(host, "server", "switch", "ls-ngram")
    ngram = sweep(host)
    ngram_run = newest_runs(host, 1)[0]
    verdict = json.loads(pivot(host, "compare", base_run, ngram_run, "--json"))
    drafted = [e for e in ngram["levels"] if (e.get("server") or {}).get("spec_draft_tokens")]
    if drafted:  # recognised as speculation, with its acceptance; where it leads, its numbers are higher
        assert verdict["advice"]["drafting"] == "b" and verdict["advice"]["action"] != "drafted_nothing"
        assert any(n["note"] == "Acceptance" and n["per_level"] for n in verdict["notes"])
        assert all(row["b_total"] > row["a_total"] for row in verdict["levels"] if row["leader_total"] == "b")
    else:  # n-gram lookup found nothing to draft in these answers: said, and no speculation verdict on noise
        assert verdict["advice"]["action"] == "drafted_nothing", verdict["words"]["recommendation"]
    advice = run_pivot(host.config, "compare", base_run, draft_run, "--write-profile")
    assert "llama-server cannot switch drafting by batch size" in advice.stdout or "no adaptive profile" in advice.stdout

    # AIPerf's run of a llama-server like this one (its files: tests/fixtures/imports), held against pivot's, level
    # by level, both with intervals from their requests (the prompts differ: compared anyway, and said)
    imports = Path(__file__).parent.parent / "fixtures" / "imports"
    pivot(host, "runs", "import", str(imports / "aiperf-c1"), str(imports / "aiperf-c4"), "--name", "aiperf-base", "--profile", "ls-base")
    held = json.loads(pivot(host, "compare", base_run, "aiperf-base", "--json", "--anyway"))
    assert [v["c"] for v in held["verdicts"]] == [1, 4]
    assert all(v["total"]["a"]["lo"] is not None and v["total"]["b"]["lo"] is not None for v in held["verdicts"])
    assert all(r["more_requests"] is None for r in held["repeat"])  # AIPerf's run is not pivot's to measure again
    pivot(host, "runs", "import", str(imports / "vllm" / "c1.json"), str(imports / "vllm" / "c4.json"), "--name", "vllm-base")
    held = json.loads(pivot(host, "compare", base_run, "vllm-base", "--json", "--anyway"))  # vllm bench serve's, the same way
    assert [v["c"] for v in held["verdicts"]] == [1, 4] and all(v["total"]["b"]["lo"] is not None for v in held["verdicts"])

    stopped = pivot(host, "server", "stop")
    assert "stopped" in stopped
    assert "stopped" in pivot(host, "server", "status")
    assert not [c for c in user_processes(host.user) if "llama-server" in c]  # nothing left running

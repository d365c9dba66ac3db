"""Runbooks: reading them, and the demo campaign end to end against the simulated host."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from console import config
from console.actions.runbook import find_runbook, read_runbook
from console.tasks.tasklist import TaskError, TaskList
from tests.conftest import HostProcess, free_port

RUNBOOKS = Path(__file__).parent.parent / "profiles" / "runbooks"


def test_the_shipped_runbooks_read() -> None:
    for name in ("campaign", "demo-campaign"):
        tasks = read_runbook(RUNBOOKS / f"{name}.toml")
        assert [t.action.split()[0] for t in tasks] == [
            "stop",
            "kill-stray",
            "verify-idle",
            "check-files",
            "switch",
            "sweep",
            "switch",
            "sweep",
            "compare",
            "repeat-uncertain",
            "write-profile",
            "switch",
            "sweep",
            "verify",
        ]


def test_a_runbook_is_found_by_name_and_a_later_directory_wins(tmp_path: Path) -> None:
    (tmp_path / "pivot.toml").write_text('[hosts.h]\nssh = "h"\n')
    cfg = config.load(tmp_path / "pivot.toml")
    assert find_runbook(cfg, "demo-campaign").read_text() == (RUNBOOKS / "demo-campaign.toml").read_text()
    (tmp_path / "profiles" / "runbooks").mkdir(parents=True)
    mine = tmp_path / "profiles" / "runbooks" / "campaign.toml"
    mine.write_text('[[tasks]]\ncontent = "mine"\n')
    assert find_runbook(cfg, "campaign") == mine
    assert find_runbook(cfg, str(mine)) == mine
    with pytest.raises(TaskError, match="no runbook 'nope': not a file, nor one of campaign, demo-campaign"):
        find_runbook(cfg, "nope")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[tasks]]\ncontent = "x"\naction = "reboot everything"\n', "tasks[1].action: unknown action 'reboot everything'"),
        ('[[tasks]]\ncontent = "x"\naction = "start"\n', "start takes 1 argument(s)"),
        ('[[tasks]]\naction = "stop"\n', "tasks[1]: needs a content string"),
        ('name = "empty"\n', "no [[tasks]]"),
    ],
)
def test_a_bad_runbook_is_refused_before_anything_runs(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "rb.toml"
    path.write_text(text)
    with pytest.raises(TaskError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        read_runbook(path)


def test_the_demo_campaign_runs_end_to_end(sim_host_process: HostProcess, tmp_path: Path) -> None:
    """To the comparison and the repeat of the levels it cannot tell. What follows (writing the adaptive profile,
    sweeping and verifying it) depends on what the comparison concludes, which a simulated clock twenty times as fast
    does not reproduce: those steps are checked with runs of known numbers below."""
    runbook = (RUNBOOKS / "demo-campaign.toml").read_text().replace('action = "sweep"', 'action = "sweep levels=1,2 max_tokens=16"')
    path = tmp_path / "demo-campaign.toml"
    path.write_text(runbook[: runbook.index('[[tasks]]\ncontent = "Write the adaptive profile')])
    # the same profiles on free ports, beside the demo's pivot.toml (a later directory's profile wins)
    local = sim_host_process.config_path.parent / "profiles"
    local.mkdir(exist_ok=True)
    shipped = Path(__file__).parent.parent / "profiles" / "demo"
    for name in ("demo-baseline", "demo-eagle3"):
        text, port = (shipped / f"{name}.toml").read_text(), f"port = {free_port()}\n"
        # top-level keys go before the first table
        (local / f"{name}.toml").write_text(text.replace("[flags]", port + "\n[flags]") if "[flags]" in text else text + port)
    pivot = [sys.executable, "-m", "console", "--config", str(sim_host_process.config_path)]
    started = subprocess.run([*pivot, "server", "start", "demo-eagle3"], capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stdout + started.stderr
    pid = int((sim_host_process.root / "home" / ".pivot" / "server.pid").read_text())
    subprocess.run(["kill", "-TERM", str(pid)], check=True)  # a crash that leaves workers and a zombie behind
    result = subprocess.run([*pivot, "run", str(path), "--yes"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    tasks = TaskList(sim_host_process.root / "campaign").load().tasks
    assert [t.status for t in tasks] == ["completed"] * 10
    results = [t.result or "" for t in tasks]
    assert results[0].startswith("no server running (crashed demo-eagle3")  # nothing to stop: the step is done
    assert "released in" in results[1] and results[2].startswith("all GPUs idle") and results[3] == "2 present"
    assert results[4].startswith("ready demo-baseline") and results[6].startswith("ready demo-eagle3")
    assert "2 levels" in results[5] and "2 levels" in results[7]
    assert results[8].startswith("speculation (") and "demo-eagle3" in results[8]
    eagle3, baseline = sorted((sim_host_process.root / "campaign" / "runs").iterdir(), key=lambda p: p.name)[::-1]
    assert results[9].startswith(f"{eagle3.name} against {baseline.name}: "), results[9]
    again = subprocess.run([*pivot, "run", str(path), "--yes"], capture_output=True, text=True, timeout=120)
    assert "already completed" in again.stdout  # a runbook that was run does not run twice


def test_a_failing_step_stops_the_runbook_and_leaves_its_task_in_progress(sim_host_process: HostProcess, tmp_path: Path) -> None:
    path = tmp_path / "rb.toml"
    path.write_text(
        '[[tasks]]\ncontent = "Check the inputs"\naction = "check-files ~/models/nope"\n'
        '[[tasks]]\ncontent = "Verify idle"\naction = "verify-idle"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "console", "--config", str(sim_host_process.config_path), "run", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "failed: missing on the host: ~/models/nope" in result.stdout
    tasks = TaskList(sim_host_process.root / "campaign").load().tasks
    assert [t.status for t in tasks] == ["in_progress", "pending"]
    assert tasks[0].result == "failed: missing on the host: ~/models/nope"


def test_the_campaigns_last_steps_write_the_adaptive_profile_and_verify_its_run(sim_host_process: HostProcess, tmp_path: Path) -> None:
    """write-profile writes what `w` writes (the profile beside pivot.toml, SGLang's config uploaded to the host);
    verify says whether the adaptive profile's run kept each parent's gain, and refuses a run that is not one."""
    from tests.fixtures_runs import BASELINE, EAGLE3, write_run

    campaign = sim_host_process.root / "campaign"
    write_run(campaign, "base", "demo-baseline", BASELINE, speculative=False)
    write_run(campaign, "spec", "demo-eagle3", EAGLE3, speculative=True)
    kept = {c: (EAGLE3[c] if c == 1 else BASELINE[c]) for c in BASELINE}
    write_run(campaign, "adaptive", "demo-eagle3-adaptive", kept, speculative=True, measured_from=["base", "spec"])
    path = tmp_path / "rb.toml"
    path.write_text(
        '[[tasks]]\ncontent = "Write it"\naction = "write-profile base spec"\n'
        '[[tasks]]\ncontent = "Verify it"\naction = "verify adaptive"\n'
        '[[tasks]]\ncontent = "Verify the baseline"\naction = "verify base"\n'
    )
    pivot = [sys.executable, "-m", "console", "--config", str(sim_host_process.config_path)]
    result = subprocess.run([*pivot, "run", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    tasks = TaskList(campaign).load().tasks
    assert [t.status for t in tasks] == ["completed", "completed", "in_progress"]
    assert (tasks[0].result or "").startswith("wrote profile demo-eagle3-adaptive to ")
    written = sim_host_process.config_path.parent / "profiles" / "demo-eagle3-adaptive.toml"
    assert 'measured_from = [\n    "base",\n    "spec",\n]' in written.read_text()
    uploaded = list((sim_host_process.root / "home" / ".pivot").rglob("demo-eagle3-adaptive*.json"))
    assert len(uploaded) == 1  # SGLang's config, on the host, where the profile's flag points
    assert tasks[1].result == (
        "adaptive (demo-eagle3-adaptive) keeps the gain of spec (demo-eagle3) at C ≤ 1, matches base (demo-baseline) at C ≥ 2"
    )
    assert tasks[2].result == "failed: base is not a run of an adaptive profile pivot wrote: nothing to verify"

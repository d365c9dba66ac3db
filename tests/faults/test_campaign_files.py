"""Issue 21, G and F: files of the campaign are data, bounded, and named when wrong; an action over a link that drops
says each target's fate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from console.actions.campaign import ActionFailed, CampaignActions
from console.config import HostSpec
from console.gpu.telemetry import RemoteTelemetry
from console.remote.errors import Disconnected
from console.settings import SweepSettings


def pivot(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}, cwd=cwd
    )


def test_a_jump_loop_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "pivot.toml").write_text('[hosts.a]\nhostname = "a"\njump = "b"\n[hosts.b]\nhostname = "b"\njump = "a"\n')
    done = pivot("--config", str(tmp_path / "pivot.toml"), "config", "validate")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "hosts.a.jump: a jump loop: a -> b -> a" in done.stderr


def test_an_extends_chain_too_deep_is_one_line_not_a_recursion_error(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "p0.toml").write_text('launcher = "x"\nmodel_path = "/m"\n')
    for i in range(1, 1000):
        (profiles / f"p{i}.toml").write_text(f'extends = "p{i - 1}"\n')
    (tmp_path / "pivot.toml").write_text(f'profiles_dir = "{profiles}"\n')
    done = pivot("--config", str(tmp_path / "pivot.toml"), "profiles", env={"COLUMNS": "400"})
    assert "RecursionError" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert "a chain of more than 16 profiles" in done.stdout


@pytest.mark.parametrize(("value", "said"), [("NaN", "is nan"), ("Infinity", "is inf"), ("-5", "is negative")])
def test_an_import_of_nonsense_numbers_is_refused_naming_the_line(tmp_path: Path, value: str, said: str) -> None:
    line = '{"max_concurrency": 4, "completed": 16, "duration": 10.0, "output_throughput": ' + value + ', "mean_tpot_ms": 10.0}\n'
    (tmp_path / "old.jsonl").write_text(line)
    (tmp_path / "pivot.toml").write_text(f'campaign_dir = "{tmp_path / "campaign"}"\n')
    done = pivot("--config", str(tmp_path / "pivot.toml"), "runs", "import", str(tmp_path / "old.jsonl"))
    assert done.returncode == 2 and "old.jsonl:1: not a sglang bench_serving result" in done.stderr and said in done.stderr
    assert not (tmp_path / "campaign" / "runs").exists() or not any((tmp_path / "campaign" / "runs").iterdir())


def test_pivot_config_must_be_a_small_regular_utf8_file(tmp_path: Path) -> None:
    done = pivot("config", "validate", env={"PIVOT_CONFIG": "/dev/zero"})
    assert done.returncode == 2 and "/dev/zero: not a regular file" in done.stderr
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody writes to it: opening it for reading would wait for a writer for ever
    done = pivot("config", "validate", env={"PIVOT_CONFIG": str(fifo)})
    assert done.returncode == 2 and f"{fifo}: not a regular file" in done.stderr
    done = pivot("--config", str(fifo), "config", "validate")
    assert done.returncode == 2 and f"{fifo}: not a regular file" in done.stderr
    (tmp_path / "bad.toml").write_bytes(b'default_host = "gpu\xff1"\n')
    done = pivot("config", "validate", env={"PIVOT_CONFIG": str(tmp_path / "bad.toml")})
    assert done.returncode == 2 and f"{tmp_path / 'bad.toml'}: not UTF-8: byte 0xff at offset 19" in done.stderr


@pytest.mark.parametrize("setting", ["api_key_env=HOME", "prompt_file=/etc/passwd", "prompts=/etc/passwd"])
async def test_a_runbook_may_not_send_a_secret_or_a_local_file(setting: str) -> None:
    actions = SimpleNamespace(cfg=SimpleNamespace(sweep=SweepSettings()))
    with pytest.raises(ActionFailed, match=f"a runbook may not set {setting.split('=')[0]}"):
        await CampaignActions.do_sweep(actions, setting)  # type: ignore[arg-type]


async def test_a_kill_over_a_dropping_link_says_each_targets_fate() -> None:
    class Dropping:
        host = "gpu1"

        async def run(self, *args: object, **kw: object) -> None:
            raise Disconnected("gpu1", "connection lost while running sh")

    telemetry = RemoteTelemetry(Dropping(), HostSpec(name="gpu1"))  # type: ignore[arg-type]
    outcomes = await telemetry.kill(["101:5:group", "102:6:group", "103:7:group"], 1.0)
    assert [(o["pid"], o["outcome"]) for o in outcomes] == [(101, "unknown"), (102, "unknown"), (103, "unknown")]
    assert all("link was lost" in o["detail"] for o in outcomes)

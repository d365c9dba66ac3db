"""Item 14: bad input and broken files give one line naming the file, key or argument, a non-zero exit, and no
traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.sim import state
from console.sim.host import SimHost
from tests.faults.conftest import pivot, run_pivot


def one_line_error(result: subprocess.CompletedProcess[str] | tuple[int, str, str], *names: str) -> str:
    status, err = (result.returncode, result.stderr) if isinstance(result, subprocess.CompletedProcess) else (result[0], result[2])
    assert status != 0 and "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pivot: "), err
    assert all(name in lines[0] for name in names), lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["tasks", "delete"], ["tasks delete", "task number"]),
        (["tasks", "start", "abc"], ["tasks start", "'abc'"]),
        (["tasks", "done"], ["tasks done", "task numbers"]),
        (["tasks", "delete", "7"], ["no task 7"]),
        (["tasks", "import", "nope.json"], ["nope.json"]),
        (["events", "--export", "nodir/x"], ["nodir/x"]),
    ],
    ids=[
        "delete-without-number",
        "start-abc",
        "done-without-numbers",
        "delete-missing-task",
        "import-missing-file",
        "export-into-missing-dir",
    ],
)
def test_bad_arguments_are_one_line(campaign_config: Path, args: list[str], names: list[str]) -> None:
    one_line_error(run_pivot(campaign_config, *args, cwd=campaign_config.parent), *names)


def test_an_import_nested_too_deeply_or_not_utf8_is_one_line(campaign_config: Path) -> None:
    deep = campaign_config.parent / "deep.json"
    deep.write_text("[" * 100_000)
    one_line_error(run_pivot(campaign_config, "tasks", "import", str(deep)), "deep.json", "nested too deeply")
    latin = campaign_config.parent / "latin.json"
    latin.write_bytes(b'{"todos": [{"content": "caf\xe9"}]}')
    one_line_error(run_pivot(campaign_config, "tasks", "import", str(latin)), "latin.json", "not UTF-8")


@pytest.mark.parametrize(
    ("content", "why"),
    [(b"bad \xff\xfe", "not UTF-8: byte 0xff at offset 4"), (b"[" * 100_000, "nested too deeply")],
    ids=["not-utf8", "nested"],
)
def test_a_task_file_that_does_not_load_is_named_and_set_aside(campaign_config: Path, content: bytes, why: str) -> None:
    campaign = campaign_config.parent / "campaign"
    campaign.mkdir()
    (campaign / "tasks.json").write_bytes(content)
    listed = run_pivot(campaign_config, "tasks", "list")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert f"tasks.json: not a task list ({why}); kept aside as tasks.json.corrupt-" in listed.stdout
    [aside] = campaign.glob("tasks.json.corrupt-*")
    assert aside.read_bytes() == content and not (campaign / "tasks.json").exists()  # nothing lost


@pytest.fixture
def read_only_campaign() -> Iterator[tuple[list[str], Path]]:
    """A campaign this user cannot write to. Root writes anywhere: it runs pivot as nobody in a user namespace."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        if not shutil.which("unshare") or subprocess.run(["unshare", "--user", "true"]).returncode != 0:
            pytest.skip("running as root without user namespaces: no read-only campaign to be had")
        prefix = ["unshare", "--user"]
    with tempfile.TemporaryDirectory(prefix="pivot-ro-") as root:  # under /tmp: nobody can reach it
        top = Path(root)
        top.chmod(0o755)
        (top / "campaign").mkdir()
        (top / "campaign" / "tasks.json").write_text('{"tasks": [{"content": "half')
        (top / "pivot.toml").write_text('campaign_dir = "campaign"\n')
        (top / "campaign").chmod(0o555)
        try:
            yield prefix, top
        finally:
            (top / "campaign").chmod(0o755)


def test_a_corrupt_list_in_a_read_only_campaign_is_one_line(read_only_campaign: tuple[list[str], Path]) -> None:
    prefix, top = read_only_campaign
    result = subprocess.run(
        [*prefix, sys.executable, "-m", "console", "--config", str(top / "pivot.toml"), "tasks", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=top,
        env={**os.environ, "HOME": str(top)},
    )
    line = one_line_error(result, "tasks.json: not a task list", "cannot set it aside (Permission denied)")
    assert "Traceback" not in result.stdout and line
    assert (top / "campaign" / "tasks.json").read_text() == '{"tasks": [{"content": "half'  # left as it was


def test_a_missing_identity_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "pivot.toml"
    missing = tmp_path / "keys" / "id_gpu"
    config.write_text(f'[hosts.gpu]\nhostname = "127.0.0.1"\nport = 1\nidentity = "{missing}"\n')
    one_line_error(run_pivot(config, "ping"), str(missing), "hosts.gpu.identity", "No such file or directory")


async def test_end_of_input_at_the_kill_and_trust_prompts_is_a_no(sim: SimHost, tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        state.claim(sim.sim, 0, 20_000, holder.pid)
        status, out, err = await pivot(sim.config_path, "kill", str(holder.pid), stdin=b"")
        assert status == 1 and "nothing was killed" in out and "Traceback" not in err, out + err
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = tmp_path / "pivot.toml"
    config.write_text(
        "\n".join(
            f'known_hosts = "{empty}"' if line.startswith("known_hosts") else line for line in sim.config_path.read_text().splitlines()
        )
    )
    status, out, err = await pivot(config, "trust", "demo", stdin=b"")
    assert status == 1 and "not added" in out and "Traceback" not in err and empty.read_text() == "", out + err


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_that_is_not_utf8_gets_text_it_can_print(tmp_path: Path, encoding: str) -> None:
    """PYTHONIOENCODING=ascii or latin-1 (issue 34, M4): `compare` and `runs show` printed only `'ascii' codec can't
    encode character '\\xb1'`; now the whole output, with what the encoding lacks in plain letters."""
    from tests.fixtures_runs import BASELINE, EAGLE3, write_run

    write_run(tmp_path / "campaign", "base", "baseline", BASELINE, speculative=False)
    write_run(tmp_path / "campaign", "spec", "eagle3", EAGLE3, speculative=True)
    (tmp_path / "pivot.toml").write_text(f'campaign_dir = "{tmp_path / "campaign"}"\n')
    for args in (["compare", "previous", "last"], ["runs", "show", "last"]):
        done = subprocess.run(
            [sys.executable, "-m", "console", "--config", str(tmp_path / "pivot.toml"), *args],
            capture_output=True,
            timeout=60,
            env={**os.environ, "PYTHONIOENCODING": encoding},
        )
        assert done.returncode == 0 and done.stderr == b"", done.stderr
        text = done.stdout.decode(encoding)
        assert ("+-" if encoding == "ascii" else "±") in text and "codec" not in text, text


def test_tasks_add_on_a_campaign_it_cannot_write_says_nothing_was_kept(read_only_campaign: tuple[list[str], Path]) -> None:
    """`tasks add` on a full or read-only campaign (issue 34, L3) said `the change is kept here, not on disk`, from a
    command that then exits: nothing is kept anywhere."""
    prefix, top = read_only_campaign
    (top / "campaign" / "tasks.json").write_text('{"tasks": []}')
    result = subprocess.run(
        [*prefix, sys.executable, "-m", "console", "--config", str(top / "pivot.toml"), "tasks", "add", "Sweep the baseline"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=top,
        env={**os.environ, "HOME": str(top)},
    )
    assert result.returncode != 0 and "kept here" not in result.stderr
    assert one_line_error(result, "tasks.json: cannot save (", "): the change is not on disk")
    assert (top / "campaign" / "tasks.json").read_text() == '{"tasks": []}'

"""Issue 21, D: telemetry that is partly wrong is said to be partial, never read as all right. The agent is run as a
host runs it, with an nvidia-smi of the test's own on its PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from console.gpu.format import idle_line
from console.gpu.samples import AgentError, Sample, parse_line
from tests.conftest import toasts

ROW = "{i}, GPU-{i:04d}, NVIDIA H200, {used}, 143771, 0, 30, 70.0, 700.0"


def agent(
    tmp_path: Path, gpu_out: str, app_out: str = "", status: int = 0, stderr: str = "", pidfile: Path | None = None
) -> Sample | AgentError:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "gpu.txt").write_text(gpu_out)
    (tmp_path / "app.txt").write_text(app_out)
    (bin_dir / "nvidia-smi").write_text(
        '#!/bin/sh\ncase "$1" in --query-gpu=*) cat ' + str(tmp_path / "gpu.txt") + "; echo " + repr(stderr) + " >&2; "
        f"exit {status};; *) cat " + str(tmp_path / "app.txt") + ";; esac\n"
    )
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    server = ["--server-pidfile", str(pidfile)] if pidfile else []
    out = subprocess.run(
        [sys.executable, "-m", "console.gpu.agent", "sample", "--once", "--source", "nvidia-smi", *server],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    ).stdout.splitlines()
    return parse_line(out[-1], "nvidia-smi")  # type: ignore[return-value]


def test_an_answer_without_a_usable_row_is_not_idle(tmp_path: Path) -> None:
    sample = agent(tmp_path, "garbage without commas\n")
    assert isinstance(sample, AgentError) and "without a GPU row" in sample.message


def test_a_gpu_fallen_off_the_bus_leaves_the_others_and_is_said(tmp_path: Path) -> None:
    rows = "\n".join(ROW.format(i=i, used=0) for i in range(1, 8)) + "\n"
    sample = agent(tmp_path, rows, status=15, stderr="Unable to determine the device handle for GPU0000:1B:00.0: GPU is lost.")
    assert isinstance(sample, Sample) and [g.index for g in sample.gpus] == list(range(1, 8))
    assert "GPU is lost" in sample.problems[0] and not sample.idle(1024)
    assert idle_line(sample, 1024).startswith("cannot tell whether all GPUs are idle: nvidia-smi: Unable to determine")


def test_a_bad_process_row_is_dropped_and_said(tmp_path: Path) -> None:
    sample = agent(tmp_path, ROW.format(i=0, used=80000) + "\n", "abc, 80000, GPU-0000\n")
    assert isinstance(sample, Sample) and len(sample.gpus) == 1 and not sample.procs
    assert any("process row" in p for p in sample.problems)


def test_a_malformed_row_on_the_wire_drops_that_row_only() -> None:
    line = json.dumps(
        {
            "type": "sample",
            "t": 1.0,
            "gpus": [{"index": "[N/A]"}, {"index": 1, "uuid": "u", "name": "H200"}],
            "procs": [{"pid": "x"}, {"pid": 42, "gpu": 1}],
            "server": None,
        }
    )
    sample = parse_line(line)
    assert isinstance(sample, Sample) and [g.index for g in sample.gpus] == [1] and [p.pid for p in sample.procs] == [42]
    assert len(sample.problems) == 2 and not sample.idle(1024)


def test_a_reused_pid_in_the_pid_file_is_not_the_server(tmp_path: Path) -> None:
    """Issue 21, A: server.pid names a pid another GPU job now has (the server ended; the pid came round). That job is
    a stray (K offers it), not "the server": the agent takes the pid file's process for the server only when the
    record beside it names that pid at that process's start time."""
    from console.sim.state import proc_start_ticks

    job = subprocess.Popen(["sleep", "120"], start_new_session=True)  # its own group: it would pass for a server
    try:
        workdir = tmp_path / "work"
        workdir.mkdir()
        (workdir / "server.pid").write_text(f"{job.pid}\n")
        ticks = proc_start_ticks(job.pid)
        assert ticks is not None  # the job runs
        record = {"profile": "baseline", "argv": ["serve"], "pid": job.pid, "start_ticks": ticks + 1, "port": 30000}
        gpu, app = ROW.format(i=0, used=80000) + "\n", f"{job.pid}, 80000, GPU-0000\n"
        for written, server in ((record, False), ({**record, "start_ticks": ticks}, True), (None, False)):
            (workdir / "server.json").unlink(missing_ok=True)
            if written is not None:
                (workdir / "server.json").write_text(json.dumps(written))
            sample = agent(tmp_path, gpu, app, pidfile=workdir / "server.pid")
            assert isinstance(sample, Sample) and [p.pid for p in sample.procs] == [job.pid]
            assert [p.pid for p in sample.stray] == ([] if server else [job.pid]), written
    finally:
        job.kill()
        job.wait()


def test_command_lines_are_cut_at_the_agent(tmp_path: Path) -> None:
    """Issue 21, D: GPU processes with long command lines made a sample longer than the console's line limit (its GPU
    pane froze): each is cut to MAX_CMD at the agent."""
    from console.gpu.agent.procs import MAX_CMD

    long = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *["x" * 1000] * 50])
    try:
        sample = agent(tmp_path, ROW.format(i=0, used=80000) + "\n", f"{long.pid}, 80000, GPU-0000\n")
        assert isinstance(sample, Sample) and [p.pid for p in sample.procs] == [long.pid]
        assert len(sample.procs[0].cmd) == MAX_CMD and sample.procs[0].cmd.endswith("x")
    finally:
        long.kill()
        long.wait()


async def test_a_warning_while_the_console_is_up_is_a_notification_not_text_over_the_screen(tmp_path: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    """Issue 21, D: "agent line skipped" warnings were printed over the Textual screen."""
    import logging

    from tests.test_app import canned_app

    app = canned_app(tmp_path)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        capfd.readouterr()
        logging.getLogger("console.gpu.telemetry").warning("gpu1: agent line skipped: not JSON")
        await pilot.pause()
        assert any("agent line skipped" in m for m in toasts(app))
        assert "agent line skipped" not in capfd.readouterr().err

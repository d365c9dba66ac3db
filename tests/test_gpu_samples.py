"""Parsing of the agent's lines and of both sources' raw output."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from console.gpu import agent
from console.gpu.format import bar, flags, idle_line
from console.gpu.kill import ReleaseWatch, plan_kill
from console.gpu.samples import AgentError, Hello, Sample, SampleParseError, parse_line

GPU = {
    "index": 0,
    "uuid": "GPU-0",
    "name": "NVIDIA H200",
    "mem_used_mib": 1000,
    "mem_total_mib": 143771,
    "util_pct": 50,
    "temp_c": 40,
    "power_w": 300.5,
    "power_limit_w": 700,
}
PROC = {
    "pid": 4242,
    "gpu": 0,
    "mem_mib": 1000,
    "visible": True,
    "ppid": 1,
    "pgid": 4242,
    "user": "ml",
    "state": "S",
    "cmd": "python -m sglang.launch_server",
    "start": 1.0,
    "start_ticks": 99,
    "parent_gone": True,
    "leader_gone": False,
}


def sample_line(**kw: object) -> str:
    return json.dumps({"type": "sample", "v": 1, "t": 10.0, "gpus": [GPU], "procs": [PROC], "server": None, **kw})


def test_hello_sample_and_error_lines() -> None:
    hello = parse_line('{"type":"hello","v":1,"source":"nvitop","pid":7,"host":"gpu1","interval":0.5}')
    assert hello == Hello("nvitop", 7, "gpu1", 0.5, 1) and not hello.outdated
    sample = parse_line(sample_line(), "nvitop")
    assert isinstance(sample, Sample) and sample.source == "nvitop"
    assert sample.gpus[0].mem_fraction == pytest.approx(1000 / 143771)
    proc = sample.procs[0]
    assert proc.orphan and proc.stray and not proc.zombie and proc.key == (4242, 99)
    assert parse_line('{"type":"error","v":1,"kind":"no-driver","message":"no NVML"}') == AgentError("no-driver", "no NVML")


def test_an_old_agent_is_told_apart() -> None:
    hello = parse_line('{"type":"hello","source":"nvidia-smi","pid":7,"host":"h","interval":1}')
    assert isinstance(hello, Hello) and hello.version == 0 and hello.outdated


@pytest.mark.parametrize("line", [sample_line()[:40], "", "[1, 2]", '{"type":"sample","gpus":7,"procs":[]}', '{"type":"telepathy"}'])
def test_truncated_or_malformed_lines_are_refused(line: str) -> None:
    with pytest.raises(SampleParseError):
        parse_line(line)


def test_missing_fields_and_na_values_become_unknown() -> None:
    gpu = {"index": 1, "uuid": "GPU-1", "name": "H200", "mem_used_mib": "[N/A]", "power_w": "[Not Supported]"}
    sample = parse_line(json.dumps({"type": "sample", "gpus": [gpu], "procs": [{"pid": 5, "gpu": 1}]}))
    assert isinstance(sample, Sample)
    g = sample.gpus[0]
    assert (g.mem_used_mib, g.mem_total_mib, g.power_w, g.temp_c, g.mem_fraction) == (None, None, None, None, None)
    assert sample.procs[0].user == "?" and sample.procs[0].start_ticks is None
    assert bar(None, 6).strip() == "?"


def test_processes_of_the_managed_server_are_not_stray() -> None:
    member = dict(PROC, pid=10, pgid=4242)
    leader_alive = parse_line(sample_line(procs=[member], server={"pid": 4242, "alive": True}))
    leader_dead = parse_line(sample_line(procs=[member], server={"pid": 4242, "alive": False}))
    assert isinstance(leader_alive, Sample) and isinstance(leader_dead, Sample)
    assert not leader_alive.procs[0].stray and "server" in flags(leader_alive.procs[0])
    assert leader_dead.procs[0].stray and "stray" in flags(leader_dead.procs[0])


def _fake_smi(tmp_path: Path, gpu_csv: str, app_csv: str, status: int = 0) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text(f"""#!/bin/sh
case "$1" in
  --query-gpu=*) printf '%s' '{gpu_csv}' ;;
  --query-compute-apps=*) printf '%s' '{app_csv}' ;;
esac
exit {status}
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_nvidia_smi_output_with_na_and_a_truncated_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_smi(
        tmp_path,
        "0, GPU-a, NVIDIA H200, 81000, 143771, 97, 61, [N/A], 700.00\n1, GPU-b, NVIDIA H200, 5, 143771\n",
        f"{os.getpid()}, 81000, GPU-a\n12345678, [N/A], GPU-zz\n",
    )
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    raw = agent.collect(agent.SmiSource(), agent.boot_time(), None)
    sample = parse_line(json.dumps(raw), "nvidia-smi")
    assert isinstance(sample, Sample)
    assert [g.index for g in sample.gpus] == [0]  # the truncated row is skipped, not guessed
    assert sample.gpus[0].power_w is None and sample.gpus[0].util_pct == 97
    mine, ghost = sample.procs
    assert mine.pid == os.getpid() and mine.visible and mine.gpu == 0 and mine.start_ticks is not None
    assert not ghost.visible and ghost.gpu is None and "host-pid" in flags(ghost)  # a host PID from NVML


def test_nvidia_smi_without_a_driver_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text('#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\nexit 9\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with pytest.raises(agent.NoDriver, match="couldn't communicate with the NVIDIA driver"):
        agent.SmiSource().sample()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(agent.NoDriver, match="nvidia-smi not found"):
        agent.SmiSource().sample()


class FakeProcess:
    def __init__(self, mib: int):
        self.mib = mib

    def gpu_memory(self) -> int:
        return self.mib << 20


class FakeDevice:
    """What NvitopSource uses of nvitop.Device, over a fake NVML."""

    gpus: list[dict] = []
    missing_driver = False

    def __init__(self, d: dict):
        self.d = d
        self.index = d["index"]

    @classmethod
    def count(cls) -> int:
        if cls.missing_driver:
            from nvitop import libnvml

            raise libnvml.NVMLError_LibraryNotFound()
        return len(cls.gpus)

    @classmethod
    def all(cls) -> list[FakeDevice]:
        return [cls(d) for d in cls.gpus]

    def uuid(self) -> str:
        return self.d["uuid"]

    def name(self) -> str:
        return "NVIDIA H200"

    def memory_used(self) -> int:
        return self.d["used_mib"] << 20

    def memory_total(self) -> int:
        return 143771 << 20

    def gpu_utilization(self) -> int:
        return 42

    def temperature(self) -> int:
        return 55

    def power_usage(self) -> int:
        return 312_000  # mW

    def power_limit(self) -> int:
        return 700_000

    def processes(self) -> dict[int, FakeProcess]:
        return self.d["procs"]


def test_nvitop_path_against_a_fake_nvml() -> None:
    source = agent.NvitopSource()
    FakeDevice.gpus = [
        {"index": 0, "uuid": "GPU-x", "used_mib": 2048, "procs": {os.getpid(): FakeProcess(2048)}},
        {"index": 1, "uuid": "GPU-y", "used_mib": 0, "procs": {}},
    ]
    FakeDevice.missing_driver = False
    source.Device = FakeDevice
    sample = parse_line(json.dumps(agent.collect(source, agent.boot_time(), None)), "nvitop")
    assert isinstance(sample, Sample)
    g0 = sample.gpus[0]
    assert (g0.mem_used_mib, g0.power_w, g0.power_limit_w, g0.util_pct, g0.temp_c) == (2048, 312, 700, 42, 55)
    assert sample.procs[0].pid == os.getpid() and sample.procs[0].mem_mib == 2048 and sample.procs[0].gpu == 0
    FakeDevice.missing_driver = True
    with pytest.raises(agent.NoDriver, match="no NVIDIA driver here"):
        source.sample()


def test_a_gpu_that_disappears_is_not_invented() -> None:
    two = parse_line(sample_line(gpus=[GPU, dict(GPU, index=1, uuid="GPU-1")]))
    one = parse_line(sample_line(gpus=[dict(GPU, index=1, uuid="GPU-1")], procs=[]))
    assert isinstance(two, Sample) and isinstance(one, Sample)
    assert [g.index for g in one.gpus] == [1]
    watch = ReleaseWatch(plan_kill(two, [4242], agent_pid=None))
    assert watch.update(one) == [f"GPU 0: {1000 / 1024:.1f} GiB released in {watch.released[0]:.1f} s"]


def test_kill_plan_refuses_pid_1_the_agent_and_unlisted_processes() -> None:
    sample = parse_line(sample_line(procs=[PROC, dict(PROC, pid=77, start_ticks=5)]))
    assert isinstance(sample, Sample)
    plan = plan_kill(sample, [1, 77, 4242, 999], agent_pid=77)
    assert [p.pid for p in plan.targets] == [4242]
    reasons = {r.pid: r.reason for r in plan.refused}
    assert "PID 1" in reasons[1] and "own telemetry agent" in reasons[77] and "not in the GPU process list" in reasons[999]
    assert plan.agent_targets() == ["4242:99:group"]


def test_a_zombies_parent_may_be_offered_although_it_holds_no_memory() -> None:
    zombie = dict(PROC, pid=50, state="Z", ppid=40, parent_start_ticks=7, parent_cmd="sglang::scheduler_TP3")
    sample = parse_line(sample_line(procs=[zombie]))
    assert isinstance(sample, Sample)
    plan = plan_kill(sample, [40], agent_pid=None)
    assert [(p.pid, p.start_ticks, p.cmd) for p in plan.targets] == [(40, 7, "sglang::scheduler_TP3")]


def test_idle_line_says_idle_or_what_holds_memory() -> None:
    busy = parse_line(sample_line())
    idle = parse_line(sample_line(gpus=[dict(GPU, mem_used_mib=3)], procs=[]))
    assert isinstance(busy, Sample) and isinstance(idle, Sample)
    assert idle_line(idle, 1024) == "all GPUs idle (each below 1.0 GiB)"
    assert idle_line(busy, 512) == "GPU 0 holds 1.0 GiB (pid 4242)"


def test_a_malformed_gpu_row_is_dropped_and_said_not_the_whole_sample() -> None:
    sample = parse_line('{"type":"sample","gpus":[{"index":"zero"}],"procs":[]}')
    assert isinstance(sample, Sample) and not sample.gpus and "a GPU row was not read" in sample.problems[0]


def test_local_gpus_without_nvidias_library_says_there_is_no_driver() -> None:
    """`pivot --local gpus` on a machine without NVIDIA's library read `NVML Shared Library Not Found` (issue 36)."""
    import ctypes.util
    import subprocess
    import sys

    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("this machine has NVIDIA's library")
    done = subprocess.run([sys.executable, "-m", "console", "--local", "gpus"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and done.stderr.strip().endswith("no NVIDIA driver here: NVIDIA's library (libnvidia-ml) is not installed")

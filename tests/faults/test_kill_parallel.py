"""Kills run in parallel (issue 34, M6): six processes that ignore SIGTERM took six graces one after another (38.5 s),
500 went at about one a second. Every target is signalled at once, SIGKILL after one grace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from console.gpu.agent import kill_all
from console.gpu.agent.procs import proc_stat
from tests.conftest import wait_until

# On SIGTERM: how many of its siblings still run (not ended, not zombies); it goes on ignoring the signal.
STUBBORN = """
import os, signal, sys, time
out = sys.argv[1]
def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
def on_term(*_):
    with open(out + ".pids") as f:
        pids = [int(p) for p in f.read().split()]
    with open(out, "a") as f:
        f.write("%d %d\\n" % (os.getpid(), sum(map(alive, pids))))
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_six_processes_that_ignore_sigterm_are_all_signalled_at_once(tmp_path: Path) -> None:
    out = tmp_path / "terms"
    procs = [subprocess.Popen([sys.executable, "-c", STUBBORN, str(out)], stdout=subprocess.PIPE, text=True) for _ in range(6)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        (tmp_path / "terms.pids").write_text(" ".join(str(p.pid) for p in procs))
        targets = []
        for proc in procs:
            stat = proc_stat(proc.pid)
            assert stat is not None
            targets.append((proc.pid, int(stat[19]), "single"))
        results = list(kill_all(targets, 1.0))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert sorted(r["pid"] for r in results) == sorted(p.pid for p in procs)
    assert all(r["outcome"] == "exited" and r["signals"] == ["TERM", "KILL"] for r in results), results
    assert all(r["detail"].startswith("ended by SIGKILL") for r in results), results
    # each saw all six alive when its SIGTERM came: none was killed before the last had been asked to end
    seen = [line.split() for line in out.read_text().splitlines()]
    assert len(seen) == 6 and all(alive == "6" for _, alive in seen), seen


def test_an_interrupted_kill_is_logged_and_the_host_finishes_it(tmp_path: Path) -> None:
    """Ctrl-C 12 s into `kill --stray` of 254 processes (issue 34, M7): exit 130, no line about those killed, no kill
    event. The console logs the kill as interrupted; the agent on the host goes on to the end with nobody reading."""
    import asyncio
    import os
    import signal
    from types import SimpleNamespace

    from console.actions import kill
    from console.events import EventLog
    from console.gpu.kill import KillPlan
    from console.gpu.samples import GpuProcess

    started = asyncio.Event()

    async def slow_kill(targets: list[str], grace_s: float) -> list[dict]:
        started.set()
        await asyncio.sleep(3600)
        return []

    log = EventLog(tmp_path)
    session = SimpleNamespace(
        config=SimpleNamespace(kill_grace_s=5.0), telemetry=SimpleNamespace(kill=slow_kill), events=log, via="cli", host_label="demo"
    )
    plan = KillPlan((GpuProcess(pid=4242, gpu=0, mem_mib=1024.0, user="u", state="S", cmd="python", start_ticks=1),), ())

    async def interrupted() -> None:
        task = asyncio.create_task(kill.kill(session, plan))  # type: ignore[arg-type]
        await started.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(interrupted())
    [event] = log.read()
    assert event["kind"] == "kill" and event["pids"] == [4242]
    assert event["outcomes"][0]["outcome"] == "unknown" and "the host finishes the kill" in event["outcomes"][0]["detail"]

    # the agent's side: its reader gone mid-kill (and a SIGHUP), it still ends its target
    termed = tmp_path / "termed"
    code = (
        "import signal,sys,time\n"
        f"signal.signal(signal.SIGTERM, lambda *_: open({str(termed)!r}, 'w').close())\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(1)\n"
    )
    stubborn = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
    stat = proc_stat(stubborn.pid)
    assert stat is not None
    agent = subprocess.Popen(
        [sys.executable, "-m", "console.gpu.agent", "kill", "--grace", "3", f"{stubborn.pid}:{stat[19]}:single"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )

    def terming() -> bool:  # the kill is under way: SIGTERM sent, SIGKILL to follow after the grace
        assert agent.poll() is None
        return termed.exists()

    wait_until(terming, timeout=60, what="the SIGTERM")
    assert agent.stdout is not None
    agent.stdout.close()  # the console went away
    os.kill(agent.pid, signal.SIGHUP)  # as its SSH channel's end may send
    assert stubborn.wait(timeout=60) == -signal.SIGKILL
    assert agent.wait(timeout=60) == 0

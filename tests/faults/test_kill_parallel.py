"""Kills run in parallel (issue 34, M6): six processes that ignore SIGTERM took six graces one after another (38.5 s),
500 went at about one a second. Every target is signalled at once, SIGKILL after one grace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from console.gpu.agent import kill_all
from console.gpu.agent.procs import proc_stat

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

"""`kill`: SIGTERM, then SIGKILL after a grace period, to a process whose start time still matches."""

from __future__ import annotations

import argparse
import os
import signal
import time
from typing import Any

from .procs import proc_stat
from .wire import emit


def _gone_or_zombie(pid: int, ticks: int) -> str | None:
    fields = proc_stat(pid)
    if fields is None or int(fields[19]) != ticks:
        return "exited"
    if fields[0] == "Z":
        return "zombie"
    return None


def _signal(pid: int, sig: int, group: bool) -> str | None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return "no-such-process"
    except PermissionError:
        return "permission-denied"
    return None


def kill_one(pid: int, ticks: int, mode: str, grace: float) -> dict:
    signals: list[str] = []
    result: dict[str, Any] = {"pid": pid, "signals": signals}
    fields = proc_stat(pid)
    if pid <= 1 or pid == os.getpid() or pid == os.getppid():
        return dict(result, outcome="refused", detail="pid %d is never signalled" % pid)
    if fields is None:
        return dict(result, outcome="no-such-process", detail="already gone")
    if int(fields[19]) != ticks:
        return dict(result, outcome="reused", detail="pid %d now belongs to another process: not signalled" % pid)
    result["ppid"] = int(fields[1])
    if fields[0] == "Z":
        return dict(result, outcome="zombie", detail="a zombie cannot be signalled; its parent %d must reap it" % int(fields[1]))
    group = mode == "group" and int(fields[2]) == pid
    result["group"] = group
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        error = _signal(pid, sig, group)
        result["signals"].append(signal.Signals(sig).name[3:])
        if error:
            return dict(result, outcome=error, detail="%s: %s" % (signal.Signals(sig).name, error.replace("-", " ")))
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            state = _gone_or_zombie(pid, ticks)
            if state == "zombie":
                # it has exited; give its parent a moment to reap it before saying so
                reap_deadline = time.monotonic() + 1.0
                while state == "zombie" and time.monotonic() < reap_deadline:
                    time.sleep(0.05)
                    state = _gone_or_zombie(pid, ticks)
            if state:
                detail = "ended by SIG%s" % result["signals"][-1]
                if state == "zombie":
                    parent = proc_stat(pid)
                    detail += "; not yet reaped by its parent %s" % (parent[1] if parent else "?")
                return dict(result, outcome="exited", detail=detail)
            time.sleep(0.05)
    return dict(result, outcome="survived", detail="still running after SIGKILL (uninterruptible sleep?)")


def run_kill(args: argparse.Namespace) -> int:
    for target in args.targets:
        try:
            pid_s, ticks_s, mode = target.split(":")
            pid, ticks = int(pid_s), int(ticks_s)
        except ValueError:
            emit({"type": "kill", "target": target, "outcome": "refused", "detail": "malformed target"})
            continue
        emit(dict(kill_one(pid, ticks, mode, args.grace), type="kill"))
    return 0

"""`kill`: SIGTERM, then SIGKILL after a grace period, to a process whose start time still matches."""

from __future__ import annotations

import argparse
import os
import signal
import time
from typing import Any, Iterator

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


def _first_look(pid: int, ticks: int, mode: str) -> tuple[dict, bool | None]:
    """The target's result so far, and whether to signal its group (None: its fate is known already, unsignalled)."""
    result: dict[str, Any] = {"pid": pid, "signals": []}
    fields = proc_stat(pid)
    if pid <= 1 or pid == os.getpid() or pid == os.getppid():
        return dict(result, outcome="refused", detail="pid %d is never signalled" % pid), None
    if fields is None:
        return dict(result, outcome="no-such-process", detail="already gone"), None
    if int(fields[19]) != ticks:
        return dict(result, outcome="reused", detail="pid %d now belongs to another process: not signalled" % pid), None
    result["ppid"] = int(fields[1])
    if fields[0] == "Z":
        return dict(result, outcome="zombie", detail="a zombie cannot be signalled; its parent %d must reap it" % int(fields[1])), None
    result["group"] = mode == "group" and int(fields[2]) == pid
    return result, result["group"]


REAP_S = 1.0  # a target seen a zombie: its parent's moment to reap it before it is said so


def kill_all(targets: list[tuple[int, int, str]], grace: float) -> Iterator[dict]:
    """Every target signalled at once: SIGTERM, then SIGKILL to those still there after one grace; each result as its
    fate is known (so six that ignore SIGTERM take one grace, not six)."""
    pending: dict[int, tuple[dict, int, bool]] = {}
    zombie_since: dict[int, float] = {}
    for pid, ticks, mode in targets:
        result, group = _first_look(pid, ticks, mode)
        if group is None:
            yield result
        else:
            pending[pid] = (result, ticks, group)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        for pid, (result, _ticks, group) in list(pending.items()):
            if pid in zombie_since:
                continue  # it has ended: its parent reaps it or not, no signal changes that
            error = _signal(pid, sig, group)
            result["signals"].append(signal.Signals(sig).name[3:])
            if error:
                del pending[pid]
                yield dict(result, outcome=error, detail="%s: %s" % (signal.Signals(sig).name, error.replace("-", " ")))
        deadline = time.monotonic() + wait
        while pending and time.monotonic() < deadline:
            for pid, (result, ticks, _group) in list(pending.items()):
                state = _gone_or_zombie(pid, ticks)
                if state == "zombie" and time.monotonic() - zombie_since.setdefault(pid, time.monotonic()) < REAP_S:
                    continue
                if state:
                    del pending[pid]
                    detail = "ended by SIG%s" % result["signals"][-1]
                    if state == "zombie":
                        parent = proc_stat(pid)
                        detail += "; not yet reaped by its parent %s" % (parent[1] if parent else "?")
                    yield dict(result, outcome="exited", detail=detail)
            time.sleep(0.05)
    for result, _ticks, _group in pending.values():
        yield dict(result, outcome="survived", detail="still running after SIGKILL (uninterruptible sleep?)")


def run_kill(args: argparse.Namespace) -> int:
    """Every target to its end even when the console goes (its Ctrl-C closes the channel): no signal of the link's
    stops a kill half done, and results nobody reads any more are dropped."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    targets = []
    for target in args.targets:
        try:
            pid_s, ticks_s, mode = target.split(":")
            targets.append((int(pid_s), int(ticks_s), mode))
        except ValueError:
            emit({"type": "kill", "target": target, "outcome": "refused", "detail": "malformed target"})
    for result in kill_all(targets, args.grace):
        try:
            emit(dict(result, type="kill"))
        except OSError:  # the console is gone: the kill goes on
            pass
    return 0

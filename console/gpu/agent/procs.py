"""What /proc says of a process: its state, parent, group, owner, command line and start time."""

from __future__ import annotations

import json
import os
import pwd

CLK_TCK = os.sysconf("SC_CLK_TCK")


def boot_time() -> float:
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


def proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [state, ppid, pgrp, ...]."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    fields = proc_stat(pid)
    return int(fields[19]) if fields else None


def proc_details(pid: int, btime: float) -> dict:
    fields = proc_stat(pid)
    if fields is None:
        # NVML reports host PIDs; inside a container they may not exist in our /proc
        return {"visible": False}
    ppid, pgid = int(fields[1]), int(fields[2])
    try:
        uid = os.stat("/proc/%d" % pid).st_uid
        user = pwd.getpwuid(uid).pw_name
    except (OSError, KeyError):
        user = "?"
    cmd = cmdline(pid)
    if not cmd:
        try:
            with open("/proc/%d/comm" % pid) as f:
                cmd = "[%s]" % f.read().strip()
        except OSError:
            cmd = "?"
    ticks = int(fields[19])
    details = {
        "visible": True,
        "ppid": ppid,
        "pgid": pgid,
        "user": user,
        "state": fields[0],
        "cmd": cmd,
        "start": round(btime + ticks / CLK_TCK, 2),
        "start_ticks": ticks,
        "cpu_s": round((int(fields[11]) + int(fields[12])) / CLK_TCK, 2),
        "parent_gone": ppid in (0, 1),
        "leader_gone": pgid != pid and proc_stat(pgid) is None,
    }
    if fields[0] == "Z":
        # a zombie goes only when its parent reaps it or dies: pin the parent so it can be offered
        parent = proc_stat(ppid)
        if parent is not None and ppid > 1:
            details["parent_start_ticks"] = int(parent[19])
            details["parent_cmd"] = cmdline(ppid)
    return details


MAX_CMD = 2048  # a command line is cut here: a sample of many processes with long arguments stays under the line limit


def cmdline(pid: int) -> str:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read(MAX_CMD * 4).replace(b"\0", b" ").decode("utf-8", "replace").strip()[:MAX_CMD]
    except OSError:
        return ""


def server_info(pidfile: str | None) -> dict | None:
    if not pidfile:
        return None
    try:
        with open(os.path.expanduser(pidfile)) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    fields = proc_stat(pid)
    # The record beside the pid file names the server's start time: a pid reused by another process is not the server,
    ticks = None
    try:
        with open(os.path.join(os.path.dirname(os.path.expanduser(pidfile)), "server.json")) as f:
            record = json.loads(f.read(262144))
        if isinstance(record, dict) and record.get("pid") == pid and isinstance(record.get("start_ticks"), int):
            ticks = record["start_ticks"]
    except (OSError, ValueError):
        pass
    # and a pid file alone (no record naming it) is not enough
    alive = fields is not None and fields[0] != "Z" and ticks is not None and fields[19] == str(ticks)
    return {"pid": pid, "alive": alive}

"""Checks for the server lifecycle: `port` (free to bind?) and `help` (the launcher's --help, cached)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess

from .procs import cmdline, proc_stat
from .wire import emit


def listener(port: int) -> dict | None:
    """The process listening on TCP `port` (this user's, whose /proc/PID/fd can be read): its pid, process group, start
    time and command line, from /proc/net/tcp{,6} and each process's socket descriptors; None when none is found."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add("socket:[%s]" % fields[9])
    if not inodes:
        return None
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % entry)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (entry, fd)) in inodes:
                    pid = int(entry)
                    fields = proc_stat(pid) or []
                    leader = int(fields[2]) if len(fields) > 2 and proc_stat(int(fields[2])) else pid
                    lead = proc_stat(leader) or []
                    try:
                        with open("/proc/%d/cmdline" % leader, "rb") as f:
                            argv = [a.decode("utf-8", "replace") for a in f.read(65536).split(b"\0") if a]
                    except OSError:
                        argv = []
                    # the server is the leader of the listener's process group: what a stop signals
                    return {
                        "pid": pid,
                        "leader": leader,
                        "start_ticks": int(lead[19]) if len(lead) > 19 else None,
                        "cmd": cmdline(leader),
                        "argv": argv,
                    }
            except OSError:
                continue
    return None


def run_port(args: argparse.Namespace) -> int:
    """Exit 0 when HOST:PORT can be bound (free), 1 when it is taken (and by which process, where it can be seen)."""
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
    # as servers do: connections of a stopped server lingering in TIME_WAIT do not make the port busy
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as e:
        emit({"type": "port", "free": False, "detail": e.strerror or str(e), "listener": listener(args.port)})
        return 1
    finally:
        sock.close()
    emit({"type": "port", "free": True})
    return 0


# Run by the launcher's own python for `python -m PACKAGE...`: the package's version and its __init__'s time. The
# interpreter's file does not change when the engine is upgraded; these do. find_spec of a top-level name does not
# import it (an engine's import can take a minute).
MODULE_VERSION = """import importlib.util, json, os, sys
try:
    from importlib.metadata import version
    v = version(sys.argv[1])
except Exception:
    v = None
spec = importlib.util.find_spec(sys.argv[1])
origin = spec.origin if spec is not None else None
print(json.dumps([v, origin, os.stat(origin).st_mtime if origin and os.path.exists(origin) else None]))
"""


def _module(launcher: list) -> str | None:
    """PACKAGE of `python ... -m PACKAGE.module`, else None."""
    for i, word in enumerate(launcher[1:-1], 1):
        if word == "-m":
            return launcher[i + 1].split(".")[0]
    return None


def _engine_version(launcher: list, program: str) -> str:
    module = _module(launcher)
    if module is None:
        return ""
    try:
        out = subprocess.run([program, "-c", MODULE_VERSION, module], capture_output=True, text=True, errors="replace", timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip()


def run_help(args: argparse.Namespace) -> int:
    """The launcher's --help, cached per launcher version: its argv, its program's mtime and size, and for
    `python -m PACKAGE` the package's version and file time (an upgraded engine is asked again)."""

    program = shutil.which(args.launcher[0]) or args.launcher[0]
    try:
        st = os.stat(program)
    except OSError as e:
        emit({"type": "help", "ok": False, "detail": "%s: %s" % (program, e.strerror)})
        return 1
    identity = [args.launcher, program, st.st_mtime, st.st_size, _engine_version(args.launcher, program)]
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]
    cache = os.path.join(args.cache_dir, key + ".txt")
    cached = os.path.exists(cache)
    if cached:
        with open(cache, encoding="utf-8", errors="replace") as f:
            text = f.read()
    else:
        try:
            out = subprocess.run(list(args.launcher) + ["--help"], capture_output=True, text=True, errors="replace", timeout=args.timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            emit({"type": "help", "ok": False, "detail": str(e)})
            return 1
        text = out.stdout + out.stderr
        if out.returncode != 0 or "--" not in text:
            emit({"type": "help", "ok": False, "detail": "--help exited %d: %s" % (out.returncode, text.strip()[-300:])})
            return 1
        os.makedirs(args.cache_dir, exist_ok=True)
        tmp = "%s.%d.tmp" % (cache, os.getpid())  # two agents asking at once (two starts' checks) each write their own
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, cache)
    emit({"type": "help", "ok": True, "cached": cached, "text": text})
    return 0

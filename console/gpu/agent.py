#!/usr/bin/env python3
"""pivot's telemetry agent: runs on the GPU host with the host's own python.

Standard library only (nvitop is used when the host's python can import it),
and Python 3.8 or newer, since it runs wherever the inference server runs.

    agent.py sample [--interval S] [--source auto|nvitop|nvidia-smi] [--server-pidfile PATH] [--once]
        First line: {"type": "hello", "v": 1, "source": ..., "pid": ..., "host": ...}
        Then one line per interval: {"type": "sample", "v": 1, "t": ..., "gpus": [...], "procs": [...], "server": ...}
        or {"type": "error", "v": 1, "kind": "no-driver" | "query-failed", "message": ...}, and it keeps trying.
        stdin is the SSH channel: at its end of file (the console closed the channel, or died and its connection
        with it) the agent exits, as it does at a write to a closed pipe.

    agent.py kill [--grace S] PID:START_TICKS:MODE ...
        MODE is "group" (signal the process group when the process leads one) or "single".
        SIGTERM, then SIGKILL after the grace period; prints one JSON result per target.
        A target whose start time no longer matches (a reused PID) is not signalled.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Any

VERSION = 1
CLK_TCK = os.sysconf("SC_CLK_TCK")
GPU_QUERY = "index,uuid,name,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw,power.limit"
APP_QUERY = "pid,used_memory,gpu_uuid"


class NoDriver(Exception):
    pass


def emit(obj: dict) -> None:
    obj.setdefault("v", VERSION)
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


# -- /proc ---------------------------------------------------------------------
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
    cmd = _cmdline(pid)
    if not cmd:
        try:
            with open("/proc/%d/comm" % pid) as f:
                cmd = "[%s]" % f.read().strip()
        except OSError:
            cmd = "?"
    ticks = int(fields[19])
    details = {
        "visible": True, "ppid": ppid, "pgid": pgid, "user": user, "state": fields[0], "cmd": cmd,
        "start": round(btime + ticks / CLK_TCK, 2), "start_ticks": ticks,
        "cpu_s": round((int(fields[11]) + int(fields[12])) / CLK_TCK, 2),
        "parent_gone": ppid in (0, 1),
        "leader_gone": pgid != pid and proc_stat(pgid) is None,
    }
    if fields[0] == "Z":
        # a zombie goes only when its parent reaps it or dies: pin the parent so it can be offered
        parent = proc_stat(ppid)
        if parent is not None and ppid > 1:
            details["parent_start_ticks"] = int(parent[19])
            details["parent_cmd"] = _cmdline(ppid)
    return details


def _cmdline(pid: int) -> str:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
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
    alive = fields is not None and fields[0] != "Z"
    return {"pid": pid, "alive": alive}


# -- sources -------------------------------------------------------------------
def _num(text: str) -> float | None:
    text = text.strip()
    if not text or text.startswith("[") or text in ("N/A", "Unknown Error"):
        return None  # [N/A], [Not Supported], [Unknown Error]
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return None


class SmiSource:
    name = "nvidia-smi"

    def _start(self, query: str, kind: str) -> subprocess.Popen:
        try:
            return subprocess.Popen(
                ["nvidia-smi", "--query-%s=%s" % (kind, query), "--format=csv,noheader,nounits"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
            )
        except FileNotFoundError:
            raise NoDriver("nvidia-smi not found on PATH: no NVIDIA driver on this host") from None

    def _rows(self, proc: subprocess.Popen) -> list[list[str]]:
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise RuntimeError("nvidia-smi did not answer within 10 s") from None
        if proc.returncode != 0:
            message = (stderr or stdout).strip().splitlines()
            text = message[0] if message else "exit status %d" % proc.returncode
            if "couldn't communicate with the NVIDIA driver" in text or "driver" in text.lower():
                raise NoDriver(text)
            raise RuntimeError("nvidia-smi: " + text)
        return [[c.strip() for c in line.split(",")] for line in stdout.splitlines() if line.strip()]

    def sample(self) -> tuple[list[dict], list[dict]]:
        # both queries at once: nvidia-smi takes 0.1-0.5 s a call, and this is the first sample's wait
        gpu_query = self._start(GPU_QUERY, "gpu")
        try:
            app_query = self._start(APP_QUERY, "compute-apps")
        except NoDriver:
            gpu_query.kill()
            gpu_query.communicate()
            raise
        try:
            gpu_rows = self._rows(gpu_query)
        except BaseException:
            app_query.kill()
            app_query.communicate()
            raise
        app_rows = self._rows(app_query)
        gpus = []
        for row in gpu_rows:
            if len(row) < 9:
                continue
            gpus.append({
                "index": _num(row[0]), "uuid": row[1], "name": row[2], "mem_used_mib": _num(row[3]),
                "mem_total_mib": _num(row[4]), "util_pct": _num(row[5]), "temp_c": _num(row[6]),
                "power_w": _num(row[7]), "power_limit_w": _num(row[8]),
            })
        by_uuid = {g["uuid"]: g["index"] for g in gpus}
        procs = []
        for row in app_rows:
            if len(row) < 3 or _num(row[0]) is None:
                continue
            procs.append({"pid": _num(row[0]), "mem_mib": _num(row[1]), "gpu_uuid": row[2], "gpu": by_uuid.get(row[2])})
        return gpus, procs


class NvitopSource:
    name = "nvitop"

    def __init__(self) -> None:
        import logging

        from nvitop import Device, libnvml

        libnvml.LOGGER.setLevel(logging.CRITICAL + 1)  # no banner on every call when the driver is missing
        self.Device, self.libnvml = Device, libnvml

    def sample(self) -> tuple[list[dict], list[dict]]:
        try:
            self.Device.count()  # raises when there is no driver; 0 is a driver with no GPUs
        except self.libnvml.NVMLError as e:
            raise NoDriver("NVML: %s" % e) from None
        devices = self.Device.all()

        def val(x, scale=1.0):
            return None if x is None or str(x) == "N/A" else (round(x / scale, 1) if scale != 1 else x)

        gpus, procs = [], []
        for d in devices:
            index, uuid = d.index, d.uuid()
            gpus.append({
                "index": index, "uuid": uuid, "name": d.name(),
                "mem_used_mib": val(d.memory_used(), 1 << 20), "mem_total_mib": val(d.memory_total(), 1 << 20),
                "util_pct": val(d.gpu_utilization()), "temp_c": val(d.temperature()),
                "power_w": val(d.power_usage(), 1000), "power_limit_w": val(d.power_limit(), 1000),
            })
            for pid, p in d.processes().items():
                procs.append({"pid": pid, "mem_mib": val(p.gpu_memory(), 1 << 20), "gpu_uuid": uuid, "gpu": index})
        return gpus, procs


def _nvml_loads() -> bool:
    """Whether the NVML library is there at all: importing nvitop costs a third of a second, for nothing without it."""
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return True
    except OSError:
        return False


def pick_source(wanted: str) -> NvitopSource | SmiSource:
    """nvitop when it imports and NVML answers; else nvidia-smi (auto), which reports a missing driver."""
    if wanted == "nvitop" or (wanted == "auto" and _nvml_loads()):
        try:
            source = NvitopSource()
            if wanted == "auto":
                source.Device.count()
            return source
        except ImportError:
            if wanted == "nvitop":
                raise
        except Exception:  # NVML cannot load: nvidia-smi may still work, and says why if not
            pass
    return SmiSource()


def collect(source: NvitopSource | SmiSource, btime: float, pidfile: str | None) -> dict:
    gpus, procs = source.sample()
    for p in procs:
        p.update(proc_details(p["pid"], btime))
    return {"type": "sample", "t": round(time.time(), 3), "gpus": gpus, "procs": procs, "server": server_info(pidfile)}


def console_gone(stdin: int | None, seconds: float) -> bool:
    """Wait up to `seconds`; True as soon as stdin (the channel to the console) reaches end of file."""
    if stdin is None:
        time.sleep(seconds)
        return False
    ready, _, _ = select.select([stdin], [], [], seconds)
    return bool(ready) and not os.read(stdin, 4096)  # the console never writes: what comes is the end


def run_sample(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # the console went away: end quietly
    try:
        stdin = sys.stdin.fileno() if not args.once else None
    except (AttributeError, OSError, ValueError):  # no stdin at all: nothing to watch
        stdin = None
    source = pick_source(args.source)
    emit({"type": "hello", "source": source.name, "pid": os.getpid(), "host": socket.gethostname(),
          "interval": args.interval, "python": sys.version.split()[0]})
    btime = boot_time()
    while True:
        started = time.monotonic()
        try:
            emit(collect(source, btime, args.server_pidfile))
        except NoDriver as e:
            emit({"type": "error", "kind": "no-driver", "message": str(e)})
        except Exception as e:  # report and keep sampling: a transient failure must not end the stream
            emit({"type": "error", "kind": "query-failed", "message": "%s: %s" % (type(e).__name__, e)})
        if args.once:
            return 0
        while (left := started + args.interval - time.monotonic()) > 0:
            if console_gone(stdin, left):
                return 0


# -- kill ----------------------------------------------------------------------
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


# -- checks for the server lifecycle -------------------------------------------
def run_port(args: argparse.Namespace) -> int:
    """Exit 0 when HOST:PORT can be bound (free), 1 when it is taken."""
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
    # as servers do: connections of a stopped server lingering in TIME_WAIT do not make the port busy
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as e:
        emit({"type": "port", "free": False, "detail": e.strerror or str(e)})
        return 1
    finally:
        sock.close()
    emit({"type": "port", "free": True})
    return 0


def run_help(args: argparse.Namespace) -> int:
    """The launcher's --help, cached per launcher version (its argv and its program's mtime and size)."""
    import hashlib
    import shutil

    program = shutil.which(args.launcher[0]) or args.launcher[0]
    try:
        st = os.stat(program)
    except OSError as e:
        emit({"type": "help", "ok": False, "detail": "%s: %s" % (program, e.strerror)})
        return 1
    key = hashlib.sha256(json.dumps([args.launcher, program, st.st_mtime, st.st_size]).encode()).hexdigest()[:16]
    cache = os.path.join(args.cache_dir, key + ".txt")
    cached = os.path.exists(cache)
    if cached:
        with open(cache, encoding="utf-8", errors="replace") as f:
            text = f.read()
    else:
        try:
            out = subprocess.run(list(args.launcher) + ["--help"], capture_output=True, text=True, errors="replace",
                                 timeout=args.timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            emit({"type": "help", "ok": False, "detail": str(e)})
            return 1
        text = out.stdout + out.stderr
        if out.returncode != 0 or "--" not in text:
            emit({"type": "help", "ok": False, "detail": "--help exited %d: %s" % (out.returncode, text.strip()[-300:])})
            return 1
        os.makedirs(args.cache_dir, exist_ok=True)
        with open(cache + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(cache + ".tmp", cache)
    emit({"type": "help", "ok": True, "cached": cached, "text": text})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pivot-agent")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--interval", type=float, default=1.0)
    s.add_argument("--source", choices=["auto", "nvitop", "nvidia-smi"], default="auto")
    s.add_argument("--server-pidfile")
    s.add_argument("--once", action="store_true")
    k = sub.add_parser("kill")
    k.add_argument("--grace", type=float, default=5.0)
    k.add_argument("targets", nargs="+")
    p = sub.add_parser("port")
    p.add_argument("host")
    p.add_argument("port", type=int)
    h = sub.add_parser("help")
    h.add_argument("--cache-dir", default="help-cache")
    h.add_argument("--timeout", type=float, default=180.0)
    h.add_argument("launcher", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "port":
        return run_port(args)
    if args.command == "help":
        args.launcher = args.launcher[1:] if args.launcher[:1] == ["--"] else args.launcher
        if not args.launcher:
            parser.error("help needs the launcher's argv")
        return run_help(args)
    if args.command == "sample":
        if args.interval < 0.25:
            parser.error("--interval must be at least 0.25 s")
        return run_sample(args)
    return run_kill(args)


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        raise SystemExit(130) from None

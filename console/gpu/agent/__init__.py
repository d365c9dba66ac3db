"""pivot's telemetry agent: runs on the GPU host with the host's own python, uploaded as one zipapp (console/zipapp.py).

Standard library only (nvitop is used when the host's python can import it),
and Python 3.8 or newer, since it runs wherever the inference server runs.

    pivot_agent.pyz sample [--interval S] [--source auto|nvitop|nvidia-smi] [--server-pidfile PATH] [--once]
        First line: {"type": "hello", "v": 1, "source": ..., "pid": ..., "host": ...}
        Then one line per interval: {"type": "sample", "v": 1, "t": ..., "gpus": [...], "procs": [...], "server": ...}
        or {"type": "error", "v": 1, "kind": "no-driver" | "query-failed", "message": ...}, and it keeps trying.
        stdin is the SSH channel: at its end of file (the console closed the channel, or died and its connection
        with it) the agent exits, as it does at a write to a closed pipe.

    pivot_agent.pyz kill [--grace S] PID:START_TICKS:MODE ...
        MODE is "group" (signal the process group when the process leads one) or "single".
        SIGTERM, then SIGKILL after the grace period; prints one JSON result per target.
        A target whose start time no longer matches (a reused PID) is not signalled.
"""

from .kill import kill_all
from .procs import boot_time, proc_stat, start_ticks
from .sample import collect
from .sources import NvitopSource, SmiSource, pick_source
from .wire import VERSION, NoDriver

__all__ = [
    "VERSION",
    "NoDriver",
    "NvitopSource",
    "SmiSource",
    "boot_time",
    "collect",
    "kill_all",
    "pick_source",
    "proc_stat",
    "start_ticks",
]

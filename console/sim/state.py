"""The simulated host's shared state: a directory that the simulated server,
its workers and the fake nvidia-smi all read and write.

    $PIVOT_SIM_HOME/gpus.json          the GPUs: count, name, memory
    $PIVOT_SIM_HOME/claims/PID.json    "GPU memory" held by a live process
    $PIVOT_SIM_HOME/servers/PID.json   a running server's batch, for utilization

A claim counts while its process exists in /proc with the same start time
(so a reused PID does not inherit memory); a zombie still exists there, which
is how a zombie keeps holding memory until its parent reaps it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from console.files import write_atomically
from console.sim.calibration import DEFAULT

ENV = "PIVOT_SIM_HOME"


class SimHomeMissing(RuntimeError):
    pass


def sim_home() -> Path:
    home = os.environ.get(ENV)
    if not home:
        raise SimHomeMissing(f"${ENV} is not set: this command runs only on the simulated host (pivot demo)")
    return Path(home)


@dataclass(frozen=True)
class GpuSpec:
    count: int = 8
    name: str = DEFAULT.gpu_name
    memory_mib: int = DEFAULT.gpu_memory_mib

    def uuid(self, index: int) -> str:
        return f"GPU-5111{index:04x}-pivo-tsim-0000-{index:012x}"


def write_json_atomic(path: Path, data: Any) -> None:
    """Whole, not durable: the simulated host's own state, written at every claim (a crash of it loses nothing real)."""
    write_atomically(path, json.dumps(data), durable=False)


def _read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # vanished or being replaced: the next read sees it


def init_home(home: Path, gpus: GpuSpec) -> None:
    for sub in ("claims", "servers"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    write_json_atomic(home / "gpus.json", asdict(gpus))


def read_gpus(home: Path) -> GpuSpec:
    data = _read_json(home / "gpus.json") or {}
    return GpuSpec(**data)


def proc_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: the start time, which tells a reused PID apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def alive(pid: int, start: int | None) -> bool:
    return start is not None and proc_start_ticks(pid) == start


def claim(home: Path, gpu: int, mib: int, pid: int | None = None) -> None:
    pid = pid or os.getpid()
    write_json_atomic(home / "claims" / f"{pid}.json", {"pid": pid, "gpu": gpu, "mib": mib, "start": proc_start_ticks(pid)})


def release(home: Path, pid: int | None = None) -> None:
    (home / "claims" / f"{pid or os.getpid()}.json").unlink(missing_ok=True)


def live_claims(home: Path) -> list[dict[str, Any]]:
    claims = []
    for path in sorted((home / "claims").glob("*.json")):
        data = _read_json(path)
        if data and alive(data["pid"], data["start"]):
            claims.append(data)
        elif data:
            path.unlink(missing_ok=True)  # the process is gone: its memory is free
    return claims


def publish_server(home: Path, gpus: list[int], running: int, queued: int) -> None:
    pid = os.getpid()
    write_json_atomic(
        home / "servers" / f"{pid}.json",
        {"pid": pid, "start": proc_start_ticks(pid), "gpus": gpus, "running": running, "queued": queued},
    )


def live_servers(home: Path) -> list[dict[str, Any]]:
    servers = []
    for path in (home / "servers").glob("*.json"):
        data = _read_json(path)
        if data and alive(data["pid"], data["start"]):
            servers.append(data)
        elif data:
            path.unlink(missing_ok=True)
    return servers

"""A fake `nvidia-smi` for the simulated host: the query interface tools script against.

    nvidia-smi --query-gpu=index,memory.used,... --format=csv[,noheader][,nounits]
    nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv
    nvidia-smi -L

Numbers follow the simulated state: memory is the sum of live claims, and
utilization, temperature and power follow the running batch of the servers
that use a GPU.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.sim import state
from console.sim.calibration import DEFAULT


class Field:
    def __init__(self, header: str, unit: str | None, value: Callable[[dict[str, Any]], Any]):
        self.header, self.unit, self.value = header, unit, value

    def render(self, row: dict[str, Any], units: bool) -> str:
        value = self.value(row)
        if isinstance(value, float):
            value = f"{value:.2f}"
        return f"{value} {self.unit}" if units and self.unit else str(value)

    def title(self, units: bool) -> str:
        return f"{self.header} [{self.unit}]" if units and self.unit else self.header


GPU_FIELDS: dict[str, Field] = {
    "index": Field("index", None, lambda g: g["index"]),
    "uuid": Field("uuid", None, lambda g: g["uuid"]),
    "name": Field("name", None, lambda g: g["name"]),
    "pci.bus_id": Field("pci.bus_id", None, lambda g: f"00000000:{0x18 + g['index'] * 0x10:02X}:00.0"),
    "driver_version": Field("driver_version", None, lambda g: "570.124.06"),
    "count": Field("count", None, lambda g: g["count"]),
    "memory.total": Field("memory.total", "MiB", lambda g: g["total"]),
    "memory.used": Field("memory.used", "MiB", lambda g: g["used"]),
    "memory.free": Field("memory.free", "MiB", lambda g: g["total"] - g["used"]),
    "utilization.gpu": Field("utilization.gpu", "%", lambda g: g["util"]),
    "utilization.memory": Field("utilization.memory", "%", lambda g: g["util"] // 2),
    "temperature.gpu": Field("temperature.gpu", None, lambda g: g["temp"]),
    "power.draw": Field("power.draw", "W", lambda g: g["power"]),
    "power.limit": Field("power.limit", "W", lambda g: DEFAULT.max_power_w),
}
APP_FIELDS: dict[str, Field] = {
    "pid": Field("pid", None, lambda p: p["pid"]),
    "process_name": Field("process_name", None, lambda p: p["name"]),
    "name": Field("process_name", None, lambda p: p["name"]),
    "used_memory": Field("used_gpu_memory", "MiB", lambda p: p["mib"]),
    "used_gpu_memory": Field("used_gpu_memory", "MiB", lambda p: p["mib"]),
    "gpu_uuid": Field("gpu_uuid", None, lambda p: p["gpu_uuid"]),
    "gpu_bus_id": Field("gpu_bus_id", None, lambda p: f"00000000:{0x18 + p['gpu'] * 0x10:02X}:00.0"),
}


def _process_name(pid: int) -> str:
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        argv0 = ""
    return argv0 or "[Not Found]"  # a zombie has an empty cmdline


def snapshot(home: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    spec = state.read_gpus(home)
    claims = state.live_claims(home)
    running: dict[int, int] = {}
    for server in state.live_servers(home):
        for gpu in server["gpus"]:
            running[gpu] = running.get(gpu, 0) + server["running"]
    gpus = []
    for i in range(spec.count):
        used = sum(c["mib"] for c in claims if c["gpu"] == i)
        batch = running.get(i, 0)
        util = 0 if batch == 0 else min(100, 70 + round(30 * batch / 64))
        held = 40.0 if used else 0.0
        power = DEFAULT.idle_power_w + held + (DEFAULT.max_power_w - DEFAULT.idle_power_w - 60) * util / 100
        gpus.append(
            {
                "index": i,
                "uuid": spec.uuid(i),
                "name": spec.name,
                "count": spec.count,
                "total": spec.memory_mib,
                "used": min(used, spec.memory_mib),
                "util": util,
                "temp": 32 + round(util * 0.4) + (3 if used else 0),
                "power": power,
            }
        )
    apps = [{**c, "name": _process_name(c["pid"]), "gpu_uuid": spec.uuid(c["gpu"])} for c in claims if c["gpu"] < spec.count]
    return gpus, apps


def _table(fields: list[Field], rows: list[dict[str, Any]], fmt: set[str]) -> str:
    units = "nounits" not in fmt
    lines = [] if "noheader" in fmt else [", ".join(f.title(units) for f in fields)]
    lines += [", ".join(f.render(row, units) for f in fields) for row in rows]
    return "".join(line + "\n" for line in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nvidia-smi", add_help=True)
    parser.add_argument("--query-gpu")
    parser.add_argument("--query-compute-apps")
    parser.add_argument("--format", default="csv")
    parser.add_argument("-i", "--id")
    parser.add_argument("-L", "--list-gpus", action="store_true")
    args = parser.parse_args(argv)
    try:
        home = state.sim_home()
    except state.SimHomeMissing:
        print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", file=sys.stderr)
        return 9
    gpus, apps = snapshot(home)
    if args.id is not None:
        wanted = set(args.id.split(","))
        gpus = [g for g in gpus if str(g["index"]) in wanted or g["uuid"] in wanted]
        apps = [a for a in apps if any(a["gpu_uuid"] == g["uuid"] for g in gpus)]
    if args.list_gpus:
        for g in gpus:
            print(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})")
        return 0
    query, table = (args.query_gpu, GPU_FIELDS) if args.query_gpu else (args.query_compute_apps, APP_FIELDS)
    if query is None:
        print(_summary(gpus, apps), end="")
        return 0
    fmt = {part.strip() for part in args.format.split(",")}
    if "csv" not in fmt:
        print(f'"{args.format}" is not a valid format.', file=sys.stderr)
        return 2
    names = [n.strip() for n in query.split(",") if n.strip()]
    for name in names:
        if name not in table:
            print(f'Field "{name}" is not a valid field to query.', file=sys.stderr)
            return 2
    rows = gpus if args.query_gpu else apps
    sys.stdout.write(_table([table[n] for n in names], rows, fmt))
    return 0


def _summary(gpus: list[dict[str, Any]], apps: list[dict[str, Any]]) -> str:
    lines = ["Simulated NVIDIA-SMI (pivot demo host)"]
    for g in gpus:
        lines.append(
            f"|{g['index']:>3}  {g['name']:<20} {g['temp']:>3}C {g['power']:>6.0f}W  {g['used']:>6}MiB / {g['total']}MiB  {g['util']:>3}% |"
        )
    lines.append("Processes:")
    for a in apps:
        gpu = next(g["index"] for g in gpus if g["uuid"] == a["gpu_uuid"])
        lines.append(f"|{gpu:>3} {a['pid']:>8}  C  {a['name'][:40]:<40} {a['mib']:>8}MiB |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())

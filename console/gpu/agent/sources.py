"""Where the GPUs' numbers come from: nvitop (NVML) when the host's python has it and the driver loads, else
nvidia-smi."""

from __future__ import annotations

import subprocess

from .wire import NoDriver

GPU_QUERY = "index,uuid,name,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw,power.limit"
APP_QUERY = "pid,used_memory,gpu_uuid"


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
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
            )
        except FileNotFoundError:
            raise NoDriver("nvidia-smi not found on PATH: no NVIDIA driver on this host") from None

    def _rows(self, proc: subprocess.Popen, warnings: list) -> list[list[str]]:
        """Its CSV rows. Rows printed beside a failure (one GPU fallen off the bus: the others are printed, then it
        exits 15) are kept, and the failure said in `warnings`; a failure with no row is the whole sample's."""
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise RuntimeError("nvidia-smi did not answer within 10 s") from None
        rows = [[c.strip() for c in line.split(",")] for line in stdout.splitlines() if "," in line]
        if proc.returncode != 0:
            message = [line for line in (stderr + "\n" + stdout).splitlines() if line.strip() and "," not in line]
            text = message[0].strip() if message else "exit status %d" % proc.returncode
            if not rows and ("couldn't communicate with the NVIDIA driver" in text or "driver" in text.lower()):
                raise NoDriver(text)
            if not rows:
                raise RuntimeError("nvidia-smi: " + text)
            warnings.append("nvidia-smi: %s (exit status %d)" % (text[:300], proc.returncode))
        return rows

    def sample(self) -> tuple[list[dict], list[dict]]:
        # both queries at once: nvidia-smi takes 0.1-0.5 s a call, and this is the first sample's wait
        gpu_query = self._start(GPU_QUERY, "gpu")
        try:
            app_query = self._start(APP_QUERY, "compute-apps")
        except NoDriver:
            gpu_query.kill()
            gpu_query.communicate()
            raise
        warnings: list = []
        try:
            gpu_rows = self._rows(gpu_query, warnings)
        except BaseException:
            app_query.kill()
            app_query.communicate()
            raise
        app_rows = self._rows(app_query, warnings)
        gpus = []
        for row in gpu_rows:
            if len(row) < 9 or _num(row[0]) is None:
                warnings.append("a GPU row nvidia-smi printed was not read: %r" % ",".join(row)[:120])
                continue
            gpus.append(
                {
                    "index": _num(row[0]),
                    "uuid": row[1],
                    "name": row[2],
                    "mem_used_mib": _num(row[3]),
                    "mem_total_mib": _num(row[4]),
                    "util_pct": _num(row[5]),
                    "temp_c": _num(row[6]),
                    "power_w": _num(row[7]),
                    "power_limit_w": _num(row[8]),
                }
            )
        if not gpus:  # an answer with no GPU in it says nothing of the GPUs: never "all idle"
            raise RuntimeError("nvidia-smi answered without a GPU row pivot can read" + (": " + warnings[0] if warnings else ""))
        by_uuid = {g["uuid"]: g["index"] for g in gpus}
        procs = []
        for row in app_rows:
            if len(row) < 3 or not isinstance(_num(row[0]), int):
                warnings.append("a process row nvidia-smi printed was not read: %r" % ",".join(row)[:120])
                continue
            procs.append({"pid": _num(row[0]), "mem_mib": _num(row[1]), "gpu_uuid": row[2], "gpu": by_uuid.get(row[2])})
        self.warnings = warnings
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
        except self.libnvml.NVMLError_LibraryNotFound:
            raise NoDriver("no NVIDIA driver here: NVIDIA's library (libnvidia-ml) is not installed") from None
        except self.libnvml.NVMLError as e:
            raise NoDriver("NVML: %s" % e) from None
        devices = self.Device.all()

        def val(x, scale=1.0):
            return None if x is None or str(x) == "N/A" else (round(x / scale, 1) if scale != 1 else x)

        gpus, procs = [], []
        for d in devices:
            index, uuid = d.index, d.uuid()
            gpus.append(
                {
                    "index": index,
                    "uuid": uuid,
                    "name": d.name(),
                    "mem_used_mib": val(d.memory_used(), 1 << 20),
                    "mem_total_mib": val(d.memory_total(), 1 << 20),
                    "util_pct": val(d.gpu_utilization()),
                    "temp_c": val(d.temperature()),
                    "power_w": val(d.power_usage(), 1000),
                    "power_limit_w": val(d.power_limit(), 1000),
                }
            )
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

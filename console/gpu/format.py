"""Plain-text formatting of GPU data, shared by the TUI and the headless commands."""

from __future__ import annotations

from console.gpu.samples import GpuProcess, Sample

BLOCKS = " ▏▎▍▌▋▊▉█"


def gib(mib: float | None) -> str:
    return "?" if mib is None else f"{mib / 1024:.1f}"


def bar(fraction: float | None, width: int) -> str:
    """A bar of `width` cells with eighth-cell resolution."""
    if fraction is None:
        return "?".center(width)
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (BLOCKS[rest] if rest else "")).ljust(width)


def age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:  # minutes: a column that changed every second redrew the whole process table every second
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def flags(proc: GpuProcess) -> list[str]:
    """What the operator must notice about a process, most important first."""
    out = []
    if not proc.visible:
        out.append("host-pid")
    if proc.zombie:
        out.append("zombie")
    if proc.orphan and not proc.zombie:
        out.append("orphan")
    out.append("server" if proc.server else "stray")
    return out


def idle_line(sample: Sample, threshold_mib: float, width: int | None = None) -> str:
    """'all GPUs idle', or what still holds memory, short enough for one line (of `width`, where known: each busy
    GPU's holders where they fit, else how many GPUs hold how much)."""
    busy = sample.busy_gpus(threshold_mib)
    if sample.problems:  # a partial sample: what it could not read comes first, and it never says "idle"
        read = f"{len(busy)} of the {len(sample.gpus)} GPUs read hold memory" if busy else f"the {len(sample.gpus)} GPUs read are idle"
        return f"cannot tell whether all GPUs are idle: {sample.problems[0]}; {read}"
    if not busy:
        return f"all GPUs idle (each below {gib(threshold_mib)} GiB)"
    pids = {p.pid for p in sample.procs}
    held = sum(g.mem_used_mib or 0 for g in busy)
    summary = f"{len(busy)} of {len(sample.gpus)} GPUs hold {gib(held)} GiB, {len(pids)} processes"
    if len(busy) > 2:
        return summary
    parts = []
    for gpu in busy:
        holders = sorted({p.pid for p in sample.procs if p.gpu == gpu.index})
        more = f" +{len(holders) - 2}" if len(holders) > 2 else ""
        who = ("pid " + ", ".join(map(str, holders[:2])) + more) if holders else "no process listed"
        parts.append(f"GPU {gpu.index} holds {gib(gpu.mem_used_mib)} GiB ({who})")
    detail = "; ".join(parts)
    return summary if width and len(detail) > width and len(busy) > 1 else detail


def kill_strays_question(count: int, where: str = "") -> str:
    """ "Kill the stray process?" or "Kill all 3 stray processes?" (on `where`, a host of the fleet)."""
    what = "the stray process" if count == 1 else f"all {count} stray processes"
    return f"Kill {what}{f' on {where}' if where else ''}?"

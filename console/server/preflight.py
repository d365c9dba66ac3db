"""Preflight: what is checked on the host before a server starts, each check one line the operator can act on."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from console.gpu.format import idle_line
from console.gpu.samples import AgentError, Sample
from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from console.remote.errors import RemoteError
from console.server.profiles import KINDS, Profile
from console.server.speculation import adaptive_warning
from console.untrusted import visible


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    warning: bool = False  # passed, but worth reading


def known_flags(help_text: str) -> tuple[set[str], set[str]]:
    """Flags a launcher's --help names, and those it calls deprecated."""
    flags = set(re.findall(r"--([A-Za-z0-9][A-Za-z0-9_-]*)", help_text))
    deprecated = {f for line in help_text.splitlines() if "deprecat" in line.lower()
                  for f in re.findall(r"--([A-Za-z0-9][A-Za-z0-9_-]*)", line)}
    return flags, deprecated



async def preflight(conn: Connection, agent: RemoteTelemetry, profile: Profile, argv: list[str], *,
                    idle_threshold_mib: float) -> list[Check]:
    """Every check before a start: the launcher and the model on the host, the GPUs idle, the port free, every flag
    known to the launcher's own --help, and what the engine will make of the profile's speculation."""
    checks = []
    which = await conn.run(["sh", "-c", 'command -v "$1"', "sh", argv[0]])
    checks.append(Check("launcher", which.ok, visible(which.stdout.strip()) or f"{argv[0]} not found on the host"))
    model = await conn.expand(profile.model_path)
    exists = await conn.run(["test", "-e", model])
    checks.append(Check("model path", exists.ok, model if exists.ok else f"{model} does not exist on the host"))
    sample = await agent.sample_once()
    if isinstance(sample, AgentError):
        checks.append(Check("GPUs idle", False, f"cannot read the GPUs: {sample.message}"))
    else:
        idle = sample.idle(idle_threshold_mib)
        checks.append(Check("GPUs idle", idle, idle_line(sample, idle_threshold_mib)))
    status, lines = await agent.agent("port", profile.host, str(profile.port))
    free = status == 0
    checks.append(Check("port free", free, f"{profile.host}:{profile.port} " + ("is free" if free else
                        f"is in use ({visible(str(lines[0].get('detail', ''))) if lines else ''})")))
    checks.append(await check_flags(agent, profile, argv))
    if warning := adaptive_warning(profile.kind, argv):
        checks.append(Check("adaptive speculation", True, warning, warning=True))
    return checks

async def check_flags(agent: RemoteTelemetry, profile: Profile, argv: list[str]) -> Check:
    launcher = argv[: len(profile.launcher)]
    try:
        status, lines = await agent.agent("help", "--cache-dir", "help-cache", "--", *launcher, timeout=240)
    except RemoteError as e:
        return Check("flags known", False, str(e))
    if status != 0 or not lines or not lines[-1].get("ok"):
        why = lines[-1].get("detail") if lines else status
        return Check("flags known", False, f"cannot read the launcher's --help: {visible(str(why))}")
    known, deprecated = known_flags(lines[-1]["text"])
    wanted = [*profile.flags, "host", "port"] + (["model-path"] if KINDS[profile.kind][2] else [])
    unknown = [f for f in wanted if f not in known]
    old = [f for f in wanted if f in deprecated]
    if unknown:
        return Check("flags known", False, "unknown to this launcher: " + ", ".join(f"--{f}" for f in unknown))
    if old:
        return Check("flags known", True, "deprecated: " + ", ".join(f"--{f}" for f in old), warning=True)
    return Check("flags known", True, f"all {len(wanted)} flags known to the launcher")


def after_stop(checks: list[Check], profile: Profile, sample: Sample | AgentError, held: tuple[str, int] | None) -> list[Check]:
    """The checks as they will stand once the running server (holding `held`, its host and port) is stopped."""
    freed = set()
    if isinstance(sample, Sample) and not [p for p in sample.procs if p.stray]:
        freed.add("GPUs idle")  # only the server's processes hold GPU memory: the stop releases it
    if held == (profile.host, profile.port):
        freed.add("port free")
    return [replace(c, ok=True, warning=True, detail=f"{c.detail} (the stop frees it)") if not c.ok and c.name in freed
            else c for c in checks]

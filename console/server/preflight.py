"""Preflight: what is checked on the host before a server starts, each check one line the operator can act on."""

from __future__ import annotations

import re
from dataclasses import replace

from console.engines import POSITIONAL
from console.gpu.format import idle_line
from console.gpu.samples import AgentError, Sample
from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from console.remote.errors import RemoteError
from console.server.checks import CHECKS, Check
from console.server.profiles import Profile
from console.untrusted import visible


def known_flags(help_text: str) -> tuple[set[str], set[str]]:
    """Flags a launcher's --help names, and those it calls deprecated."""
    flags = set(re.findall(r"--([A-Za-z0-9][A-Za-z0-9_-]*)", help_text))
    deprecated = {
        f for line in help_text.splitlines() if "deprecat" in line.lower() for f in re.findall(r"--([A-Za-z0-9][A-Za-z0-9_-]*)", line)
    }
    return flags, deprecated


async def preflight(
    conn: Connection,
    agent: RemoteTelemetry,
    profile: Profile,
    argv: list[str],
    *,
    idle_threshold_mib: float,
    gpus: bool = True,
    skip: frozenset[str] = frozenset(),
    binds: tuple[tuple[str, str, int], ...] | None = None,
) -> list[Check]:
    """Every check before a start: the launcher and the model on the host, the GPUs idle, the port free, every flag
    known to the launcher's own --help, and what the engine will make of the profile's speculation. gpus: the host
    has GPUs (pivot.toml's `gpus = false` says it has none); skip: checks not to run (CHECKS), each said so; binds:
    the (check, host, port) the server will bind (default: the profile's host and port, "port free")."""
    checks = []
    if "launcher" not in skip:
        which = await conn.run(["sh", "-c", 'command -v "$1"', "sh", argv[0]])
        checks.append(Check("launcher", which.ok, visible(which.stdout.strip()) or f"{argv[0]} not found on the host"))
    if "model-path" not in skip:
        model = await conn.expand(profile.model_path)
        exists = await conn.run(["test", "-e", model])
        checks.append(Check("model path", exists.ok, model if exists.ok else f"{model} does not exist on the host"))
    if not gpus:
        checks.append(Check("GPUs idle", True, "this host has no GPUs (gpus = false in pivot.toml)"))
    elif "gpus-idle" not in skip:
        sample = await agent.sample_once()
        if isinstance(sample, AgentError):
            checks.append(Check("GPUs idle", False, f"cannot read the GPUs: {sample.message}"))
        else:
            idle = sample.idle(idle_threshold_mib)
            checks.append(Check("GPUs idle", idle, idle_line(sample, idle_threshold_mib)))
    if "port-free" not in skip:
        for name, host, port in (("port free", profile.host, profile.port),) if binds is None else binds:
            status, lines = await agent.agent("port", host, str(port))
            free = status == 0
            holder = lines[0].get("listener") if lines and isinstance(lines[0], dict) else None
            by = (
                f"; pid {holder['leader']}: {visible(str(holder.get('cmd', '')))[:120]}"
                if isinstance(holder, dict) and isinstance(holder.get("leader"), int)
                else ""
            )
            checks.append(
                Check(
                    name,
                    free,
                    f"{host}:{port} "
                    + ("is free" if free else f"is in use ({visible(str(lines[0].get('detail', ''))) if lines else ''}{by})"),
                )
            )
    if "flags-known" not in skip:
        flags, help_text = await check_flags(agent, profile, argv)
        checks += [flags, *filter(None, [launch_warning(profile, help_text)])]
    skipped = skip - ({"gpus-idle"} if not gpus else set())  # a host without GPUs said so already
    checks += [Check(name, True, f"not checked (--skip {s})", warning=True) for s, name in CHECKS.items() if s in skipped]
    if warning := profile.engine.adaptive_warning(argv):
        checks.append(Check("adaptive speculation", True, warning, warning=True))
    return checks


async def check_flags(agent: RemoteTelemetry, profile: Profile, argv: list[str]) -> tuple[Check, str]:
    """The check, and the --help it read ("" when it could not)."""
    launcher = argv[: len(profile.launcher)]
    try:
        status, lines = await agent.agent("help", "--cache-dir", "help-cache", "--", *launcher, timeout=240)
    except RemoteError as e:
        return Check("flags known", False, str(e)), ""
    if status != 0 or not lines or not lines[-1].get("ok"):
        why = visible(str(lines[-1].get("detail") if lines else status))
        return Check("flags known", False, f"cannot read the launcher's --help: {why}{_advice(profile, why)}"), ""
    text = str(lines[-1]["text"])
    known, deprecated = known_flags(text)
    model_flag = [] if profile.model_arg == POSITIONAL else [profile.model_arg]
    wanted = [*profile.flags, "host", "port"] + [f.lstrip("-") for f in model_flag if f.startswith("--")]
    if profile.model_arg == POSITIONAL and not takes_positional(text):
        return Check(
            "flags known",
            False,
            "the launcher's --help names no positional argument for the model: set "
            'model_arg to its flag (for example model_arg = "--model")',
        ), text
    unknown = [f for f in wanted if f not in known]
    old = [f for f in wanted if f in deprecated]
    if unknown:
        return Check("flags known", False, "unknown to this launcher: " + ", ".join(f"--{f}" for f in unknown)), text
    if old:
        return Check("flags known", True, "deprecated: " + ", ".join(f"--{f}" for f in old), warning=True), text
    return Check("flags known", True, f"all {len(wanted)} flags known to the launcher"), text


def launch_warning(profile: Profile, help_text: str) -> Check | None:
    """What the engine warns of in the profile's flags, given its launcher's --help (console/engines/)."""
    if warning := profile.engine.launch_warning(profile.flags, help_text):
        return Check("engine quirks", True, warning, warning=True)
    return None


def takes_positional(help_text: str) -> bool:
    """Whether a --help names a positional argument: argparse's own section, or in its usage (to the first blank
    line) a bracketed name (`vllm serve [model_tag]`) or an upper-case one (click's `trtllm-serve [OPTIONS] MODEL`),
    once the options and their values are taken out (`[--bs BS [BS ...]]`, `--model-path MODEL_PATH`)."""
    if re.search(r"^positional arguments:", help_text, re.M | re.I):
        return True
    usage = re.search(r"usage:(.*?)(?:\n\s*\n|\Z)", help_text, re.S | re.I)
    text = usage.group(1) if usage else ""
    while (bare := re.sub(r"\[[^\[\]]*\.\.\.\]|\[-[^\[\]]*\]", "", text)) != text:  # repeats, then [-options]
        text = bare
    words = text.split()
    for before, word in zip(["", *words], words, strict=False):
        name = word.strip("[]")
        metavar = before.startswith("-")  # --model-path MODEL_PATH: the flag's value, not an argument
        if name.isidentifier() and name.upper() != "OPTIONS" and not metavar and (word.startswith("[") or name.isupper()):
            return True
    return False


def _advice(profile: Profile, why: str) -> str:
    """What to change when --help itself fails: argparse's 'expected one argument' for the launcher's last word
    means the launcher ends in the model's flag, which belongs in model_arg."""
    last = profile.launcher[-1]
    if last.startswith("-") and "expected one argument" in why:
        return f'; the launcher ends in {last}, which takes the model: write model_arg = "{last}" and leave it out of the launcher'
    return ""


def after_stop(
    checks: list[Check], profile: Profile, sample: Sample | AgentError, held: tuple[str, int] | None, host: str, nodes: tuple[str, ...] = ()
) -> list[Check]:
    """The checks as they will stand once the running server on `host` (holding `held`, its host and port; across
    `nodes`, every rank) is stopped. Another node of it is taken as freed too: the stop's release check on that node
    says if it was not, and the start does not follow. Any other node's checks stand as they are."""
    freed = set()
    if isinstance(sample, Sample) and not [p for p in sample.procs if p.stray]:
        freed.add(("GPUs idle", host))  # only the server's processes hold GPU memory: the stop releases it
    for node in (host, *nodes):
        if node != host:
            freed.add(("GPUs idle", node))
        if held == (profile.host, profile.port):
            freed.add(("port free", node))
    if nodes:
        freed.add(("rendezvous port free", host))
    return [
        replace(c, ok=True, warning=True, detail=f"{c.detail} (the stop frees it)")
        if not c.ok and (c.name.removesuffix(f" on {c.node}"), c.node or host) in freed
        else c
        for c in checks
    ]

"""Whether two runs measured the same thing, so that what differs between their numbers is their servers' doing:
the same requests (max_tokens, input length, prompts, api, extra fields, warm-up), the same model and engine, the
same host, GPUs and nodes, the load generator in the same place. The speculation flags (the server's command line)
may differ: that is what a comparison is for; the operator may name more (`--may-differ host`).

A key a run did not record (an older run, an imported one) is not held against it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from console.settings import SweepSettings
from console.sweep.runs.store import Run
from console.untrusted import visible

_DEFAULTS = {f.name: f.default for f in fields(SweepSettings)}
SETTINGS = ("max_tokens", "input_tokens", "api", "extra_body", "warmup")
KEYS = (
    *SETTINGS,
    "load",
    "output_lengths",
    "input_lengths",
    "prompts",
    "model",
    "engine",
    "engine_version",
    "host",
    "gpus",
    "nodes",
    "client",
)  # --may-differ's


@dataclass(frozen=True)
class Difference:
    key: str
    a: str
    b: str

    def __str__(self) -> str:
        return f"{self.key} {self.a} in A, {self.b} in B"


class NotComparable(ValueError):
    """Two runs that measured different things: one line naming what differs."""


def _setting(run: Run, key: str) -> Any:
    recorded = run.meta.settings
    if key in recorded:
        return recorded[key]
    if run.meta.imported_from:  # an import records only what its source said
        return None
    default = _DEFAULTS[key]
    return {} if key == "extra_body" else default  # (a field's default factory: run.toml leaves an empty table out)


def _prompts(run: Run) -> str | None:
    """What its requests asked: a prompt set (named by its file's name, told apart by its hash), or synthetic prompts,
    a prompt of its own per request or the same 64 over and over."""
    if (kept := run.meta.prompt_set) is not None:
        return f"{Path(kept.name).name} ({kept.size} prompts, {kept.sha256[:12]})"
    if run.meta.imported_from and "prompts" not in run.meta.settings and "prompt_file" not in run.meta.settings:
        return None
    if (named := run.meta.settings.get("prompts", run.meta.settings.get("prompt_file"))) not in (None, "synthetic"):
        return f"the file {named}"  # (a run of before prompt sets were hashed)
    return "synthetic, unique per request" if _setting(run, "unique_prompts") else "synthetic, 64 seeded prompts"


def _lengths(run: Run, key: str) -> str | None:
    """How long its answers (or synthetic prompts) ran: the spread counts only where lengths were drawn."""
    how = _setting(run, key) if key in run.meta.settings or not run.meta.imported_from else None
    if how in ("uniform", "normal"):
        return f"{how} (spread {_setting(run, 'length_spread'):g})"
    return how


def _load(run: Run) -> str:
    """What its levels are: concurrencies (closed loop), or rates with their arrivals (open loop)."""
    if not run.rates:
        return "concurrency levels"
    arrival = _setting(run, "arrival") or "poisson"
    return f"request rates, {arrival} arrivals" + (f" (burstiness {_setting(run, 'burstiness'):g})" if arrival == "gamma" else "")


def _gpus(run: Run) -> str | None:
    if run.meta.gpu_count is None:
        return None
    names = " + ".join(run.meta.gpu_names) or "GPU"
    return f"{run.meta.gpu_count} × {names}"


def _facts(run: Run) -> dict[str, Any]:
    return {
        **{key: _setting(run, key) for key in SETTINGS},
        "load": _load(run),
        "output_lengths": _lengths(run, "output_lengths"),
        "input_lengths": _lengths(run, "input_lengths") if _prompts(run) == "synthetic, unique per request" else None,
        "prompts": _prompts(run),
        "model": run.meta.model or run.meta.settings.get("model"),
        "engine": run.meta.kind,
        "engine_version": run.meta.server.version if run.meta.server else None,
        "host": run.meta.host,
        "gpus": _gpus(run),
        "nodes": ", ".join(run.meta.nodes) if run.meta.nodes else ("one" if run.meta.host and run.meta.kind else None),
        "client": run.meta.client.path if run.meta.client else None,
    }


def differences(a: Run, b: Run, may_differ: frozenset[str] = frozenset()) -> list[Difference]:
    """What the two runs measured differently, but for the keys that may differ; a key either did not record is left out."""
    fa, fb = _facts(a), _facts(b)
    return [
        Difference(key, visible(str(fa[key])), visible(str(fb[key])))
        for key in KEYS
        if key not in may_differ and fa[key] is not None and fb[key] is not None and fa[key] != fb[key]
    ]

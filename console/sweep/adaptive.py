"""The comparison's recommendation made actionable: the adaptive-speculation configs that turn drafting off above
the crossover, uploaded to the GPU host, and a profile extending the speculative one that uses them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from console.config import Config, HostSpec, user_config_dir
from console.remote import Connection
from console.sweep.compare import Comparison, adaptive_profile_text, sglang_adaptive_config, vllm_speculative_config


@dataclass(frozen=True)
class AdaptiveProfile:
    name: str
    profile_path: Path  # the new profile, beside pivot.toml
    off_above: int
    remote_config: str  # where the profile's --speculative-adaptive-config points
    uploaded_to: str | None  # the host it was uploaded to; None when no host is configured

    def describe(self) -> str:
        where = f", its config uploaded to {self.uploaded_to}:{self.remote_config}" if self.uploaded_to else ""
        return (f"wrote profile {self.name} (drafting off above C={self.off_above}) to {self.profile_path}{where}: "
                "sweep it to check that it follows the better curve at every level")


def plan(cfg: Config, cmp: Comparison) -> tuple[str, Path, int] | None:
    """The profile's name, path and cut; None when the comparison recommends no adaptive setting."""
    if cmp.helps_up_to is None:
        return None
    spec = cmp.drafting
    directory = cfg.path.parent / "profiles" if cfg.path else user_config_dir() / "profiles"  # both are profile_dirs
    return f"{spec.profile}-adaptive", directory / f"{spec.profile}-adaptive.toml", cmp.helps_up_to


def spec_host(cfg: Config, cmp: Comparison) -> HostSpec | None:
    """The host the speculative run was measured on (or the default one), where the config must be."""
    if not cfg.hosts:
        return None
    spec = cmp.drafting
    return cfg.host(spec.meta.get("host") if spec.meta.get("host") in cfg.hosts else None)


async def write_adaptive_profile(cfg: Config, cmp: Comparison, conn: Connection | None) -> AdaptiveProfile:
    """Local copies of both configs (SGLang's and vLLM's), the SGLang one uploaded over `conn` when given."""
    planned = plan(cfg, cmp)
    if planned is None:
        raise ValueError("the comparison recommends no adaptive setting: there is no level where drafting pays off")
    name, profile_path, cut = planned
    profile_path.parent.mkdir(parents=True, exist_ok=True)
    config_json = json.dumps(sglang_adaptive_config(cut), indent=1)
    (profile_path.parent / f"{name}.json").write_text(config_json)
    (profile_path.parent / f"{name}.vllm.json").write_text(json.dumps(vllm_speculative_config(cut), indent=1))
    remote, uploaded_to = f"~/.pivot/adaptive/{name}.json", None
    if conn is not None:
        remote = await conn.expand(f"{conn.spec.workdir.rstrip('/')}/adaptive/{name}.json")
        await conn.upload(config_json.encode(), remote)
        uploaded_to = conn.spec.name
    profile_path.write_text(adaptive_profile_text(cmp.drafting.profile, remote))
    return AdaptiveProfile(name, profile_path, cut, remote, uploaded_to)

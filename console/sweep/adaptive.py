"""The comparison's recommendation made actionable: a profile that keeps drafting where it paid off and turns
it off above, in the form the engine itself reads (each engine's schedule is written by its module in
console/engines/; the contract tests run every config written there through the engines' own validation and routing
code)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.config import Config, HostSpec, user_config_dir
from console.engines import Engine, Measured, NoAdaptiveProfile, Schedule
from console.server.profiles import Profile, ProfileError, load_profiles
from console.sweep.analysis.compare import Comparison, label
from console.sweep.words.comparison import recommendation
from console.untrusted import visible

__all__ = ["AdaptivePlan", "NoAdaptiveProfile", "plan", "spec_host", "written_profiles_dir"]


@dataclass(frozen=True)
class AdaptivePlan:
    name: str
    profile_path: Path  # the new profile, beside pivot.toml
    spec: Profile  # the speculative profile it extends
    schedule: Schedule
    promises: dict[int, bool]  # each compared C: whether a batch of that size drafts
    measured_from: tuple[str, str]  # the comparison's runs: the baseline's, the drafting one's
    warnings: list[str] = field(default_factory=list)

    @property
    def engine(self) -> Engine:
        return self.spec.engine

    @property
    def drafting_up_to(self) -> int:
        """The largest measured C that keeps drafting."""
        return self.schedule.drafting_up_to

    @property
    def first_off(self) -> int:
        """The smallest running batch that does not draft."""
        return self.schedule.first_off

    @property
    def config(self) -> dict[str, Any]:
        return self.schedule.config

    def profile_data(self, config_path: str | None) -> dict[str, Any]:
        flags, unset = self.engine.adaptive_flags(self.spec.flags, self.schedule, config_path)
        what = f"drafting for running batches up to {self.first_off - 1} (measured C ≤ {self.drafting_up_to}), off from {self.first_off}"
        return {
            "description": f"{self.spec.name} with {what}, from pivot compare",
            "extends": self.spec.name,
            "measured_from": list(self.measured_from),
            **({"unset": unset} if unset else {}),
            "flags": flags,
        }

    def summary(self) -> str:
        return (
            f"{self.name}: extends {self.spec.name}, drafting for running batches up to {self.first_off - 1} "
            f"(measured C ≤ {self.drafting_up_to}), off from {self.first_off}"
        )


def written_profiles_dir(cfg: Config) -> Path:
    """Where pivot writes the profiles it makes: pivot.toml's profiles_dir if it names one, else beside pivot.toml
    (each is among profile_dirs)."""
    return cfg.profiles_dir or (cfg.path.parent / "profiles" if cfg.path else user_config_dir() / "profiles")


def plan(cfg: Config, cmp: Comparison) -> AdaptivePlan:
    """What to write for this comparison; raises NoAdaptiveProfile with the reason when nothing should be."""
    if cmp.a.speculative == cmp.b.speculative:
        both = "both draft" if cmp.a.speculative else "neither drafts"
        raise NoAdaptiveProfile(
            f"no adaptive profile: {label(cmp.a)} and {label(cmp.b)} {both}, so there is no speculation to switch by batch size"
        )
    if cmp.rates:  # an engine switches drafting by its running batch: a request rate names none
        raise NoAdaptiveProfile("no adaptive profile: its runs' levels are request rates, and drafting is switched by batch size")
    if cmp.helps_up_to is None:
        raise NoAdaptiveProfile(f"no adaptive profile: {recommendation(cmp)}")
    run = cmp.drafting
    profiles = load_profiles(*cfg.profile_dirs)
    try:
        spec = profiles.get(run.profile)
    except ProfileError:
        raise NoAdaptiveProfile(
            f"no adaptive profile: the drafting run's profile {run.profile!r} is not among the profiles here ({', '.join(profiles.names)})"
        ) from None
    found = spec.drafting
    if found is None:
        raise NoAdaptiveProfile(f"no adaptive profile: {spec.path} does not draft by its own flags, though {label(run)} did")
    measured = [lv.c for lv in cmp.levels]
    baseline = cmp.b if run is cmp.a else cmp.a
    schedule = spec.engine.schedule(
        Measured(
            spec.name,
            visible(baseline.profile),
            spec.argv(),
            found,
            cmp.helps_up_to,
            measured,
            run.meta.server.cuda_graph_bs if run.meta.server else None,
            run.meta.gpu_memory_mib,
        )
    )
    cut = schedule.drafting_up_to
    warnings = list(schedule.warnings)
    if imported := [r for r in (cmp.a, cmp.b) if r.meta.imported_from]:
        warnings.append(
            f"the evidence is aggregates imported from {' and '.join(sorted({r.meta.source or 'another tool' for r in imported}))} "
            f"({', '.join(map(label, imported))}), without per-request data: sweep the new profile with pivot to check "
            "where drafting stops paying off"
        )
    if open_kept := [lv.c for lv in cmp.levels if lv.c <= cut and not (lv.total.leader or lv.per_request.leader)]:
        warnings.append(f"drafting is kept at C = {', '.join(map(str, open_kept))}, where it is not shown to lose, nor to gain")
    name = f"{spec.name}-adaptive"
    return AdaptivePlan(
        name,
        written_profiles_dir(cfg) / f"{name}.toml",
        spec,
        schedule,
        {c: c <= cut for c in measured},
        (baseline.name, run.name),
        warnings,
    )


def spec_host(cfg: Config, cmp: Comparison) -> HostSpec | None:
    """The host the speculative run was measured on (or the default one), where the config must be."""
    if not cfg.hosts:
        return None
    host = cmp.drafting.meta.host
    return cfg.host(host if host in cfg.hosts else None)

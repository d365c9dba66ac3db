"""The comparison's recommendation made actionable: a profile that keeps drafting where it paid off and turns
it off above, in the form the engine itself reads (see ../shared/ENGINES.md; the contract tests run every
config written here through the engines' own validation and routing code).

- SGLang 0.5.23 (`sglang/srt/speculative/adaptive_spec_params.py`): a JSON file whose keys are batch sizes
  written as integer strings, each the lower bound of a tier: `{"1": {"candidate_steps": [3]},
  "11": {"candidate_steps": [0]}}`. A running batch is first padded up to the next captured CUDA-graph
  batch size, then routed to the tier with the largest key not above it; so to draft at batch B and not
  above, the "off" tier's key is pad(B) + 1. `--speculative-num-steps` must be one of the candidate steps.
- vLLM 0.33.0 (`vllm/v1/spec_decode/dynamic/utils.py`): inside the `--speculative-config` JSON string,
  `"num_speculative_tokens_per_batch_size": [[1, B, k], [B + 1, N, 0]]`, inclusive ranges starting at 1;
  the scheduler looks the running batch up without padding.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.config import Config, HostSpec, user_config_dir
from console.server.profiles import Profile, ProfileError, load_profiles
from console.server.speculation import (
    drafting,
    parse_flags,
    sglang_adaptive_unsupported,
    sglang_decode_batch_sizes,
    vllm_dynamic_unsupported,
)
from console.sweep.analysis.compare import Comparison, label
from console.sweep.words.comparison import recommendation
from console.untrusted import visible

SGLANG_DEFAULT_STEPS = 3  # `_auto_choose_speculative_params` (speculative_hook.py): 3 steps for most architectures
VLLM_DEFAULT_MAX_NUM_SEQS = 1024  # vLLM's default on an H100/H200 (`_set_default_max_num_seqs_and_batched_tokens_args`)


class NoAdaptiveProfile(Exception):
    """Why no adaptive profile can be written, in one line for the operator."""


def pad(batch: int, sizes: list[int] | None) -> int:
    """SGLang's `_pad_to_cuda_graph_bs`: the next captured size, or the batch itself beyond them or without graphs."""
    if not sizes:
        return batch
    i = bisect.bisect_left(sizes, batch)
    return sizes[i] if i < len(sizes) else batch


def sglang_tiers(drafting_up_to: int, steps: int, sizes: list[int] | None) -> dict[str, Any]:
    return {"1": {"candidate_steps": [steps]}, str(pad(drafting_up_to, sizes) + 1): {"candidate_steps": [0]}}


def sglang_steps_at(config: dict[str, Any], batch: int, sizes: list[int] | None) -> int:
    """The draft steps SGLang routes a running batch to (`AdaptiveSpeculativeParams._route`), for the
    one-candidate tiers pivot writes."""
    keys = sorted(int(k) for k in config if k.isdigit())
    i = bisect.bisect_right(keys, pad(batch, sizes)) - 1
    return int(config[str(keys[max(0, i)])]["candidate_steps"][0])


def sglang_schedule(cut: int, measured: list[int], steps: int, sizes: list[int] | None) -> tuple[int, dict[str, Any]]:
    """The tiers that draft at every measured C up to the cut and at none above it, and the cut they keep: a lower
    one when SGLang pads the cut and the next measured level to the same captured size (its tiers cannot tell
    them apart). Raises NoAdaptiveProfile when no measured level can be kept apart that way."""
    for candidate in [c for c in measured if c <= cut][::-1]:
        config = sglang_tiers(candidate, steps, sizes)
        if all((sglang_steps_at(config, c, sizes) > 0) == (c <= candidate) for c in measured):
            return candidate, config
    raise NoAdaptiveProfile(
        "no adaptive profile: SGLang's CUDA-graph padding routes the levels where drafting helps and those where it costs to the same tier"
    )


def vllm_schedule(drafting_up_to: int, tokens: int, max_num_seqs: int) -> list[list[int]]:
    return [[1, drafting_up_to, tokens], [drafting_up_to + 1, max(max_num_seqs, drafting_up_to + 1), 0]]


@dataclass(frozen=True)
class AdaptivePlan:
    name: str
    profile_path: Path  # the new profile, beside pivot.toml
    spec: Profile  # the speculative profile it extends
    drafting_up_to: int  # the largest measured C that keeps drafting
    first_off: int  # the smallest running batch that does not draft
    config: dict[str, Any]  # SGLang: the adaptive config file; vLLM: the whole --speculative-config object
    promises: dict[int, bool]  # each compared C: whether a batch of that size drafts
    measured_from: tuple[str, str]  # the comparison's runs: the baseline's, the drafting one's
    warnings: list[str] = field(default_factory=list)

    @property
    def engine(self) -> str:
        return self.spec.kind

    def profile_data(self, remote_config: str | None) -> dict[str, Any]:
        flags: dict[str, Any]
        unset: list[str] = []
        if self.engine == "sglang":
            flags = {"speculative-adaptive": True, "speculative-adaptive-config": remote_config or ""}
            if "speculative-num-steps" not in self.spec.flags:  # SGLang wants it among the candidate steps
                flags["speculative-num-steps"] = self.config["1"]["candidate_steps"][0]
        else:
            flags = {"speculative-config": json.dumps(self.config)}
            unset = [f for f in ("spec-method", "spec-model", "spec-tokens", "sc") if f in self.spec.flags]
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


def plan(cfg: Config, cmp: Comparison) -> AdaptivePlan:
    """What to write for this comparison; raises NoAdaptiveProfile with the reason when nothing should be."""
    if cmp.a.speculative == cmp.b.speculative:
        both = "both draft" if cmp.a.speculative else "neither drafts"
        raise NoAdaptiveProfile(
            f"no adaptive profile: {label(cmp.a)} and {label(cmp.b)} {both}, so there is no speculation to switch by batch size"
        )
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
    found = drafting(spec.kind, spec.argv(), spec.env)
    if found is None:
        raise NoAdaptiveProfile(f"no adaptive profile: {spec.path} does not draft by its own flags, though {label(run)} did")
    measured = [lv.c for lv in cmp.levels]
    cut = cmp.helps_up_to
    warnings: list[str] = []
    if spec.kind == "sglang":
        sizes = (run.meta.server and run.meta.server.cuda_graph_bs) or sglang_decode_batch_sizes(spec.argv(), run.meta.gpu_memory_mib)
        kept, config = sglang_schedule(cut, measured, found.steps or SGLANG_DEFAULT_STEPS, sizes)
        if kept != cut:
            warnings.append(
                f"SGLang pads C={cut} and the next level to the same CUDA-graph batch size: drafting stops above C={kept} instead"
            )
        cut, first_off = kept, pad(kept, sizes) + 1
        reason = sglang_adaptive_unsupported(spec.argv())
    elif spec.kind == "vllm":
        tokens = found.vllm_config.get("num_speculative_tokens")
        if not isinstance(tokens, int) or tokens < 1:
            raise NoAdaptiveProfile(
                f"no adaptive profile: {spec.name}'s --speculative-config has no num_speculative_tokens to keep below the crossover"
            )
        max_seqs = parse_flags(spec.argv()).get("max-num-seqs")
        schedule = vllm_schedule(
            cut, tokens, int(max_seqs) if isinstance(max_seqs, str) and max_seqs.isdigit() else VLLM_DEFAULT_MAX_NUM_SEQS
        )
        config = {**found.vllm_config, "num_speculative_tokens_per_batch_size": schedule}
        first_off = cut + 1
        reason = vllm_dynamic_unsupported(spec.argv(), config)
    elif spec.kind == "llamacpp":
        base = cmp.b if run is cmp.a else cmp.a
        raise NoAdaptiveProfile(
            f"no adaptive profile: llama.cpp's llama-server cannot switch drafting by batch size (its --spec-type and "
            "draft lengths are fixed at start, common/arg.cpp; its per-request speculative fields are compiled out, "
            f"tools/server/server-schema.cpp): run {spec.name} while at most {cut} requests run at once and "
            f"{visible(base.profile)} above (switch with pivot server switch, or serve both and route by load)"
        )
    else:
        raise NoAdaptiveProfile(f"no adaptive profile: pivot knows no batch-size speculation for {spec.kind} servers")
    if reason:
        warnings.append(
            f"{'SGLang' if spec.kind == 'sglang' else 'vLLM'} will not switch drafting by batch size with {spec.name}'s flags: {reason}"
        )
    if imported := [r for r in (cmp.a, cmp.b) if r.meta.imported_from]:
        warnings.append(
            f"the evidence is aggregates imported from {' and '.join(sorted({r.meta.source or 'another tool' for r in imported}))} "
            f"({', '.join(map(label, imported))}), without per-request data: sweep the new profile with pivot to check "
            "where drafting stops paying off"
        )
    if open_kept := [lv.c for lv in cmp.levels if lv.c <= cut and not (lv.total.leader or lv.per_request.leader)]:
        warnings.append(f"drafting is kept at C = {', '.join(map(str, open_kept))}, where it is not shown to lose, nor to gain")
    name = f"{spec.name}-adaptive"
    # pivot.toml's profiles_dir if it names one, else beside pivot.toml: each is among profile_dirs
    directory = cfg.profiles_dir or (cfg.path.parent / "profiles" if cfg.path else user_config_dir() / "profiles")
    baseline = cmp.b if run is cmp.a else cmp.a
    return AdaptivePlan(
        name, directory / f"{name}.toml", spec, cut, first_off, config, {c: c <= cut for c in measured}, (baseline.name, run.name), warnings
    )


def spec_host(cfg: Config, cmp: Comparison) -> HostSpec | None:
    """The host the speculative run was measured on (or the default one), where the config must be."""
    if not cfg.hosts:
        return None
    host = cmp.drafting.meta.host
    return cfg.host(host if host in cfg.hosts else None)

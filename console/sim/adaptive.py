"""SGLang's adaptive speculative decoding, as the simulated server runs it.

A port of `sglang/srt/speculative/adaptive_spec_params.py` from SGLang 0.5.23 (read in its published
wheel): the same config format, validation and error messages, the same default tiers, the same
padding of a running batch to the captured CUDA-graph batch sizes before the tier lookup, and the
same per-tier step selection from an exponential moving average of accepted drafts. The contract tests
hold this port to SGLang's own code, so the simulator refuses what SGLang refuses and drafts where
SGLang would.
"""

from __future__ import annotations

import bisect
import json
import math
from typing import Any

DEFAULT_ADAPTIVE_CONFIG: dict[str, dict[str, Any]] = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}


def load_adaptive_config(cfg_path: str | None) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """`_load_adaptive_config`: the whole config and its tiers by batch size; ValueError as SGLang raises it."""
    if cfg_path is not None:
        with open(cfg_path) as f:
            cfg = json.load(f)
    else:
        cfg = DEFAULT_ADAPTIVE_CONFIG
    bs_entries: dict[int, dict[str, Any]] = {}
    for key, entry in cfg.items():
        if not key.isdigit():
            continue
        steps = entry.get("candidate_steps")
        if not isinstance(steps, list) or not steps or not all(isinstance(s, int) and s >= 0 for s in steps):
            raise ValueError(f"BS {key}: candidate_steps must be a list of non-negative ints, got {steps!r}")
        bs_entries[int(key)] = entry
    if not bs_entries:
        raise ValueError(
            "speculative_adaptive_config must contain at least one integer-string "
            'BS key, e.g. {"1": {"candidate_steps": [1,3,7]}}. '
            f"Got keys: {list(cfg.keys())}"
        )
    return cfg, bs_entries


def candidate_steps_of(cfg_path: str | None) -> list[int]:
    """`resolve_candidate_steps_from_config`: the union of every tier's candidate steps."""
    _, bs_entries = load_adaptive_config(cfg_path)
    return sorted({s for entry in bs_entries.values() for s in entry["candidate_steps"]})


class StepSlot:
    """`AdaptiveStepSlot`: one tier's current step count, moved by the EMA of accepted drafts."""

    def __init__(self, initial_steps: int, cfg: dict[str, Any]):
        self.candidate_steps = sorted(set(cfg["candidate_steps"]))
        self.ema_alpha = cfg.get("ema_alpha", 0.2)
        self.update_interval = cfg.get("update_interval", 5)
        self.warmup_batches = cfg.get("warmup_batches", 10)
        self.down_hysteresis = cfg.get("down_hysteresis", -0.25)
        self.up_hysteresis = cfg.get("up_hysteresis", 0.0)
        self.ceiling_coeff = cfg.get("ceiling_coeff", 0)
        if initial_steps in self.candidate_steps:
            self.current_steps = initial_steps
        else:
            self.current_steps = self.candidate_steps[len(self.candidate_steps) // 2]
        self.ema_accept_len = float(self.current_steps - 1)
        self._batch_count = 0

    def update(self, correct_drafts_per_req: list[int]) -> bool:
        if not correct_drafts_per_req:
            return False
        if self.current_steps > 0:
            batch_avg = sum(correct_drafts_per_req) / len(correct_drafts_per_req)
            self.ema_accept_len = (1 - self.ema_alpha) * self.ema_accept_len + self.ema_alpha * batch_avg
        self._batch_count += 1
        if self._batch_count <= self.warmup_batches:
            return False
        if (self._batch_count - self.warmup_batches) % self.update_interval != 0:
            return False
        return self._recompute()

    def _recompute(self) -> bool:
        old = self.current_steps
        idx = old_idx = self.candidate_steps.index(old)
        if old == 0:  # probe the smallest positive step after a no-drafting interval
            idx = min(idx + 1, len(self.candidate_steps) - 1)
            target = self.candidate_steps[idx]
            if target > 0 and self.ema_accept_len < 0:
                self.ema_accept_len = float(target - 1)
            return self._apply(old, target)
        while idx > 0:
            prev = self.candidate_steps[idx - 1]
            threshold = (0.5 if prev == 0 else prev - 0.5) + self.down_hysteresis
            if self.ema_accept_len <= threshold:
                idx -= 1
            else:
                break
        if not idx < old_idx:
            while idx < len(self.candidate_steps) - 1:
                if self.ema_accept_len > self.candidate_steps[idx] - 0.5 + self.up_hysteresis:
                    idx += 1
                else:
                    break
        target = self.candidate_steps[idx]
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema_accept_len * self.ceiling_coeff))
            if ceiling < target <= old:
                while idx > 0 and self.candidate_steps[idx] > ceiling:
                    idx -= 1
                target = self.candidate_steps[idx]
        return self._apply(old, target)

    def _apply(self, old: int, target: int) -> bool:
        if target != old:
            self.current_steps = target
            return True
        return False


class AdaptiveParams:
    """`AdaptiveSpeculativeParams`: routes a running batch, padded to the captured CUDA-graph sizes, to a tier."""

    def __init__(self, initial_steps: int, cfg_path: str | None, cuda_graph_bs: list[int] | None):
        cfg, bs_entries = load_adaptive_config(cfg_path)
        self.bs_list = sorted(bs_entries)
        self.slots = {bs: StepSlot(initial_steps, {**cfg, **entry}) for bs, entry in sorted(bs_entries.items())}
        self.cuda_graph_bs = sorted(cuda_graph_bs) if cuda_graph_bs else None

    def route(self, batch_size: int) -> StepSlot:
        padded = batch_size
        if self.cuda_graph_bs is not None:
            i = bisect.bisect_left(self.cuda_graph_bs, batch_size)
            padded = self.cuda_graph_bs[i] if i < len(self.cuda_graph_bs) else batch_size
        i = bisect.bisect_right(self.bs_list, padded) - 1
        return self.slots[self.bs_list[max(0, i)]]

    def steps_for(self, batch_size: int) -> int:
        return self.route(batch_size).current_steps

    def on_verify(self, correct_drafts_per_req: list[int], batch_size: int) -> None:
        self.route(batch_size).update(correct_drafts_per_req)

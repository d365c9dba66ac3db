"""What the server says of its load and its speculation in its Prometheus text (/metrics), by engine: no HTTP here,
so that what only asks whether a server is busy (a sweep's check before it starts) does not load the load
generator's HTTP client."""

from __future__ import annotations

import contextlib
import math

SERVER_GAUGES = {  # Prometheus name -> our name
    "sglang:num_running_reqs": "running",
    "sglang:num_queue_reqs": "queued",
    "sglang:gen_throughput": "gen_tok_s",
    # SGLang 0.5.23 keeps speculation's figures as gauges of its last batches (srt/observability/metrics_collector.py):
    # accepted drafts over proposed ones, and tokens per verify step (accepted drafts + the bonus token)
    "sglang:spec_accept_rate": "spec_accept_rate",
    "sglang:spec_accept_length": "spec_accept_length",
    "sglang:spec_num_steps": "spec_steps",
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "queued",
    "llamacpp:requests_processing": "running",
    "llamacpp:requests_deferred": "queued",
}
SPEC_GAUGES = ("spec_accept_rate", "spec_accept_length")
# vLLM counts speculation instead: (drafts, draft tokens proposed, draft tokens accepted), summed over labels
# (vllm 0.33.0: vllm/v1/spec_decode/metrics.py; its own dashboard reads acceptance as accepted / draft tokens and the
# mean acceptance length as 1 + accepted / drafts). llama-server's counters of the same name are added to only when a
# slot is reset for its next task (tools/server/server-context.cpp, callback_on_reset): over a level they lag by a
# request per slot, so its acceptance comes from each request's own timings instead (console/sweep/metrics.py).
SPEC_COUNTERS = (
    ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total"),
)


def all_samples(text: str) -> dict[str, float]:
    """Every sample of the Prometheus text by name, summed over its labels; {} for text that is not Prometheus."""
    values: dict[str, float] = {}
    if not text:  # no /metrics (a server without it, or a check that got no answer): no parser loaded
        return values
    from prometheus_client.parser import text_string_to_metric_families

    with contextlib.suppress(ValueError, TypeError):
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                value = float(sample.value)
                if math.isfinite(value):
                    values[sample.name] = values.get(sample.name, 0.0) + value
    return values


def server_gauges(text: str) -> dict[str, float]:
    """The server's own view from its Prometheus text: running, queued, generation throughput, speculation."""
    samples = all_samples(text)
    return {ours: samples[name] for name, ours in SERVER_GAUGES.items() if name in samples}


def spec_counters(text: str) -> tuple[float, float, float] | None:
    """(drafts, draft tokens, accepted tokens) so far, for an engine that counts them; None for one that does not."""
    samples = all_samples(text)
    for names in SPEC_COUNTERS:
        if all(n in samples for n in names):
            drafts, proposed, accepted = (samples[n] for n in names)
            return drafts, proposed, accepted
    return None


def speculation(before: tuple[float, float, float] | None, after: tuple[float, float, float] | None) -> dict[str, float]:
    """A level's acceptance from the counters at its start and end: accepted over proposed draft tokens, and tokens per
    verify step (1 + accepted per draft); {} where the server counted no draft during the level (or restarted)."""
    if before is None or after is None:
        return {}
    drafts, proposed, accepted = (b - a for a, b in zip(before, after, strict=True))
    if drafts <= 0 or proposed <= 0 or accepted < 0 or accepted > proposed:
        return {}
    return {
        "spec_accept_rate": accepted / proposed,
        "spec_accept_length": 1 + accepted / drafts,
        "spec_draft_tokens": proposed,
        "spec_accepted_tokens": accepted,
    }

"""SGLang's `bench_serving --output-file` lines and vLLM's `vllm bench serve --save-result` files: one JSON object per
run, one run per concurrency, the same keys for the aggregates (vLLM's benchmark began as SGLang's). Read from their
published source:

- SGLang 0.5.23, sglang/benchmark/serving.py (`result`, and `result_details` with `--output-details`: input_lens,
  output_lens, ttfts, itls, generated_texts, errors; times in seconds, itls a list of gaps per request).
- vLLM 0.33.0, vllm/benchmarks/serve.py (`result`; `--save-detailed` keeps input_lens, output_lens, start_times, ttfts,
  itls, generated_texts, errors, else removes them; latencies stays; vLLM adds endpoint_type, label, model_id,
  tokenizer_id).

With the per-request arrays a level gets pivot's own figures and intervals (per_request.py); without them, the
aggregates alone (the comparison takes those as ±POINT_SPREAD)."""

from __future__ import annotations

import math
from typing import Any

from console.sweep.model import LevelDone
from console.sweep.runs.imports.per_request import level_of, record

DETAILS = ("ttfts", "itls", "output_lens")


def source_of(line: dict[str, Any]) -> str:
    return "vllm bench serve" if "endpoint_type" in line or "tokenizer_id" in line else "sglang bench_serving"


def _ms(value: Any) -> float | None:
    return None if value is None else float(value) / 1000.0


SETTINGS = ("request_rate", "burstiness", "random_range_ratio")  # what the tool was asked ("inf": as fast as it can)


def _checked(line: dict[str, Any]) -> None:
    """Every number measured a finite, non-negative one: NaN, infinities and negative counts are no measurement."""
    for key, value in line.items():
        if key in SETTINGS:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{key} is {value}, not a measurement")
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"{key} is negative ({value})")


def concurrency(line: dict[str, Any]) -> int:
    c = line.get("max_concurrency")
    if not isinstance(c, int | float) or isinstance(c, bool) or c < 1:
        raise ValueError("no max_concurrency (run with --max-concurrency): pivot compares runs by concurrency")
    return int(c)


def _per_request(c: int, line: dict[str, Any]) -> LevelDone:
    ttfts, itls, lens = (line[k] for k in DETAILS)
    errors = line.get("errors") or [None] * len(ttfts)
    latencies, starts = line.get("latencies"), line.get("start_times")
    if not all(isinstance(x, list) and len(x) == len(ttfts) for x in (itls, lens, errors)):
        raise ValueError("ttfts, itls, output_lens and errors are not one entry per request")
    t0 = min(starts) if isinstance(starts, list) and len(starts) == len(ttfts) and starts else None
    records = []
    for i, (ttft, gaps, tokens, error) in enumerate(zip(ttfts, itls, lens, errors, strict=True)):
        e2e = latencies[i] if isinstance(latencies, list) and len(latencies) == len(ttfts) else ttft + sum(gaps or ())
        records.append(
            record(
                c,
                i,
                start=float(starts[i]) - t0 if t0 is not None and starts is not None else 0.0,
                ttft=float(ttft),
                e2e=float(e2e),
                tokens=int(tokens or 0),
                gaps=[float(g) for g in gaps or ()],
                error=str(error) if error else None,
            )
        )
    return level_of(c, records, float(line["duration"]))


def level(line: dict[str, Any]) -> LevelDone:
    """One run of the tool as one level: from its per-request arrays where it kept them, else its aggregates."""
    _checked({k: v for k, v in line.items() if not isinstance(v, list | dict)})
    c = concurrency(line)
    if all(isinstance(line.get(k), list) and line.get(k) for k in DETAILS) and isinstance(line.get("duration"), int | float):
        return _per_request(c, line)
    tpot = line.get("mean_tpot_ms")
    return LevelDone.model_validate(
        {
            "c": c,
            "requests": int(line.get("completed", 0)) + int(line.get("failed") or 0),
            "errors": int(line.get("failed") or 0),
            "wall_s": line.get("duration"),
            "output_tokens": line.get("total_output_tokens", line.get("total_output")),
            "total_tok_s": float(line["output_throughput"]),
            "req_tok_s_mean": 1000.0 / tpot if tpot else None,
            "ttft_p50": _ms(line.get("median_ttft_ms")),
            "ttft_p90": _ms(line.get("p90_ttft_ms")),
            "ttft_p99": _ms(line.get("p99_ttft_ms")),
            "itl_p50": _ms(line.get("median_itl_ms")),
            "itl_p90": _ms(line.get("p90_itl_ms")),
            "itl_p99": _ms(line.get("p99_itl_ms")),
            "e2e_p50": _ms(line.get("median_e2e_latency_ms", line.get("median_e2el_ms"))),
            "e2e_p90": _ms(line.get("p90_e2e_latency_ms", line.get("p90_e2el_ms"))),
            "e2e_p99": _ms(line.get("p99_e2e_latency_ms", line.get("p99_e2el_ms"))),
            "requests_per_s": line.get("request_throughput"),
        },
        strict=False,
    )

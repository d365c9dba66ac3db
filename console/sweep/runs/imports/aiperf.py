"""AIPerf's `aiperf profile` artifacts, read as AIPerf 0.13.0 writes them (site-packages/aiperf/):

- profile_export_aiperf.json (exporters/metrics_json_exporter.py, the model JsonExportData in
  common/models/export_models.py, schema_version "1.4"): each metric {"unit", "avg", "p50", …}; the run's
  concurrency in input_config.phases[] (the "profiling" phase's "concurrency"), its length in benchmark_duration (s).
- profile_export.jsonl beside it (post_processors/record_export_jsonl_writer.py, MetricRecordInfo in
  common/models/record_models.py): one request a line, {"metadata": {request_start_ns, benchmark_phase, …},
  "metrics": {name: {"value", "unit"}}, "error"?}; times in ms, inter_chunk_latency a list of gaps in ms.

With the records a level gets pivot's own intervals; the summary alone gives aggregates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from console.sweep.model import LevelDone
from console.sweep.runs.imports.per_request import level_of, record

SUMMARY = "profile_export_aiperf.json"
RECORDS = "profile_export.jsonl"
SOURCE = "aiperf"


def is_summary(obj: Any) -> bool:
    return isinstance(obj, dict) and "aiperf_version" in obj and "input_config" in obj


def _avg(summary: dict[str, Any], key: str) -> float | None:
    metric = summary.get(key)
    value = metric.get("avg") if isinstance(metric, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def concurrency(summary: dict[str, Any]) -> int:
    phases = (summary.get("input_config") or {}).get("phases") or []
    found = [p.get("concurrency") for p in phases if isinstance(p, dict) and p.get("kind") == "profiling"]
    if not found or not isinstance(found[0], int) or found[0] < 1:
        raise ValueError("no profiling phase with a concurrency (run aiperf with --concurrency): pivot compares runs by concurrency")
    return found[0]


def _ms(metrics: dict[str, Any], key: str) -> float | None:
    m = metrics.get(key)
    if not isinstance(m, dict) or m.get("value") is None:
        return None
    if m.get("unit") != "ms":
        raise ValueError(f"{key} is in {m.get('unit')!r}, not ms")
    return float(m["value"]) / 1000.0


def _records(c: int, lines: list[dict[str, Any]]) -> list[Any]:
    profiled = [line for line in lines if (line.get("metadata") or {}).get("benchmark_phase") == "profiling"]
    if not profiled:
        raise ValueError(f"{RECORDS} holds no profiling request")
    t0 = min(int(line["metadata"]["request_start_ns"]) for line in profiled)
    records = []
    for i, line in enumerate(profiled):
        meta, metrics = line["metadata"], line.get("metrics") or {}
        start = (int(meta["request_start_ns"]) - t0) / 1e9
        if line.get("error"):
            error = line["error"]
            records.append(record(c, i, start=start, ttft=None, e2e=None, tokens=0, error=str(error.get("type") or error)))
            continue
        gaps = (metrics.get("inter_chunk_latency") or {}).get("value") or []
        tokens = (metrics.get("output_token_count") or metrics.get("output_sequence_length") or {}).get("value")
        records.append(
            record(
                c,
                i,
                start=start,
                ttft=_ms(metrics, "time_to_first_token"),
                e2e=_ms(metrics, "request_latency"),
                tokens=int(tokens or 0),
                gaps=[float(g) / 1000.0 for g in gaps],
            )
        )
    return records


def level(summary: dict[str, Any], directory: Path) -> LevelDone:
    """The run as one level: from the per-request records beside the summary where they are, else its aggregates."""
    c = concurrency(summary)
    duration = _avg(summary, "benchmark_duration")
    beside = directory / RECORDS
    if beside.is_file() and duration:
        text = beside.read_text(encoding="utf-8", errors="replace")
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        return level_of(c, _records(c, lines), duration)
    throughput = _avg(summary, "output_token_throughput")
    if throughput is None:
        raise ValueError("no output_token_throughput")
    speed = _avg(summary, "output_token_throughput_per_user")
    p = lambda key, q: (summary.get(key) or {}).get(q)
    ms = lambda v: None if v is None else float(v) / 1000.0
    return LevelDone.model_validate(
        {
            "c": c,
            "requests": int(_avg(summary, "completed_request_count") or _avg(summary, "request_count") or 0),
            "errors": int(_avg(summary, "error_request_count") or 0),
            "wall_s": duration,
            "output_tokens": int(_avg(summary, "total_output_tokens") or 0) or None,
            "total_tok_s": throughput,
            "req_tok_s_mean": speed,
            "ttft_p50": ms(p("time_to_first_token", "p50")),
            "ttft_p90": ms(p("time_to_first_token", "p90")),
            "ttft_p99": ms(p("time_to_first_token", "p99")),
            "itl_p50": ms(p("inter_token_latency", "p50")),
            "itl_p90": ms(p("inter_token_latency", "p90")),
            "itl_p99": ms(p("inter_token_latency", "p99")),
            "e2e_p50": ms(p("request_latency", "p50")),
            "e2e_p90": ms(p("request_latency", "p90")),
            "e2e_p99": ms(p("request_latency", "p99")),
            "requests_per_s": _avg(summary, "request_throughput"),
        },
        strict=False,
    )

"""guidellm's `guidellm run` report (`--output-path report.json`), read as guidellm 0.8.1 writes it
(site-packages/guidellm/): GenerativeBenchmarksReport (benchmark/schemas/report.py, metadata.version 2) holds
`benchmarks`, each a GenerativeBenchmark (benchmark/schemas/benchmark.py) with its strategy in config.strategy
(scheduler/strategies.py: "concurrent" with `streams`, or "synchronous": one at a time), its `duration` in seconds and
its requests in requests.successful / errored (GenerativeRequestStats, schemas/base/request_stats.py: epoch seconds in
info.timings, time_to_first_token_ms, output_tokens). Each concurrent benchmark is a level with pivot's own intervals;
a rate-driven one (constant, poisson, throughput, sweep) has no concurrency to compare by and is refused."""

from __future__ import annotations

from typing import Any

from console.sweep.model import LevelDone
from console.sweep.runs.imports.per_request import level_of, record

SOURCE = "guidellm"


def is_report(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("benchmarks"), list) and "guidellm_version" in (obj.get("metadata") or {})


def concurrency(benchmark: dict[str, Any]) -> int:
    strategy = (benchmark.get("config") or {}).get("strategy") or {}
    strategy_type = strategy.get("type_")
    if strategy_type == "synchronous":
        return 1
    streams = strategy.get("streams") or strategy.get("max_concurrency")
    if strategy_type != "concurrent" or not isinstance(streams, int) or streams < 1:
        raise ValueError(
            f"a {strategy_type!r} benchmark has no fixed concurrency (run guidellm with a concurrent profile): pivot compares runs by it"
        )
    return streams


def _gaps(timings: dict[str, Any]) -> list[float]:
    """The gaps between a request's token arrivals: guidellm keeps the first and last and how many, not each one, so
    they are taken as even."""
    first, last, n = timings.get("first_token_iteration"), timings.get("last_token_iteration"), timings.get("token_iterations")
    if not isinstance(n, int) or n < 2 or first is None or last is None:
        return []
    return [(float(last) - float(first)) / (n - 1)] * (n - 1)


def level(benchmark: dict[str, Any]) -> LevelDone:
    c = concurrency(benchmark)
    requests = benchmark.get("requests") or {}
    done = [(r, None) for r in requests.get("successful") or []] + [(r, "errored") for r in requests.get("errored") or []]
    if not done:
        raise ValueError("no requests kept (guidellm's report holds none for this benchmark)")
    t0 = min(float(r["request_start_time"] if r.get("request_start_time") is not None else r["info"]["started_at"]) for r, _ in done)
    records = []
    for i, (r, failed) in enumerate(done):
        info = r.get("info") or {}
        start = float(r.get("request_start_time") or info.get("started_at") or t0) - t0
        if failed:
            records.append(record(c, i, start=start, ttft=None, e2e=None, tokens=0, error=str(info.get("error") or failed)))
            continue
        ttft = r.get("time_to_first_token_ms")
        records.append(
            record(
                c,
                i,
                start=start,
                ttft=None if ttft is None else float(ttft) / 1000.0,
                e2e=float(r["request_latency"]),
                tokens=int(r.get("output_tokens") or 0),
                gaps=_gaps(info.get("timings") or {}),
            )
        )
    return level_of(c, records, float(benchmark["duration"]))

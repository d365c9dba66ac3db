"""What the server says of itself, and whether it answers: /v1/models, /server_info, /metrics.

Read before a sweep (its model, limits, CUDA-graph batch sizes, speculation, current load), scraped beside each
level, and polled after a failed level to know whether it is worth measuring again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson

from console.sweep.loadgen.gauges import SPEC_GAUGES, all_samples, server_gauges
from console.sweep.model import ServerFacts, ServerMetrics
from console.untrusted import decode, visible

HTTP_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)
MAX_BODY = 1 << 20  # what is read of an answer here: the server's word, not a measurement


async def get(client: aiohttp.ClientSession, path: str, timeout: float) -> tuple[int, bytes]:
    """A GET's status and (the first MiB of) its body; raises one of HTTP_ERRORS."""
    async with client.get(path, timeout=aiohttp.ClientTimeout(total=timeout), allow_redirects=False) as response:
        body = bytearray()
        while len(body) < MAX_BODY and (part := await response.content.read(MAX_BODY - len(body))):
            body += part
        return response.status, bytes(body)


async def metrics_text(client: aiohttp.ClientSession) -> str | None:
    with contextlib.suppress(*HTTP_ERRORS):
        status, body = await get(client, "/metrics", 5)
        if status == 200:
            return decode(body)
    return None


class GaugeMeans:
    """The server's gauges over a level's scrapes: each one's mean (a NaN gauge is no measurement), and at each scrape
    the requests the server held (running and queued) beyond those this client had in flight: another client's."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.beyond_ours: list[float] = []

    def add(self, values: dict[str, float], ours: int | None = None) -> None:
        if "running" in values and ours is not None:
            self.beyond_ours.append(values["running"] + values.get("queued", 0.0) - ours)
        if values.get("spec_accept_length") == 0 or values.get("spec_steps") == 0:
            # no drafting in the steps the gauges cover (SGLang sets them to 0 then) or none now: no acceptance to
            # average in; counted as 0 it made an adaptive run's levels read 0.6 tokens a step, below the one a
            # step always keeps
            values = {k: v for k, v in values.items() if k not in SPEC_GAUGES}
        for k, v in values.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
            self.counts[k] = self.counts.get(k, 0) + 1

    def means(self) -> dict[str, float]:
        return {k: mean for k, total in self.sums.items() if math.isfinite(mean := total / self.counts[k])}


def shared_with(beyond_ours: list[float], c: int, name: str | None = None) -> str | None:
    """Why a level of C requests in flight is not a measurement of C: in most of its scrapes, at least two, the server
    held more than C/20 requests (and at least one) beyond this client's in flight at that moment (a request just
    finished may still be counted for a moment, so one scrape is not enough). None where it did not share, or the
    scrapes are too few to say."""
    over = [n for n in beyond_ours if n > c // 20]
    if len(beyond_ours) < 2 or 2 * len(over) <= len(beyond_ours):
        return None
    others = round(statistics.median(over))
    return f"another client held about {others} request(s) beside {name or f'C={c}'}, by the server's own count"


IDENTITY = (
    "model",
    "version",
    "tp_size",
    "max_running_requests",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_adaptive",
)


def _lifetime_counters(text: str) -> dict[str, float]:
    """The samples that only grow while a server process lives: Prometheus counters, summed over their labels (a
    `_created` time is not one: a new label's own time moves that sum)."""
    return {k: v for k, v in all_samples(text).items() if k.endswith("_total")}


class ServerWatch:
    """The server a sweep began on, and whether the one answering now is still it: what it says of itself
    (/server_info, its model) and counters that fall back only when its process is replaced. `changed` holds why,
    once seen: the sweep stops there (a resume measures the rest on the server then, if it is the profile's)."""

    def __init__(self, facts: ServerFacts) -> None:
        self.facts = facts
        self.counters: dict[str, float] = {}
        self.changed: str | None = None

    def see(self, text: str | None) -> str | None:
        """The counters read now; why the server is not the one read before (None: it is, or cannot be told)."""
        now = _lifetime_counters(text or "")
        if not now:
            return None
        before, self.counters = self.counters, now
        if any(now[k] < v for k, v in before.items() if k in now):
            self.changed = self.changed or "the server was restarted (its counters began again)"
        return self.changed

    async def check(self, session: aiohttp.ClientSession) -> str | None:
        """Asks the server now: why it is not the one the sweep began on (None: it is, or cannot be told)."""
        facts = await server_facts(session)
        if facts.model is not None:  # it answered: what it says of itself is its word
            said = [
                f"{k} {_said(getattr(self.facts, k))}, now {_said(getattr(facts, k))}"
                for k in IDENTITY
                if getattr(self.facts, k) != getattr(facts, k)
            ]
            if said:
                self.changed = self.changed or f"the server was replaced ({'; '.join(said)})"
        if facts.metrics:
            self.see(await metrics_text(session))
        return self.changed


def _said(value: object) -> str:
    return "none" if value is None else visible(str(value))


async def scrape(
    session: Callable[[], aiohttp.ClientSession],
    c: int,
    emit: Callable[[ServerMetrics], None],
    gauges: GaugeMeans,
    watch: ServerWatch | None = None,
    ours: Callable[[], int | None] = lambda: None,
) -> None:
    """session: the client's current one (it changes when the server turns out to close kept-alive connections);
    ours: this client's requests in flight now."""
    while True:
        with contextlib.suppress(*HTTP_ERRORS, ValueError):
            status, body = await get(session(), "/metrics", 5)
            if status == 200:
                text = decode(body)
                if watch is not None:
                    watch.see(text)
                values = server_gauges(text)
                if values:
                    gauges.add(values, ours())
                    emit(ServerMetrics.model_validate({"c": c, **values}))  # the gauges as fields of their own
        await asyncio.sleep(1.0)


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:  # a number past 64 bits, say: json reads it, and the checks below judge it
        return json.loads(body)


async def server_facts(client: aiohttp.ClientSession) -> ServerFacts:
    """What the server says of itself: model, limits, CUDA-graph batch sizes, speculation, current load."""
    facts: dict[str, Any] = {}
    with contextlib.suppress(*HTTP_ERRORS, ValueError, KeyError, IndexError, TypeError, RecursionError):
        model = _json((await get(client, "/v1/models", 10))[1])["data"][0]["id"]
        if isinstance(model, str):
            facts["model"] = model
    for path in ("/server_info", "/get_server_info"):
        with contextlib.suppress(*HTTP_ERRORS, ValueError, TypeError, AttributeError, RecursionError):
            status, body = await get(client, path, 10)
            if status == 200 and isinstance(info := _json(body), dict):
                facts.update(
                    {
                        k: info[k]
                        for k in (
                            "max_running_requests",
                            "speculative_algorithm",
                            "speculative_num_steps",
                            "speculative_eagle_topk",
                            "speculative_adaptive",
                            "tp_size",
                            "version",
                        )
                        if k in info
                    }
                )  # a value not of its type is dropped by ServerFacts
                graphs = (info.get("cuda_graph_config") or {}).get("decode") or {}  # SGLang 0.5.23's resolved graphs
                if isinstance(graphs.get("bs"), list) and all(isinstance(b, int) for b in graphs["bs"]):
                    facts["cuda_graph_bs"] = sorted(graphs["bs"])
                if isinstance(graphs.get("max_bs"), int):
                    facts["cuda_graph_max_bs"] = graphs["max_bs"]
                elif isinstance(info.get("cuda_graph_max_bs"), int):  # older releases
                    facts["cuda_graph_max_bs"] = info["cuda_graph_max_bs"]
                break
    with contextlib.suppress(*HTTP_ERRORS, ValueError):
        status, body = await get(client, "/metrics", 10)
        facts["metrics"] = status == 200
        if facts["metrics"]:
            gauges = server_gauges(decode(body))
            facts["busy"] = {k: int(gauges[k]) for k in ("running", "queued") if k in gauges}
    return ServerFacts.model_validate(facts)


def warnings_for(levels: list[int], facts: ServerFacts) -> list[str]:
    warnings = []
    for key, what, effect in (
        ("max_running_requests", "max_running_requests", "requests wait in its queue: the queue is measured too"),
        ("cuda_graph_max_bs", "largest CUDA-graph batch", "those batches decode without graphs, in slower steps"),
    ):
        limit = getattr(facts, key)
        if limit is not None:
            over = [c for c in levels if c > limit]
            if over:
                which = f"level {over[0]} exceeds" if len(over) == 1 else f"levels {', '.join(map(str, over))} exceed"
                warnings.append(f"{which} the server's {what} ({limit}): {effect}")
    busy = facts.busy or {}
    if busy.get("running") or busy.get("queued"):
        warnings.append(
            f"the server was already serving {busy.get('running', 0)} request(s) ({busy.get('queued', 0)} queued) "
            "before the sweep: another client's load is in these numbers"
        )
    return warnings


async def server_answers(client: aiohttp.ClientSession, within_s: float) -> bool:
    """Whether the server answers /v1/models again within the bound (a link that reconnects, a server that recovers)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with contextlib.suppress(*HTTP_ERRORS):
            if (await get(client, "/v1/models", 5))[0] == 200:
                return True
        await asyncio.sleep(1.0)
    return False

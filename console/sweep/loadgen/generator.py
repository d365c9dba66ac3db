"""The load generator's work, wherever it runs (console/sweep/loadgen/__main__.py on the console's machine, on_host.py on the GPU
host): for each level, exactly C streaming requests in flight until the level's requests are done, each request's
record an event, the level's figures with how far the client itself can be trusted (its CPU, its loop's lateness).

Everything the server sends is untrusted: a malformed chunk, an endless or stalled stream, an unterminated line or an
impossible token count fails that one request with its reason; a level with too many failures is marked failed (never
averaged into a verdict), the sweep waits a bounded time for the server to answer again and runs the level once more,
or stops with the reason.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from console.engines import ENGINES, Engine

if TYPE_CHECKING:
    import aiohttp
from console.settings import SweepSettings, level_name
from console.sweep.capacity import AGAIN, LEAST_REQUESTS, MOST_C, SAID, CapacitySearch, decide
from console.sweep.level_stats import LevelStats, Moments, Quantiles
from console.sweep.loadgen.feed import Arrivals, Feed, Share, requests_from, schedule, sender, watch_lag
from console.sweep.loadgen.gauges import spec_counters, speculation
from console.sweep.loadgen.requests import Client, TokensPerChunk, UniquePrompts
from console.sweep.loadgen.server_view import (
    GaugeMeans,
    ServerWatch,
    metrics_text,
    scrape,
    server_answers,
    server_facts,
    shared_with,
    warnings_for,
)
from console.sweep.loadgen.workers import WorkerFailed, WorkerLevel, Workers
from console.sweep.metrics import FAILED_ERROR_RATE, RequestRecord, percentile
from console.sweep.model import (
    MIN_POWER_READINGS,
    ClientPlacement,
    Event,
    LevelDone,
    LevelProgress,
    LevelRetry,
    LevelStarted,
    PromptSource,
    Request,
    Said,
    SweepDone,
    SweepStarted,
)

PROGRESS_S = 1.0  # how often a level in progress says how far it is


class Sink(Protocol):
    """Where the generator's events go: kept with the run (emit) or only shown (show, news of a level in progress)."""

    def emit(self, event: Event) -> None: ...

    def show(self, event: LevelProgress | Said) -> None: ...

    def sync(self) -> None: ...


def behind_schedule(arrivals: Arrivals, rate: float) -> str | None:
    """Why a rate level did not offer its rate: the client sent late against its schedule (by a tenth of the mean gap,
    at p90), or arrivals waited for max_in_flight. None when it kept the schedule."""
    if arrivals.held:
        return f"{arrivals.held} arrival(s) waited for max_in_flight ({arrivals.most} in flight): the rate was not offered"
    late = percentile(arrivals.lateness, 90)
    if late is not None and late > max(0.002, 0.1 / rate):
        return f"the load generator sent late against its schedule (p90 {late * 1000:.1f} ms, a gap is {1000 / rate:.0f} ms on average)"
    return None


def client_bound(cpu: float, processes: int = 1) -> str | None:
    """Why this level's throughput may be the client's limit, not the server's; None when the client kept up. cpu: the
    busiest of its processes' share of a core."""
    if cpu >= 0.9:
        who = "the load generator" if processes == 1 else f"one of the load generator's {processes} processes"
        return f"{who} used {cpu:.0%} of a core: it, not the server, may be the limit"
    return None


def lagging(lag_p90: float | None, itl_mean: float | None) -> str | None:
    """Why this level's latencies cannot be trusted: chunks are stamped when the client's loop gets to them, so a
    loop that runs late by a good part of an inter-token gap bunches them. Bursts the server itself sends (a drafting
    server's accepted tokens) are what it does, measured per token (RequestRecord.arrivals), not the client's fault."""
    if lag_p90 is not None and lag_p90 >= max(0.002, 0.25 * (itl_mean or 0)):
        against = f" against an ITL of {itl_mean * 1000:.1f} ms" if itl_mean else ""
        return f"the load generator's loop ran late (p90 {lag_p90 * 1000:.1f} ms{against})"
    return None


HostLoad = Callable[[], Awaitable[float | None]]
PowerMeter = Callable[[], Awaitable[float | None]]  # the server host's GPUs' power now, summed, in W; None: unknown
POWER_QUERY = ("nvidia-smi", "--query-gpu=power.draw", "--format=csv,noheader,nounits")  # as the telemetry agent reads it
POWER_EVERY_S = 0.25  # a reading each quarter second while the level's requests are in flight
# NVIDIA's power.draw is an average over about the last second on Ampere and later (NVML nvmlDeviceGetPowerUsage): a
# reading is the level's only from a second after its load began; a figure needs at least this many such readings
POWER_WINDOW_S = 1.0


def gpus_here(address: str | None, nodes: list[str] | None) -> bool:
    """Whether the server's GPUs are those of the host the client reaches it from (its loopback, one node)."""
    return address in (None, "127.0.0.1", "localhost", "::1") and not nodes


def gpu_watts(csv: str) -> float | None:
    """nvidia-smi's power.draw rows, summed; None where any GPU has no reading ([N/A], [Not Supported]) or there is
    no GPU: a sum without one GPU's share would understate the energy."""
    values = []
    for line in csv.splitlines():
        if line.strip():
            try:
                value = float(line)
            except ValueError:
                return None
            if not math.isfinite(value) or value < 0:
                return None
            values.append(value)
    return sum(values) if values else None


def power_figures(watts: list[float]) -> dict[str, float | int | None]:
    """The level's mean power and its 95 % interval over the readings, and how many there were; no figure from fewer
    than MIN_POWER_READINGS (a short level: its J/tok is shown as unknown, with the count, not as a low number)."""
    if not watts:
        return {}
    if len(watts) < MIN_POWER_READINGS:
        return {"power_readings": len(watts)}
    power = Moments()
    for w in watts:
        power.add(w)
    figures: dict[str, float | int | None] = {"power_readings": power.n, "gpu_watts": power.mean}
    if (interval := power.interval()) is not None:
        _, lo, hi = interval
        figures |= {"gpu_watts_lo": max(0.0, lo), "gpu_watts_hi": hi}
    return figures


async def sample_power(meter: PowerMeter, samples: list[float], in_flight: Callable[[], int]) -> None:
    """Every POWER_EVERY_S while the level's requests are in flight, from POWER_WINDOW_S after the first was: the GPUs'
    power. Evenly spaced, so their mean is the level's; a reading that failed is skipped, and so is one taken while
    nothing was in flight (the level's tail, a pause): an idle GPU's reading would lower its figure."""
    while not in_flight():  # noqa: ASYNC110 (a count the level keeps, not an event it sets)
        await asyncio.sleep(0.05)
    await asyncio.sleep(POWER_WINDOW_S)
    while True:
        began = time.monotonic()
        if in_flight() and (watts := await meter()) is not None and in_flight():
            samples.append(watts)
        await asyncio.sleep(max(0.0, POWER_EVERY_S - (time.monotonic() - began)))


async def run_level(
    client: Client,
    settings: SweepSettings,
    pool: list[Any] | UniquePrompts,
    model: str,
    c: int,
    sink: Sink,
    scrape_metrics: bool,
    per_chunk: TokensPerChunk,
    host_load: HostLoad | None,
    repeat: bool = False,
    ignore_eos: bool = True,
    nodes: list[str] | None = None,
    reference: bool = False,
    power: PowerMeter | None = None,
    workers: Workers | None = None,
    watch: ServerWatch | None = None,
    requests: int | None = None,
    answers: list[int] | None = None,
    offset: int = 0,
) -> LevelDone:
    """One level to its end; nodes: the hosts of a server across nodes (each rank serves every request), written in
    the level's row; reference: the sweep's first level measured again, for its drift; power: reads the server's GPUs'
    power, for the level's energy; workers: the sweep's worker processes, where the level needs more than this one;
    watch: the server the sweep began on. A level is failed (not a measurement of C) when the server was replaced
    or restarted, or another client's requests shared it (by the server's own count); requests: how many to measure
    (a level cut short before: what it lacks), else the settings'; answers: each prompt's answer in tokens, for
    output_lengths = "set"; offset: where in the level's order of prompts it begins (after its attempts before).
    Aborted, the requests that finished are kept, as a level cut short."""
    total = requests if requests is not None else settings.requests_for(c)
    processes = settings.workers_for(c, os.cpu_count()) if workers is not None else 1
    sink.emit(LevelStarted(c=c, requests=total, warmup=settings.warmup, repeat=repeat, reference=reference, rate=settings.rate(c)))
    if workers is not None and processes > 1:
        try:
            await workers.start(processes)  # before the level's clock starts: a python starting is not the level's time
        except WorkerFailed as e:
            sink.show(Said(type="notice", message=f"{e}: this level is sent by the load generator alone"))
            processes = 1
    level_t0 = time.monotonic()
    cpu0 = time.process_time()
    share = Share(
        end=None if settings.duration_s else total + settings.warmup,
        deadline=level_t0 + settings.duration_s if settings.duration_s else None,
    )
    errors = 0
    stats = LevelStats(c)  # each request is added as it finishes, and streamed out, not kept
    gauges = GaugeMeans()
    lags = Quantiles()
    give_up = max(2.0, FAILED_ERROR_RATE * total)  # past this many failures the level is failed: stop feeding it
    level: Feed | WorkerLevel
    made: list[Feed | WorkerLevel] = []  # the level once made (the server's scrapes begin before it)
    rate = settings.rate(c)

    def finished(record: RequestRecord, event: dict[str, Any] | None = None) -> None:
        nonlocal errors
        errors += not record.ok
        if errors > give_up:
            level.stop()
        stats.add(record)
        sink.emit(Request.model_construct(**(event or record.to_dict())))  # made here, from a record: checked already

    seen0 = per_chunk.seen

    async def progress() -> None:
        """Once a second while the level runs: requests in flight and tokens streamed so far, so that a long first
        wave (no request finished yet) visibly moves."""
        while True:
            await asyncio.sleep(PROGRESS_S)
            streamed = level.streamed if isinstance(level, WorkerLevel) else round((per_chunk.seen - seen0) * per_chunk.ratio)
            sink.show(LevelProgress(c=c, in_flight=level.in_flight, streamed=streamed))

    helpers = [asyncio.create_task(watch_lag(lags))]
    watts: list[float] = []
    if power is not None:
        helpers.append(asyncio.create_task(sample_power(power, watts, lambda: sum(m.in_flight for m in made))))
    counted_before = None
    if scrape_metrics:
        text = await metrics_text(client.session())
        counted_before = spec_counters(text or "")
        if watch is not None:
            watch.see(text)
        helpers.append(asyncio.create_task(scrape(client.session, c, sink.emit, gauges, watch, lambda: sum(m.in_flight for m in made))))
    failed = None
    try:
        if workers is not None and processes > 1:
            level = workers.level(processes, c, share.end, share.deadline, level_t0, finished, offset)
            made.append(level)
            helpers.append(asyncio.create_task(progress()))
            try:
                await level.wait()
            except WorkerFailed as e:
                failed = str(e)
        else:
            if rate is None:
                level = Feed(share)
            else:  # open loop: on a schedule of its own for each level, seeded, the same for a run of the same settings
                times = schedule(rate, settings.arrival, settings.burstiness, share.end, f"{settings.seed}:{c}:{offset}:arrivals")
                level = Arrivals(share, times, settings.max_in_flight)
            made.append(level)
            helpers.append(asyncio.create_task(progress()))
            send = sender(
                client,
                settings,
                requests_from(pool, settings, c, answers=answers, offset=offset),
                model,
                c,
                level_t0,
                per_chunk,
                ignore_eos,
            )
            await level.run(c, send, finished)
    except asyncio.CancelledError:  # aborted mid-level: what finished is kept, and said to be short
        if stats.counted and not settings.duration_s:
            wall = time.monotonic() - level_t0
            cut = stats.metrics(wall, gauges.means()).model_dump()
            sink.emit(LevelDone.model_validate({**cut, "repeat": repeat, "reference": reference, "lacking": max(0, total - stats.counted)}))
            sink.sync()
        raise
    finally:
        for helper in helpers:
            helper.cancel()
    wall = time.monotonic() - level_t0
    cpu = (time.process_time() - cpu0) / wall if wall > 0 else 0.0
    lag = [lags.percentile(q) for q in (50, 90, 99)]
    if isinstance(level, WorkerLevel) and level.ends and not failed:  # the busiest process is the client's limit
        cpu = max(cpu, level.cpu)
        lag = [max((v for v in (mine, level.lag(i)) if v is not None), default=None) for i, mine in enumerate(lag)]
    server = gauges.means()
    if counted_before is not None:  # counted over the level, not averaged from gauges
        text = await metrics_text(client.session())
        server |= speculation(counted_before, spec_counters(text or ""))
        if "spec_accepted_tokens" in server:  # its share of the tokens the server counted it over, warm-up too
            server["spec_output_tokens"] = float(stats.all_tokens)
        if watch is not None:
            watch.see(text)
    if watch is not None and not failed and errors <= give_up:  # (a server that does not answer is asked after)
        await watch.check(client.session())
    name = level_name(c, rate is not None)
    failed = failed or (watch.changed if watch is not None else None) or shared_with(gauges.beyond_ours, level.peak or c, name)
    if over := stats.over_asked_any:
        failed = f"the server reported more tokens than max_tokens asked in {over} request(s): not a measurement"
    metrics = stats.metrics(wall, server, failed=failed)
    client_side = {
        "client_cpu": round(cpu, 3),
        "workers": processes,
        "loop_lag_p50": lag[0],
        "loop_lag_p90": lag[1],
        "loop_lag_p99": lag[2],
        "load_avg": os.getloadavg()[0],
        "client_bound": client_bound(cpu, processes) or (behind_schedule(level, rate) if isinstance(level, Arrivals) and rate else None),
        "lagging": lagging(lag[1], metrics.itl_mean),
        **power_figures(watts),
    }
    if host_load is not None:
        client_side["host_load_avg"] = await host_load()
    if isinstance(level, Arrivals):
        client_side |= {"rate": rate, "late_p50": percentile(level.lateness, 50), "late_p90": percentile(level.lateness, 90)}
        client_side |= {"late_p99": percentile(level.lateness, 99), "held": level.held}
    done = LevelDone.model_validate(
        {
            **metrics.model_dump(),
            "peak_in_flight": level.peak,
            "repeat": repeat,
            "reference": reference,
            "nodes": ",".join(nodes) if nodes else None,
            **client_side,
        }
    )
    sink.emit(done)
    sink.sync()
    return done


def client_placement(path: str, host: str | None = None) -> ClientPlacement:
    """This machine, as the load generator's (path: as ClientPlacement says)."""
    return ClientPlacement(machine=socket.gethostname(), cpus=os.cpu_count(), path=path, host=host)


async def sweep(
    url: str,
    sink: Sink,
    settings: SweepSettings,
    *,
    pool: list[Any],
    answers: list[int] | None = None,
    headers: dict[str, str],
    done: set[int],
    repeat: list[int] | None,
    stop_after_level: asyncio.Event,
    placement: ClientPlacement,
    host_load: HostLoad | None = None,
    kind: str | None = None,
    warnings: list[str] | None = None,
    nodes: list[str] | None = None,
    power: PowerMeter | None = None,
    top_up: dict[int, int] | None = None,
    server_gone: asyncio.Event | None = None,
    sent: dict[int, int] | None = None,
) -> int:
    """The levels not in `done` (or `repeat`'s), each to its end; 3 when one failed, else 0. top_up: levels cut short
    before, with the requests each lacks: only those are measured, pooled with the ones kept. kind: the managed
    server's engine kind, when pivot started it (what its requests may carry); placement: where this client runs;
    nodes: the hosts of a server across nodes, rank 0 (whose API takes the requests) first; power: reads the power of
    the server's GPUs (None: the server's GPUs are not where this client can read them); server_gone: set when the
    console saw the server's process end (a failed level then waits for no answer); sent: per level, the requests the
    run's attempts of it began with so far (an attempt draws the prompts after them)."""
    levels = repeat or settings.level_keys()
    per_chunk = TokensPerChunk()
    engine = ENGINES.get(kind or "")
    ignore_eos = (engine is None or engine.ignore_eos) and settings.output_lengths != "natural"
    failed: str | None = None
    search_asked = bool(settings.find_capacity) and not repeat
    most = settings.max_in_flight if settings.rates else MOST_C if search_asked else max(levels)  # a connection each
    async with Client(url, headers, most, settings.idle_timeout_s) as client:
        facts = await server_facts(client.session())
        model = settings.model or facts.model or "default"
        watch = ServerWatch(facts)
        source: list[Any] | UniquePrompts = pool
        if not pool:  # a prompt of its own for each request, as long as asked in the server's tokens where it counts
            source = UniquePrompts(settings.input_tokens)
            await source.calibrate(client.session())
        said = [
            *(warnings or []),
            *warnings_for([] if settings.rates else levels, facts),
            *engine_warnings(engine),
            *repeats_within(settings, levels, len(pool)),
        ]
        sink.emit(
            SweepStarted(
                url=url,
                model=model,
                server=facts,
                resumed=sorted(done),
                repeat=repeat or [],
                warnings=said,
                pid=os.getpid(),
                client=placement,
                prompts=(source.describe() if isinstance(source, UniquePrompts) else pool_source(settings, pool)).model_copy(
                    update={"lengths": lengths_text(settings, ignore_eos, engine)}
                ),
            )
        )
        workers = None
        if any(settings.workers_for(c, os.cpu_count()) > 1 for c in [*levels, *([MOST_C] if search_asked else [])]):
            unique = source.share() if isinstance(source, UniquePrompts) else None
            sweep_order = {"url": url, "headers": headers, "settings": settings.to_dict(), "model": model, "most": most}
            workers = Workers({**sweep_order, "ignore_eos": ignore_eos, "prompts": pool, "answers": answers, "unique": unique})
        measure_at = functools.partial(
            run_level,
            client,
            settings,
            source,
            model,
            sink=sink,
            scrape_metrics=facts.metrics,
            per_chunk=per_chunk,
            host_load=host_load,
            ignore_eos=ignore_eos,
            answers=answers,
            nodes=nodes,
            power=power,
            workers=workers,
            watch=watch,
        )
        sent = dict(sent or {})

        async def measure(c: int, **kw: Any) -> LevelDone:
            done = await measure_at(c=c, offset=sent.get(c, 0), **kw)
            sent[c] = sent.get(c, 0) + done.requests + settings.warmup
            return done

        stopped = False
        measured = False
        search = (
            CapacitySearch(settings.find_capacity, levels[0], settings.capacity_precision, bool(settings.rates))
            if settings.find_capacity and not repeat
            else None
        )

        def upcoming() -> Iterator[int]:
            """The levels in turn; a capacity search's, one at a time, each chosen from what the ones before found."""
            if search is None:
                yield from levels
                return
            while (c := search.next()) is not None:
                yield c

        try:
            for c in upcoming():
                name = level_name(c, bool(settings.rates))
                if c in done and search is None:
                    continue
                if stop_after_level.is_set():
                    stopped = True
                    break
                more = (top_up or {}).get(c)
                if search is not None:  # enough to bound its p90; C in flight, twice over (a level that never had C is not C)
                    more = max(settings.requests_for(c), LEAST_REQUESTS, 0 if settings.rates else 2 * c)
                result = await measure(c=c, repeat=bool(repeat) or (more is not None and search is None), requests=more)
                measured = True
                answering = True
                if result.failed and not watch.changed:
                    answering = await answers_unless_gone(client.session(), settings.server_wait_s, server_gone)
                    if answering and not await watch.check(client.session()):
                        sink.emit(LevelRetry(c=c, reason=result.failed))
                        result = await measure(c=c, repeat=bool(repeat) or more is not None, requests=more)
                if watch.changed:  # what follows would measure another server than the levels before
                    failed = f"{name}: {watch.changed}: the sweep stops here"
                    break
                if search is not None and answering:  # a level that failed under load is one that fails the SLO
                    decision, why = decide(result, search.slo)
                    for _ in range(AGAIN):  # undecided: measured again with twice the requests, twice at most
                        if decision != "unsure" or stop_after_level.is_set():
                            break
                        more = 2 * (more or settings.requests_for(c))
                        result = await measure(c=c, requests=more)
                        decision, why = decide(result, search.slo)
                    search.record(c, decision, why)
                    sink.show(Said(type="notice", message=f"{name}: {SAID[decision]} ({why})"))
                    continue
                if result.failed:
                    why = (
                        ""
                        if answering
                        else "; the server's process ended (the console saw it gone)"
                        if server_gone is not None and server_gone.is_set()
                        else f"; the server did not answer for {settings.server_wait_s:g} s"
                    )
                    failed = f"{name}: {result.failed}" + (f" ({result.first_error})" if result.first_error else "") + why
                    break
            check_drift = (
                settings.drift_check
                and measured
                and search is None
                and not (stopped or failed or repeat)
                and len(levels) > 1
                and levels[0] not in done
            )  # (a first level of an earlier session: another server, maybe)
            if check_drift and not stop_after_level.is_set():  # its first level again: how far the server drifted meanwhile
                await measure(c=levels[0], reference=True)
        finally:
            if workers is not None:
                await workers.close()
        sink.emit(SweepDone(stopped=stopped, failed=failed, capacity=search.result() if search is not None else None))
    sink.sync()
    return 3 if failed else 0


async def answers_unless_gone(client: aiohttp.ClientSession, within_s: float, gone: asyncio.Event | None) -> bool:
    """Whether the server answers again within the bound; False at once when the console says its process ended
    (waiting for a server that is not there only delays the verdict: issue 36)."""
    if gone is None:
        return await server_answers(client, within_s)
    if gone.is_set():
        return False
    answer, ended = asyncio.ensure_future(server_answers(client, within_s)), asyncio.ensure_future(gone.wait())
    try:
        await asyncio.wait({answer, ended}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ended.cancel()
        if not answer.done():
            answer.cancel()
    return answer.done() and not answer.cancelled() and answer.result()


def engine_warnings(engine: Engine | None) -> list[str]:
    if engine is not None and engine.ends_early:
        return [
            f"a {engine.title} server may not honour ignore_eos: a request may end before max_tokens; such requests "
            "are counted as short, and their tokens as they came"
        ]
    return []


def lengths_text(settings: SweepSettings, ignore_eos: bool, engine: Engine | None) -> str:
    """How long the answers ran, as the run says it: what a throughput was measured over."""
    most = settings.max_tokens
    if settings.output_lengths == "natural":
        return f"to the model's own end, at most {most} tokens (ignore_eos off)"
    how = {
        "fixed": f"{most} tokens each",
        "uniform": f"drawn uniformly within ±{settings.length_spread:.0%} of {most} tokens",
        "normal": f"drawn from a normal distribution around {most} tokens (standard deviation {settings.length_spread:.0%})",
        "set": f"as long as each prompt's own answer in the set (4 characters a token), at most {most}",
    }[settings.output_lengths]
    if not ignore_eos:
        return how + f" at most: a {engine.title if engine else 'this'} server may end a request at its own end"
    return how + " (ignore_eos)"


def pool_source(settings: SweepSettings, pool: list[Any]) -> PromptSource:
    if settings.prompts == "synthetic":
        return PromptSource(source=f"{len(pool)} seeded prompts (unique_prompts = false)", size=len(pool))
    return PromptSource(source=settings.prompts, size=len(pool))


def repeats_within(settings: SweepSettings, levels: list[int], size: int) -> list[str]:
    """A prompt set smaller than a level's requests sends some of its prompts twice in it (a prefix cache serves the
    second): said, with the first such level."""
    if settings.prompts == "synthetic" or settings.duration_s:  # (a level of a duration: as many as fit in it)
        return []
    over = [c for c in levels if settings.requests_for(c) + settings.warmup > size]
    if not over:
        return []
    c = over[0]
    return [
        f"the prompt set has {size} prompts, fewer than the {settings.requests_for(c) + settings.warmup} requests of "
        f"{level_name(c, bool(settings.rates))}"
        + (" and above" if len(over) > 1 else "")
        + ": a prompt comes again within such a level (a prefix cache may serve it the second time)"
    ]

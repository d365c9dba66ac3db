"""Request-rate levels (issue 38): open loop, each request sent on its seeded schedule whatever the server's state,
with the client's lateness kept; a rate sweep runs, is saved, named in req/s everywhere, compared per rate, and never
compared with a concurrency sweep."""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from console.settings import SweepSettings
from console.sweep.loadgen.feed import Arrivals, Share, schedule
from console.sweep.metrics import RequestRecord
from console.sweep.runs.store import list_runs
from tests.test_llama_server_sim import llama_server  # noqa: F401 (the fixture)


def test_the_schedules_offer_their_rate_with_their_spread() -> None:
    def gaps(arrival: str, burstiness: float = 1.0) -> list[float]:
        times = list(schedule(4.0, arrival, burstiness, 2000, "0:4000:0:arrivals"))
        return [b - a for a, b in itertools.pairwise(times)]

    for arrival in ("constant", "poisson", "gamma"):
        times = list(schedule(4.0, arrival, 0.5, 2000, "0:4000:0:arrivals"))
        assert times[0] == 0 and times[-1] == pytest.approx(1999 / 4)  # gaps of 1 / rate on average: the rate offered
    assert statistics.pstdev(gaps("constant")) == pytest.approx(0, abs=1e-9)
    cv = {name: statistics.pstdev(g) / statistics.mean(g) for name, g in (("poisson", gaps("poisson")), ("bursty", gaps("gamma", 0.25)))}
    assert 0.9 < cv["poisson"] < 1.1  # exponential gaps: as much spread as mean
    assert cv["bursty"] > 1.6  # gamma of shape 1/4: twice the spread
    assert list(schedule(4.0, "poisson", 1, 50, "k")) == list(schedule(4.0, "poisson", 1, 50, "k"))  # seeded


async def test_arrivals_are_sent_on_schedule_whatever_is_in_flight() -> None:
    """A server that holds every request for a second: a closed loop of 2 would send 2 a second; open loop at 20 req/s
    sends every request on its time, and has all of them in flight at once."""
    sent: list[float] = []
    loop = asyncio.get_running_loop()

    async def send(index: int) -> RequestRecord:
        sent.append(loop.time())
        await asyncio.sleep(1.0)
        return RequestRecord(c=20000, index=index, start=0, status=200, error=None, ttft=0.1, e2e=1.0, tokens=1)

    arrivals = Arrivals(Share(end=10), schedule(20.0, "constant", 1, 10, "k"), most=1024)
    finished: list[RequestRecord] = []
    await arrivals.run(1, send, finished.append)
    assert len(finished) == 10 and arrivals.peak == 10 and arrivals.held == 0
    assert sent[-1] - sent[0] < 0.9  # ten sent over half a second, not one a second
    assert len(arrivals.lateness) == 10

    capped = Arrivals(Share(end=4), schedule(100.0, "constant", 1, 4, "k"), most=2)
    await capped.run(1, send, finished.append)
    assert capped.peak == 2 and capped.held == 2  # past max_in_flight an arrival waits, and is counted


def pivot(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_poisson_rate_sweep_runs_saves_compares_and_reports(llama_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def] # noqa: F811
    (tmp_path / "pivot.toml").write_text('campaign_dir = "campaign"\n[sweep]\nmax_tokens = 16\nrequests = 8\n')
    url = llama_server()
    common = ("--config", str(tmp_path / "pivot.toml"))
    for args in (
        ("--rates", "0.5,1,2,4"),
        ("--rates", "4,2,1,0.5"),
        ("--rates", "0.5,1,2,4", "--arrival", "constant"),
        ("--levels", "1,2"),
    ):
        done = pivot(tmp_path, *common, "sweep", "--url", url, *args)
        assert done.returncode == 0, done.stderr
    first, second, constant, closed = (run.name for run in list_runs(tmp_path / "campaign"))
    shown = pivot(tmp_path, *common, "runs", "show", first).stdout
    assert shown.splitlines()[1].split()[0] == "req/s" and [line.split()[0] for line in shown.splitlines()[2:6]] == ["0.5", "1", "2", "4"]
    assert "sent on schedule (p90" in shown and "C=500" not in shown
    listed = pivot(tmp_path, *common, "runs").stdout
    assert "0.5,1,2,4 req/s" in listed and "complete" in listed
    events = [json.loads(line) for line in (tmp_path / "campaign" / "runs" / first / "events.jsonl").read_text().splitlines()]
    levels = [e for e in events if e["type"] == "level_done" and not e["reference"]]
    assert [e["rate"] for e in levels] == [0.5, 1, 2, 4] and all(e["late_p90"] is not None for e in levels)
    assert all(e["requests_per_s"] > 0 for e in levels)

    compared = pivot(tmp_path, *common, "compare", first, second)
    assert compared.returncode == 0, compared.stderr
    assert "req/s  A tok/s" in compared.stdout and "C=" not in compared.stdout and "C ≤" not in compared.stdout
    for other, said in (
        (constant, "request rates, poisson arrivals in A, request rates, constant arrivals in B"),
        (closed, "concurrency levels in B"),
    ):
        refused = pivot(tmp_path, *common, "compare", first, other)
        assert refused.returncode != 0 and said in refused.stderr
    report = pivot(tmp_path, *common, "report", first, second, "-o", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "r.html").read_text()
    assert "request rate, req/s" in html or "req/s" in html


def test_rates_settings_are_checked() -> None:
    assert SweepSettings.from_dict({"rates": [0.5, 2]}).level_keys() == [500, 2000]
    with pytest.raises(ValueError, match="rates: expected a list of request rates"):
        SweepSettings.from_dict({"rates": [0]})
    with pytest.raises(ValueError, match="arrival: expected poisson, constant or gamma"):
        SweepSettings.from_dict({"arrival": "bursty"})
    assert SweepSettings.from_dict({"rates": [2]}).requests_for(2000) == 60  # 30 s of its arrivals


def test_the_sweep_forms_levels_take_concurrencies_or_rates() -> None:
    from console.ui.widgets.sweep.form import parse_form_levels

    assert parse_form_levels("1, 2,5") == {"levels": [1, 2, 5], "rates": []}
    assert parse_form_levels("2/s,0.5/s") == {"rates": [0.5, 2.0]}
    for typed, said in (("1,2/s", "not both"), ("x/s", "such as 0.5/s"), ("0/s", "above 0")):
        with pytest.raises(ValueError, match=said):
            parse_form_levels(typed)

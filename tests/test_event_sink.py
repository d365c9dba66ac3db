"""What the load generator prints for whoever started it: every event but a finished request as it is, and finished
requests as news of how many (issue 40), always before the line that follows them; the run's file keeps each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.sweep.loadgen.__main__ import EventSink
from console.sweep.model import Request, SweepDone


def request(c: int, i: int) -> Request:
    return Request.model_construct(type="request", c=c, i=i, start=0.1 * i, tokens=8, chunks=((0.05, 8),), error=None)


def test_finished_requests_are_news_told_before_the_next_line_and_kept(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    sink = EventSink(tmp_path)
    for i in range(3):
        sink.emit(request(2, i))
    sink.emit(request(4, 0))  # another level: the news of C=2 first
    sink.emit(request(4, 1))
    sink.emit(SweepDone())
    sink.emit(request(4, 2))
    sink.tell()  # the process ends: nothing is left untold
    printed = [json.loads(line) for line in capsysbinary.readouterr().out.splitlines()]
    news = [(e["c"], e["n"], e["tokens"]) for e in printed if e["type"] == "requests_done"]
    assert [e["type"] for e in printed][-2:] == ["sweep_done", "requests_done"]
    assert sum(n for c, n, _ in news if c == 2) == 3 and sum(n for c, n, _ in news if c == 4) == 3
    assert all(tokens == 8 * n for _, n, tokens in news)
    assert [c for c, _, _ in news] == sorted(c for c, _, _ in news)  # each level's told before the next one's
    end = next(k for k, e in enumerate(printed) if e["type"] == "sweep_done")
    assert sum(e["n"] for e in printed[:end] if e["type"] == "requests_done" and e["c"] == 4) == 2  # told before it
    kept = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["type"] for e in kept] == ["request"] * 5 + ["sweep_done", "request"]
    assert kept[0]["chunks"] == [[0.05, 8]]

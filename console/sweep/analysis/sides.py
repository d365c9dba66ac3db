"""The two sides of a comparison: run A (the first named) and run B."""

from __future__ import annotations

from typing import Literal

Side = Literal["a", "b"]
SIDES: tuple[Side, Side] = ("a", "b")


def other(side: Side) -> Side:
    return "b" if side == "a" else "a"

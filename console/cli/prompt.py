"""Questions on the terminal."""

from __future__ import annotations

import sys
from typing import TextIO


def ask(question: str, *, to: TextIO | None = None) -> str:
    """The operator's answer, stripped and lowercased; "" when stdin is closed (EOF), which every caller takes as no.
    `to`: where the question is written (stderr where stdout carries data)."""
    out = to or sys.stdout
    try:
        out.write(question)
        out.flush()
        return input().strip().lower()
    except EOFError:
        print(file=out)  # end the question's line
        return ""

"""Questions on the terminal."""

from __future__ import annotations


def ask(question: str) -> str:
    """The operator's answer, stripped and lowercased; "" when stdin is closed (EOF), which every caller takes as no."""
    try:
        return input(question).strip().lower()
    except EOFError:
        print()  # end the question's line
        return ""

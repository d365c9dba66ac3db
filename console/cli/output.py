"""Rich output of the headless commands: no spaces at the ends of lines (Rich pads a table's title and last column
to the table's width), and whole lines for a pipe."""

from __future__ import annotations

import io
import re
import sys
from typing import IO, Any, TextIO, cast

from rich.console import Console


class _Trimmed(io.TextIOBase):
    STYLE = re.compile(r"(\x1b\[[0-9;]*m)")  # split on, kept: a line's text between its styles

    def __init__(self, stream: TextIO):
        self.stream = stream

    @property
    def encoding(self) -> str:  # type: ignore[override]  # Rich draws ASCII boxes for a stream that is not UTF-8
        return getattr(self.stream, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        lines = text.split("\n")
        self.stream.write("\n".join([*map(self._trim, lines[:-1]), lines[-1]]))  # (the last: no line's end yet)
        return len(text)

    def _trim(self, line: str) -> str:
        """The line without the spaces at its end, each run perhaps in styles of its own (a styled last column): the
        styles are kept. Piece by piece from the end, not one regex: nested repeats of spaces backtrack for ever."""
        if not line.endswith(" ") and "\x1b" not in line:
            return line
        pieces = self.STYLE.split(line)  # text, style, text, …, text
        for i in range(len(pieces) - 1, -1, -2):
            pieces[i] = pieces[i].rstrip(" ")
            if pieces[i]:
                break
        return "".join(pieces)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


def trimmed(*, stderr: bool = False, **console: Any) -> Console:
    """A Rich console on stdout (or stderr) whose lines end without padding."""
    return Console(file=cast(IO[str], _Trimmed(sys.stderr if stderr else sys.stdout)), **console)


def terminal(stderr: bool = False) -> Console:
    """Rich output that a pipe gets whole: wide tables, sentences not cut into lines."""
    out = trimmed(stderr=stderr, highlight=False)
    return out if out.is_terminal else trimmed(stderr=stderr, highlight=False, width=200)

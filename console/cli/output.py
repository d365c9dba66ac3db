"""Rich output of the headless commands: no spaces at the ends of lines (Rich pads a table's title and last column
to the table's width), and whole lines for a pipe."""

from __future__ import annotations

import io
import re
import sys
from typing import IO, Any, TextIO, cast

from rich.console import Console


class _Trimmed(io.TextIOBase):
    # spaces before a line's end, each run perhaps in styles of its own (a styled last column): the styles are kept
    TRAILING = re.compile(r"(?:(?:\x1b\[[0-9;]*m)* +)+(?:\x1b\[[0-9;]*m)*\n")

    def __init__(self, stream: TextIO):
        self.stream = stream

    @property
    def encoding(self) -> str:  # type: ignore[override]  # Rich draws ASCII boxes for a stream that is not UTF-8
        return getattr(self.stream, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        self.stream.write(self.TRAILING.sub(lambda m: m.group(0).replace(" ", ""), text))
        return len(text)

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

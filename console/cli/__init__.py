"""The `pivot` command: the console (TUI) and its headless subcommands. Each subcommand names the function that
runs it (`console/cli/parser.py`); it is imported only then, and its errors become one line on the terminal."""

from __future__ import annotations

import asyncio
import codecs
import importlib
import inspect
import io
import logging
import sys

from console import config
from console.cli.parser import build_parser
from console.remote.errors import RemoteError
from console.server.profiles import ProfileError
from console.sweep.runs.files import RunError
from console.tasks.tasklist import TaskError
from console.untrusted import visible

# What pivot's own lines use, in the letters any terminal has
_PLAIN = {"±": "+-", "≈": "~", "—": "-", "–": "-", "×": "x", "≤": "<=", "≥": ">=", "…": "...", "→": "->", "≠": "!=", "·": "."}


def _plainly(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(_PLAIN.get(ch, ch.encode("ascii", "backslashreplace").decode()) for ch in text), error.end


def _printable_output() -> None:
    """A terminal whose encoding is not UTF-8 (PYTHONIOENCODING=ascii, a latin-1 locale) gets what it cannot show
    in plain letters (`+-` for `±`) or written out (`\u2588`), not an error in place of the whole output."""
    codecs.register_error("pivot-plain", _plainly)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="pivot-plain")


def main(argv: list[str] | None = None) -> int:
    _printable_output()
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    module, _, function = args.run.partition(":")
    try:
        result = getattr(importlib.import_module(module), function)(args)
        return asyncio.run(result) if inspect.iscoroutine(result) else result
    except (config.ConfigError, RemoteError, ProfileError, RunError, TaskError, ValueError) as e:
        print(f"pivot: {visible(str(e))}", file=sys.stderr)
        return 2
    except OSError as e:  # a file named on the command line: which one, and why
        where = f"{e.filename}: " if e.filename else ""
        print(f"pivot: {visible(f'{where}{e.strerror or e}')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug: one line on the operator's screen; -v shows the traceback
        if args.verbose:
            raise
        print(f"pivot: unexpected {type(e).__name__}: {visible(str(e))} (pivot -v {args.command or ''} shows where)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The `pivot` command: the console (TUI) and its headless subcommands (console/cli/commands.py). What a command
runs is imported only then, and its errors become one line on the terminal."""

from __future__ import annotations

import asyncio
import codecs
import gc
import inspect
import io
import sys

import click

from console import config
from console.cli.commands import pivot
from console.cli.target import Globals
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


def run() -> int:
    """The `pivot` process (its script, and `python -m console`). What start-up imported (pydantic's schemas, click's
    commands: a few tens of thousands of objects, and no garbage) lives as long as the process: frozen, no collection
    goes over it again. Each full collection over it cost 20 ms, and a command makes several: a tenth of a CPU-second
    per process (issue 40). Here, not in main(), which a test calls in its own process."""
    gc.freeze()
    return main()


def main(argv: list[str] | None = None) -> int:
    _printable_output()
    given = Globals()
    try:
        try:
            result = pivot.main(argv, prog_name="pivot", standalone_mode=False, obj=given)
        except click.exceptions.Exit as e:  # --help, --version
            return e.exit_code
        except click.UsageError as e:  # one line naming the command, the option and the value; --help says the rest
            path = e.ctx.command_path if e.ctx else "pivot"
            where = path.removeprefix("pivot").strip()
            message = visible(e.format_message().rstrip("."))
            print(f"pivot: {f'{where}: ' if where else ''}{message} (see {path} --help)", file=sys.stderr)
            return e.exit_code
        except click.ClickException as e:
            print(f"pivot: {visible(e.format_message())}", file=sys.stderr)
            return e.exit_code
        except click.Abort:  # Ctrl-C (click's word for it)
            return 130
        return asyncio.run(result) if inspect.iscoroutine(result) else int(result or 0)
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
        if given.verbose:
            raise
        print(f"pivot: unexpected {type(e).__name__}: {visible(str(e))} (pivot -v {given.command or ''} shows where)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

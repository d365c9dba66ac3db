"""Remote command lines built from argument lists, never from raw strings.

Every value is quoted with shlex, so a profile value, a task text or anything
typed on the screen arrives at the remote process as exactly one argument.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from console.untrusted import CONTROL

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ANSI_C = re.compile("[\t\n]|" + CONTROL.pattern)  # what a pasteable line writes out rather than quotes raw


def shell_command(argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """`cd CWD && exec [env K=V] ARGV...`, each piece quoted.

    `exec` makes the remote program the channel's own process, so a signal or a
    closed channel reaches it and not an intermediate shell. A leading `~/` in
    cwd is kept outside the quotes so that the remote shell expands it.
    """
    if not argv:
        raise ValueError("empty argv")
    words = [str(a) for a in argv]
    if env:
        for name in env:
            if not _ENV_NAME.match(name):
                raise ValueError(f"invalid environment variable name: {name!r}")
        words = ["env", *(f"{k}={v}" for k, v in env.items()), *words]
    # a program path from the config (e.g. python = "~/ml-env/bin/python3") may start at the remote home
    program = quote_path(words[0]) if words[0].startswith("~/") else shlex.quote(words[0])
    line = "exec " + " ".join([program, *(shlex.quote(w) for w in words[1:])])
    if cwd:
        line = f"cd {quote_path(cwd)} && {line}"
    return line


WORKDIR_MADE = "pivot: made the workdir "  # and its path: the guard's line on stderr where it made it (taken out, logged)
WORKDIR_FAILED = 97  # the guard's exit status where it could not, after mkdir's words and this line:
WORKDIR_FAILED_LINE = "pivot: cannot create the workdir"


def in_workdir(workdir: str, line: str) -> str:
    """line, run once the workdir is there. A host new to pivot has none: the first command that works in it makes it
    (mode 0700, the user's alone) and says so. In the command itself, not a look before it: an SSH session less on
    the way to the console's first sample, and a login shell less (a ~/.bashrc runs for each). Nothing else makes
    the workdir: neither the simulated host nor a test."""
    d = quote_path(workdir)
    return (
        f"{{ [ -d {d} ] || {{ mkdir -p -m 0700 -- {d} && printf '%s%s\\n' {shlex.quote(WORKDIR_MADE)} {d} >&2; }}; }} "
        f"|| {{ echo {shlex.quote(WORKDIR_FAILED_LINE)} >&2; exit {WORKDIR_FAILED}; }}; {line}"
    )


def workdir_failure(status: int | None, stderr: Sequence[str]) -> str | None:
    """Why the guard could not make the workdir (mkdir's own words), if that is how the command ended."""
    lines = [line.rstrip("\n") for line in stderr if line.strip()]
    if status != WORKDIR_FAILED or lines[-1:] != [WORKDIR_FAILED_LINE]:
        return None
    return lines[-2].strip() if len(lines) > 1 else f"exit status {WORKDIR_FAILED}"


def quote_path(path: str) -> str:
    """Quote a path but let the remote shell expand a leading `~/` (the remote user's home)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def shell_line(words: Sequence[str]) -> str:
    """A command line for an operator to read on screen and paste into a shell on the host.

    Each word is quoted with shlex, except that a leading `~/` stays unquoted so that the shell expands it as
    pivot does, and a word with control characters is written in ANSI-C quotes (`$'\\x1b'`, bash and POSIX
    2024), so that the line shows no raw escape and still pastes to the same bytes.
    """
    return " ".join(_paste_word(str(w)) for w in words)


def _paste_word(word: str) -> str:
    if _ANSI_C.search(word):
        escaped = word.replace("\\", "\\\\").replace("'", "\\'")
        return "$'" + _ANSI_C.sub(lambda m: _c_escape(m.group()), escaped) + "'"
    if word.startswith("~/") and len(word) > 2:
        return "~/" + shlex.quote(word[2:])
    return shlex.quote(word)


def _c_escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

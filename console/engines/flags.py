"""A server's command line read as its launcher's argparse would read it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def parse_flags(argv: Sequence[str]) -> dict[str, str | bool]:
    """`--name value`, `--name=value` and bare `--name` as argparse would see them; a later one wins."""
    flags: dict[str, str | bool] = {}
    args = list(argv)
    for i, arg in enumerate(args):
        if not arg.startswith("-") or arg in ("-", "--"):
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        if eq:
            flags[name] = value
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            flags[name] = args[i + 1]
        else:
            flags[name] = True
    return flags


def as_argv(flags: Mapping[str, Any]) -> list[str]:
    """A profile's flags table as a command line's flags (true: bare, false: left out, a list: once per item)."""
    args: list[str] = []
    for name, value in flags.items():
        if value is True:
            args.append(f"--{name}")
        elif isinstance(value, list):
            args += [f"--{name}={item}" for item in value]
        elif value is not False:
            args.append(f"--{name}={value}")
    return args


def as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def list_flag(argv: Sequence[str], name: str) -> list[int]:
    """The integers after `--name` (an argparse nargs="+" flag), up to the next flag."""
    args = list(argv)
    if f"--{name}" not in args:
        return []
    values = []
    for arg in args[args.index(f"--{name}") + 1 :]:
        if arg.startswith("--") or (number := as_int(arg)) is None:
            break
        values.append(number)
    return values

"""Remote command lines: any value reaches the remote program as exactly one argument."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.remote.command import quote_path, shell_command

values = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=60)


def _sh(line: str) -> str:
    # bytes, not text=True: universal newlines would turn a "\r" into "\n"
    return subprocess.run(["/bin/sh", "-c", line], capture_output=True, check=True).stdout.decode()


@settings(max_examples=200, deadline=None)
@given(args=st.lists(values, min_size=1, max_size=4))
def test_every_value_arrives_as_one_argument(args: list[str]) -> None:
    line = shell_command(["printf", "<%s>", *args])
    assert _sh(line) == "".join(f"<{a}>" for a in args)


@settings(max_examples=100, deadline=None)
@given(value=values)
def test_environment_values_arrive_verbatim(value: str) -> None:
    line = shell_command(["sh", "-c", 'printf "%s" "$X"'], env={"X": value})
    assert _sh(line) == value


def test_cwd_expands_only_a_leading_home() -> None:
    assert quote_path("~/a b/$(x)") == "\"$HOME\"/'a b/$(x)'"
    assert quote_path("/tmp/~x") == "'/tmp/~x'"
    assert _sh(shell_command(["pwd"], cwd="~")).strip() == _sh("cd && pwd").strip()


def test_command_is_execed_so_signals_reach_the_program() -> None:
    assert shell_command(["tail", "-F", "log"]).startswith("exec tail")
    assert shell_command(["x"], cwd="/w") == "cd /w && exec x"


@pytest.mark.parametrize("name", ["A B", "1X", "X=Y", "$(id)", ""])
def test_invalid_environment_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="invalid environment variable name"):
        shell_command(["true"], env={name: "v"})

"""The command line's own types: levels, a count, and a flag for every [sweep] setting, each made from the
setting's declaration (console/settings.py) so that --help says what pivot.toml's docs say."""

from __future__ import annotations

import json
from typing import Any

import click

# what console/events.py writes (a test keeps the two the same): a typo is refused, not answered with nothing
EVENT_KINDS = ("kill", "cleanup", "start", "adopt", "stop", "switch", "restart", "sweep", "swept", "profile", "task")


class Levels(click.ParamType):
    name = "C,C,…"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> list[int]:
        if isinstance(value, list):
            return value
        from console.settings import parse_levels

        try:
            return parse_levels(value)
        except ValueError as e:
            self.fail(f"{value!r}: {e}", param, ctx)


class Rates(click.ParamType):
    name = "R,R,…"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> list[float]:
        if isinstance(value, list):
            return value
        try:
            found = [float(item) for item in value.replace(" ", "").split(",") if item]
        except ValueError:
            self.fail(f"{value!r}: expected request rates, such as 0.5,1,2", param, ctx)
        if not found:
            self.fail("no rate given", param, ctx)
        return found


class WholeNumber(click.ParamType):
    name = "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        if not str(value).isdigit():
            self.fail(f"expected a whole number of 0 or more, got {value!r}", param, ctx)
        return int(value)


class Words(click.ParamType):
    """One of some words, or a positive whole number (`requests`: auto, c or N; `workers`: auto or N)."""

    def __init__(self, words: list[str]):
        self.words = words
        self.name = "|".join([*words, "N"])

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str | int:
        if isinstance(value, int) or value in self.words:
            return value
        if str(value).isdigit():
            return int(value)
        self.fail(f"expected {', '.join(self.words)} or a whole number, got {value!r}", param, ctx)


class Table(click.ParamType):
    name = "JSON"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        try:
            found = json.loads(value)
        except ValueError as e:
            self.fail(f"not JSON ({e}): {value!r}", param, ctx)
        if not isinstance(found, dict):
            self.fail(f"expected a JSON object, got {value!r}", param, ctx)
        return found


def flag(key: str) -> str:
    """A setting's flag: max_tokens is --max-tokens."""
    return "--" + key.replace("_", "-")


def _option(key: str, schema: dict[str, Any], meaning: str) -> click.Option:
    members = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    words = [str(w) for s in members for w in s.get("enum", [s["const"]] if "const" in s else [])]
    types = {s.get("type") for s in members}
    help = f"{meaning} ([sweep] {key})"
    if types == {"boolean"}:
        return click.Option([f"{flag(key)}/--no-{flag(key)[2:]}", key], default=None, help=help)
    if "array" in types:
        items = {s.get("items", {}).get("type") for s in members}
        kind: click.ParamType = Rates() if "number" in items else Levels()
    elif "object" in types:
        kind = Table()
    elif words and "integer" in types:
        kind = Words(words)
    elif words:
        kind = click.Choice(words)
    elif "integer" in types:
        kind = click.INT
    elif "number" in types:
        kind = click.FLOAT
    else:
        kind = click.STRING
    return click.Option([flag(key), key], type=kind, default=None, help=help)


def sweep_settings_options() -> list[click.Option]:
    """A flag per [sweep] setting, in declaration order; a flag not given is None (pivot.toml's value stands)."""
    from pydantic import TypeAdapter

    from console.settings import SweepSettings, documented

    properties = TypeAdapter(SweepSettings).json_schema()["properties"]
    return [_option(doc.key, properties[doc.key], doc.meaning) for doc in documented()]


class WithSweepSettings(click.Command):
    """A command that takes every [sweep] setting as a flag, ahead of its own options. The flags are made when it runs,
    completes or shows its help, not as pivot starts: they come from the settings' schema (pydantic's, 15 ms of CPU),
    which the console and every other command would otherwise pay for at each start (issue 40)."""

    _made = False

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not self._made:
            self.params[:0] = sweep_settings_options()
            self._made = True
        return super().get_params(ctx)

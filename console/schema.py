"""The toolkit of every TOML schema pivot reads (pivot.toml, [sweep], themes, launch profiles): types declared with
pydantic, and a failure turned into one line, `key.path: problem`.

A ground floor like console/config.py: it imports nothing of pivot's own (the load generator on the host ships it)."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, TypeAdapter, ValidationError, WrapValidator
from pydantic_core import PydanticCustomError


class Invalid(ValueError):
    """Data that does not fit its schema: str() is `key: problem`, one line."""

    def __init__(self, key: str | None, problem: str):
        self.key, self.problem = key, problem
        super().__init__(f"{key}: {problem}" if key else problem)


def expect(what: str) -> WrapValidator:
    """Any failure inside becomes `expected WHAT, got VALUE`: one phrase for a value of the wrong kind or range."""

    def wrap(value: Any, inner: Callable[[Any], Any]) -> Any:
        try:
            return inner(value)
        except ValidationError:
            raise PydanticCustomError("pivot", "expected {what}, got {value}", {"what": what, "value": repr(value)}) from None

    return WrapValidator(wrap)


def must(ok: Callable[[Any], bool], problem: str) -> AfterValidator:
    """A value of the right type that `ok` refuses: `problem`, where {value} is the value given."""

    def check(value: Any) -> Any:
        if not ok(value):
            raise PydanticCustomError("pivot", problem, {"value": repr(value)})
        return value

    return AfterValidator(check)


# TOML is typed: "22" is not 22 and true is not 1, so every scalar is strict
Str = Annotated[str, Strict()]
Int = Annotated[int, Strict()]
Number = Annotated[float, Strict()]  # an integer or a float, never a boolean
Bool = Annotated[bool, Strict()]
Port = Annotated[Int, must(lambda p: 0 < p < 65536, "must be 1-65535, got {value}")]
PositiveInt = Annotated[int, Strict(), Field(gt=0), expect("a positive integer")]
Seconds = Annotated[float, Strict(), Field(gt=0), expect("a positive number of seconds")]


def choice(*options: str) -> AfterValidator:
    """A string that must be one of `options`."""
    return must(lambda v: v in options, f"must be one of {', '.join(options)}, got {{value}}")


class Table(BaseModel):
    """A TOML table: strict types, no unknown key."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


_UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")
_KINDS = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "a boolean",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "dataclass_type": "a table",
}


def validate(schema: Any, data: Any, *, partial: bool = False) -> Any:
    """`data` as `schema` (a Table, or a dataclass whose fields carry these types). partial: only check it, missing
    keys allowed (a launch profile that `extends` another), and return None."""
    try:
        value = _adapter(schema).validate_python(data)
        return None if partial else value
    except ValidationError as e:
        errors = [x for x in e.errors(include_url=False) if not (partial and x["type"] == "missing")]
        if not errors:
            return None
        # a misspelt key first: it explains the missing or defaulted one
        raise _invalid(schema, min(errors, key=lambda x: x["type"] not in _UNKNOWN)) from None


@cache
def _adapter(schema: Any) -> TypeAdapter[Any]:
    return TypeAdapter(schema)


def _invalid(schema: Any, error: Any) -> Invalid:
    loc = tuple(p for p in error["loc"] if p != "[key]")  # a bad dict key is reported at that key
    key = ".".join(map(str, loc)) or None
    error_type = error["type"]
    if error_type in _UNKNOWN:
        return Invalid(key, f"unknown key (known: {', '.join(_fields(_type_at(schema, loc[:-1])))})")
    if error_type == "missing":
        described = _description(_type_at(schema, loc[:-1]), str(loc[-1]))
        return Invalid(key, f"missing: {described}" if described else "missing")
    if error_type in _KINDS:
        return Invalid(key, f"expected {_KINDS[error_type]}, got {error['input']!r}")
    return Invalid(key, error["msg"])  # ours (expect, must) already read well; any other is pydantic's own sentence


def _bare(t: Any) -> Any:
    """Annotated[X, …] and X | None as X."""
    while True:
        if typing.get_origin(t) is Annotated:
            t = typing.get_args(t)[0]
        elif typing.get_origin(t) in (typing.Union, types.UnionType) and type(None) in typing.get_args(t):
            arms = [a for a in typing.get_args(t) if a is not type(None)]
            if len(arms) != 1:
                return t
            t = arms[0]
        else:
            return t


def _fields(t: Any) -> dict[str, Any]:
    if isinstance(t, type) and issubclass(t, BaseModel):
        return {name: f.annotation for name, f in t.model_fields.items()}
    if dataclasses.is_dataclass(t):
        hints = typing.get_type_hints(t, include_extras=True)
        return {f.name: hints[f.name] for f in dataclasses.fields(t) if f.init}
    return {}


def _type_at(schema: Any, loc: tuple[Any, ...]) -> Any:
    t = _bare(schema)
    for part in loc:
        fields = _fields(t)
        if fields:
            t = _bare(fields.get(str(part)))
        elif typing.get_origin(t) in (dict, list, tuple):
            t = _bare(typing.get_args(t)[1 if typing.get_origin(t) is dict else 0])
        else:
            return None
    return t


def _description(t: Any, name: str) -> str | None:
    if isinstance(t, type) and issubclass(t, BaseModel) and name in t.model_fields:
        return t.model_fields[name].description
    return None


def about(text: str) -> Any:
    """A field's meaning, as --help, the sweep form and docs/configuration.md say it (in Annotated[...])."""
    return Field(description=text)


@dataclasses.dataclass(frozen=True)
class Documented:
    """A key as --help, the form and docs/configuration.md show it."""

    key: str
    kind: str  # what it takes, in words
    default: str
    meaning: str


def _either(words: list[str]) -> str:
    return f"{', '.join(words[:-1])} or {words[-1]}" if len(words) > 1 else words[0]


def _kinds(schema: dict[str, Any]) -> list[str]:
    if "anyOf" in schema:
        return [word for s in schema["anyOf"] if s.get("type") != "null" for word in _kinds(s)]
    if "enum" in schema or "const" in schema:
        return [f'"{v}"' for v in schema.get("enum", [schema.get("const")])]
    if schema.get("type") == "array":
        return [f"list of {_either(_kinds(schema.get('items') or {'type': 'string'}))}s"]
    if "$ref" in schema or "type" not in schema:
        return ["table"]
    return [{"integer": "integer", "number": "number", "string": "string", "boolean": "true or false", "object": "table"}[schema["type"]]]


def describe(schema: Any, defaults: dict[str, Any] | None = None) -> list[Documented]:
    """Every key of a schema, in declaration order, from its fields' declarations; defaults: where the schema's own are
    not those that apply (a key left out of the file takes another's)."""
    properties = TypeAdapter(schema).json_schema()["properties"]
    shown = {**{k: p["default"] for k, p in properties.items() if "default" in p}, **(defaults or {})}

    def default(key: str) -> str:
        if key not in shown:
            return "(none)"  # made for each (an empty table)
        value = shown[key]
        return "(unset)" if value in (None, {}, [], ()) else "(its table)" if isinstance(value, dict) else json.dumps(value)

    return [Documented(key, _either(_kinds(p)), default(key), p.get("description", "")) for key, p in properties.items()]

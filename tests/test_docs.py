"""The docs say what the code declares: docs/configuration.md's tables are the schemas' own declarations (each field
with its meaning: console/config.py, console/settings.py). `python -m tests.test_docs` writes them again after a
field changes."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from console.config import CompareTable, Config, ConfigFile, HostTable, NotifyTable
from console.schema import Documented, describe
from console.settings import SweepSettings

CONFIGURATION = Path(__file__).parent.parent / "docs" / "configuration.md"


def _applied() -> dict[str, Any]:
    """A top-level key left out of pivot.toml takes Config's default, not the file schema's None."""
    return {
        f.name: str(f.default) if isinstance(f.default, Path) else f.default
        for f in dataclasses.fields(Config)
        if f.default is not dataclasses.MISSING and f.name in ConfigFile.model_fields
    }


TABLES: dict[str, list[Documented]] = {
    "top": describe(ConfigFile, _applied()),
    "hosts": describe(HostTable),
    "sweep": describe(SweepSettings),
    "compare": describe(CompareTable),
    "notify": describe(NotifyTable),
}


def table(rows: list[Documented]) -> str:
    lines = [f"| `{d.key}` | {d.kind} | `{d.default}` | {d.meaning} |" for d in rows]
    return "\n".join(["| key | takes | default | meaning |", "| --- | --- | --- | --- |", *lines]) + "\n"


def block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- {name}:begin -->\n).*?(<!-- {name}:end -->)", re.S)


def test_each_table_in_the_docs_is_its_schemas_declarations() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    for name, rows in TABLES.items():
        found = block(name).search(text)
        assert found is not None, f"docs/configuration.md lost its {name} markers"
        assert found.group(0) == f"{found.group(1)}{table(rows)}{found.group(2)}", "run: python -m tests.test_docs"


def test_every_key_says_what_it_means() -> None:
    assert [f"{name}.{d.key}" for name, rows in TABLES.items() for d in rows if not (d.meaning and d.kind)] == []


if __name__ == "__main__":
    text = CONFIGURATION.read_text(encoding="utf-8")
    for name, rows in TABLES.items():
        text = block(name).sub(lambda m, rows=rows: f"{m.group(1)}{table(rows)}{m.group(2)}", text)  # type: ignore[misc]
    CONFIGURATION.write_text(text, encoding="utf-8")

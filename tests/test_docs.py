"""The docs say what the code declares: docs/configuration.md's [sweep] table is the settings' own declarations
(console/settings.py). `python -m tests.test_docs` writes it again after a field changes."""

from __future__ import annotations

import re
from pathlib import Path

from console.settings import documented

CONFIGURATION = Path(__file__).parent.parent / "docs" / "configuration.md"
BLOCK = re.compile(r"(<!-- settings:begin -->\n).*?(<!-- settings:end -->)", re.S)


def settings_table() -> str:
    rows = [f"| `{d.key}` | {d.kind} | `{d.default}` | {d.meaning} |" for d in documented()]
    return "\n".join(["| key | takes | default | meaning |", "| --- | --- | --- | --- |", *rows]) + "\n"


def test_the_sweep_table_in_the_docs_is_the_settings_declarations() -> None:
    found = BLOCK.search(CONFIGURATION.read_text(encoding="utf-8"))
    assert found is not None, "docs/configuration.md lost its settings markers"
    assert found.group(0) == f"{found.group(1)}{settings_table()}{found.group(2)}", "run: python -m tests.test_docs"


def test_every_setting_has_its_meaning() -> None:
    assert all(d.meaning and d.kind for d in documented())


if __name__ == "__main__":
    text = CONFIGURATION.read_text(encoding="utf-8")
    CONFIGURATION.write_text(BLOCK.sub(lambda m: f"{m.group(1)}{settings_table()}{m.group(2)}", text), encoding="utf-8")

"""The core never imports Textual, and the config imports nothing of pivot's own (pyproject's import-linter
contracts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_core_is_usable_without_the_tui() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint)], capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The core is usable without the TUI KEPT" in result.stdout
    assert "The config is the ground floor KEPT" in result.stdout

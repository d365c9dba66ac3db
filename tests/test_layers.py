"""The core never imports Textual, the config imports nothing of pivot's own (pyproject's import-linter
contracts), and no module imports itself through others."""

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
    assert "Each layer imports only those below it KEPT" in result.stdout


def test_no_module_imports_itself_through_others() -> None:
    """No import cycle, TYPE_CHECKING imports included: each part can be read and changed from the bottom up (a part
    that needs its caller's type says so with a Protocol of its own)."""
    import grimp

    graph = grimp.build_graph("console", include_external_packages=False)
    cycles = [
        (a, b)
        for a in sorted(graph.modules)
        for b in sorted(graph.find_modules_directly_imported_by(a))
        if graph.find_shortest_chain(importer=b, imported=a) is not None
    ]
    assert cycles == []

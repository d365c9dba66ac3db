"""The console, with a probe of its event loop's lateness: every 50 ms a sleep, and how late it woke, written to a
file (`time lateness_ms` per line). Run as a script, so that PYTHONPATH picks the tree whose console is measured:

    python bench/tui_probe.py LAG_FILE [pivot arguments…]
"""

from __future__ import annotations

import asyncio
import sys
import time

TICK_S = 0.05


def main() -> int:
    out_path, argv = sys.argv[1], sys.argv[2:]
    from console.cli import main as pivot
    from console.ui.app import PivotApp

    mounted = PivotApp.on_mount

    def on_mount(self: PivotApp) -> None:
        mounted(self)
        self._bench_probe = asyncio.get_running_loop().create_task(_probe(out_path))  # type: ignore[attr-defined]

    PivotApp.on_mount = on_mount  # type: ignore[method-assign]
    return pivot(argv)


async def _probe(path: str) -> None:
    loop = asyncio.get_running_loop()
    with open(path, "w", buffering=1) as out:  # noqa: ASYNC230 - a line per tick, the bench's own probe
        while True:
            before = loop.time()
            await asyncio.sleep(TICK_S)
            out.write(f"{time.time():.3f} {(loop.time() - before - TICK_S) * 1000:.1f}\n")


if __name__ == "__main__":
    raise SystemExit(main())

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
    import console.cli.console as console_command
    from console.cli import main as pivot

    # around the console's own coroutine, not the app's on_mount: importing the app here first would undo what the
    # console does at start (Textual imported in a thread while the link comes up) and measure a slower console
    console = console_command._console

    async def probed(*args: object, **kwargs: object) -> None:
        probe = asyncio.get_running_loop().create_task(_probe(out_path))
        try:
            await console(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            probe.cancel()

    console_command._console = probed  # type: ignore[assignment]
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

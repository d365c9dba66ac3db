"""Regenerate docs/screenshot.svg: the console on a fresh simulated host.

    python docs/screenshot.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console import config  # noqa: E402
from console.remote import ConnState  # noqa: E402
from console.sim.host import SimHost  # noqa: E402
from console.ui.app import PivotApp  # noqa: E402


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        host = SimHost(Path(tmp) / "demo")
        await host.start()
        try:
            app = PivotApp(config.load(host.config_path), "demo")
            async with app.run_test(size=(120, 32)) as pilot:
                while app.connection_event is None or app.connection_event.state != ConnState.UP:
                    await asyncio.sleep(0.05)
                await pilot.pause(1.0)
                app.save_screenshot("screenshot.svg", path=str(Path(__file__).parent))
        finally:
            await host.close()


asyncio.run(main())

"""Regenerate docs/screenshot.svg: the console on the simulated host, an EAGLE-3 server under load.

    python docs/screenshot.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console import config  # noqa: E402
from console.sim import traffic  # noqa: E402
from console.sim.host import SimHost, free_port  # noqa: E402
from console.session import Session
from console.ui.app import PivotApp  # noqa: E402
from console.ui.widgets.gpu.pane import GpuPane  # noqa: E402


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        host = SimHost(Path(tmp) / "demo", time_scale=4)
        await host.start()
        port = free_port(30000)
        host.start_server("demo-eagle3", port)
        load = asyncio.create_task(traffic.run(port, lambda: True))
        try:
            app = PivotApp(Session(config.load(host.config_path), "demo", via="console"))
            async with app.run_test(size=(120, 36)) as pilot:
                pane = app.query_one(GpuPane)
                while pane.sample is None or not any((g.util_pct or 0) > 50 for g in pane.sample.gpus):
                    await asyncio.sleep(0.2)
                await pilot.pause(0.5)
                app.save_screenshot("screenshot.svg", path=str(Path(__file__).parent))
        finally:
            load.cancel()
            await host.close()


asyncio.run(main())

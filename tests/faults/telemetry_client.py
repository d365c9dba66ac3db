"""A console that streams telemetry and is then killed with SIGKILL by a test: it prints its agent's pid, then waits.

python telemetry_client.py PIVOT_TOML
"""

from __future__ import annotations

import asyncio
import sys

from console import config
from console.gpu.samples import Hello
from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection


async def main(config_path: str) -> None:
    spec = config.load(config_path).host()
    telemetry = RemoteTelemetry(Connection(spec), spec, interval=0.5)
    async for event in telemetry.events():
        if isinstance(event, Hello):
            print(event.pid, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))

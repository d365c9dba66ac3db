"""The floor under any load generator in Python (issue 40): C streams kept busy against a URL with the same
completion request pivot sends, each answer read as aiohttp gives it and its SSE events counted, nothing else. What
it costs per token is what reading the stream costs at all; a load generator is held to it, in the same run.

Prints one JSON line: requests, events (content events: one per chunk), the process's CPU seconds and the wall.

    python -m bench.bare_reader --url http://127.0.0.1:8000 --c 64 --requests 4000 [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time

import aiohttp
import orjson


async def read(url: str, c: int, requests: int, max_tokens: int) -> dict[str, float]:
    body = orjson.dumps(
        {
            "model": "fast",
            "prompt": "the quick brown fox",
            "max_tokens": max_tokens,
            "stream": True,
            "temperature": 0,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "ignore_eos": True,
        }
    )
    left = requests
    events = 0
    connector = aiohttp.TCPConnector(limit=c + 8)
    async with aiohttp.ClientSession(url, connector=connector) as session:

        async def stream() -> None:
            nonlocal left, events
            while left > 0:
                left -= 1
                async with session.post("/v1/completions", data=body, headers={"Content-Type": "application/json"}) as response:
                    async for chunk in response.content.iter_any():
                        events += chunk.count(b"data: ")
                events -= 2  # the usage event and [DONE]

        t0 = time.monotonic()
        await asyncio.gather(*(stream() for _ in range(c)))
        wall = time.monotonic() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"requests": requests, "events": events, "cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--c", type=int, default=64)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(read(args.url, args.c, args.requests, args.max_tokens))))


if __name__ == "__main__":
    main()

"""pivot's per-request figures beside a real llama-server's own record of the same requests (issue 20, item 7).

    python -m bench.real_agreement [--url URL] [--spec-type TYPE]

Starts llama.cpp's llama-server (tests/real/build.py: built once, cached) on a loopback port unless --url names one,
sweeps it with pivot's own load generator at C = 1 and 4, and sets each request's output tokens, decode rate and
time to first token beside the server's `timings` from the same stream's last chunk: `predicted_n`,
`predicted_per_second` and `prompt_ms`. Prints the median ratio per level (pivot / server); a number, never a pass.
TTFT is pivot's whole wait (the request's trip, queueing, prefill and the first token's decode) against the server's
prefill alone, so it reads above 1 by that much; tokens and decode rate are the same quantity seen from each end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from console.settings import SweepSettings
from console.sweep.metrics import RequestRecord
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run
from tests.conftest import free_port


def start_server(spec_type: str | None) -> tuple[subprocess.Popen[bytes], str]:
    from tests.real.build import llama_server, model

    port = free_port()
    argv = [
        str(llama_server()),
        "-m",
        str(model()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-np",
        "8",
        "-t",
        "2",
        "-c",
        "8192",
        "--metrics",
    ] + (["--spec-type", spec_type] if spec_type else [])
    if spec_type == "draft-simple":
        argv += ["-md", str(model())]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("llama-server did not become ready")


def measure(url: str, requests: int) -> dict[int, dict[str, float]]:
    settings = SweepSettings(levels=(1, 4), requests=requests, max_tokens=128, input_tokens=128)
    with tempfile.TemporaryDirectory() as tmp:
        run = create_run(Path(tmp), RunMeta(profile="bench", kind="llamacpp", settings=settings.to_dict()))
        subprocess.run(
            [sys.executable, "-m", "console.sweep.loadgen", "--url", url, "--run-dir", str(run.dir)],
            check=True,
            capture_output=True,
            timeout=1800,
        )
        events = [json.loads(line) for line in (run.dir / "events.jsonl").read_text().splitlines()]
    out: dict[int, dict[str, float]] = {}
    for c in settings.levels:
        records = [RequestRecord.from_dict(e) for e in events if e["type"] == "request" and e["c"] == c]
        pairs = [(r, r.timings) for r in records if r.ok and r.timings]
        ratio = lambda f, pairs=pairs: statistics.median(f(r, t) for r, t in pairs)
        out[c] = {
            "requests": len(pairs),
            "tokens": ratio(lambda r, t: r.tokens / t["predicted_n"]),
            "decode rate": ratio(lambda r, t: (r.decode_tok_s or 0) / t["predicted_per_second"]),
            "ttft vs prompt_ms": ratio(lambda r, t: (r.ttft or 0) * 1000 / t["prompt_ms"]),
            "pivot ttft ms": statistics.median((r.ttft or 0) * 1000 for r, _ in pairs),
            "server prompt_ms": statistics.median(t["prompt_ms"] for _, t in pairs),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench.real_agreement")
    parser.add_argument("--url")
    parser.add_argument("--spec-type", help="ngram-simple, draft-simple (the model as its own draft), …")
    parser.add_argument("--requests", type=int, default=16)
    args = parser.parse_args()
    proc = None
    url = args.url
    if url is None:
        proc, url = start_server(args.spec_type)
    try:
        figures = measure(url, args.requests)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"llama-server {args.spec_type or 'without speculation'}, {os.getloadavg()[0]:.1f} load, pivot / server:")
    for c, f in figures.items():
        print(f"  C={c}: " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in f.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

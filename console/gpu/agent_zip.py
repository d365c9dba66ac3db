"""The telemetry agent (console/gpu/agent) as one file to upload: a zipapp the host's python runs as it is. The same
source gives the same bytes (sorted names, fixed timestamps), so its name, from their hash, changes only with the
agent, and a host keeps one copy per version."""

from __future__ import annotations

import hashlib
import io
import zipfile
from functools import cache
from importlib import resources

INSIDE = "pivot_agent"  # the package's name in the zipapp
MAIN = b"import runpy\nrunpy.run_module(\"pivot_agent\", run_name=\"__main__\", alter_sys=True)\n"  # agent/__main__.py
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: no build time in the bytes


def _entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info


@cache
def agent_zip() -> tuple[str, bytes]:
    """(the file name the host keeps it under, the zipapp's bytes)."""
    sources = sorted((f for f in resources.files("console.gpu.agent").iterdir() if f.name.endswith(".py")),
                     key=lambda f: f.name)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(_entry("__main__.py"), MAIN)
        for f in sources:
            z.writestr(_entry(f"{INSIDE}/{f.name}"), f.read_bytes())
    data = out.getvalue()
    return f"pivot_agent_{hashlib.sha256(data).hexdigest()[:12]}.pyz", data

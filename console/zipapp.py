"""What pivot runs on a host with the host's own python, each as one file to upload: the telemetry agent
(console/gpu/agent) and the load generator (console/sweep/loadgen/on_host.py with the modules it imports). Zipapps the host's
python runs as they are. The same source gives the same bytes (sorted names, fixed timestamps), so a name, from their
hash, changes only with the code, and a host keeps one copy per version, in its workdir's agent/."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import zipfile
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: no build time in the bytes
# Python 2 and 3.0-3.7 can read this much: a host whose python is too old says which it is, not a SyntaxError.
AGENT_MAIN = b"""import sys
if sys.version_info < (3, 8):
    sys.stderr.write("pivot's agent needs python 3.8 or later; %s is %d.%d: set python = for this host in pivot.toml\\n"
                     % (sys.executable, sys.version_info[0], sys.version_info[1]))
    sys.exit(3)
import runpy
runpy.run_module("pivot_agent", run_name="__main__", alter_sys=True)
"""

# The load generator's modules (console.sweep.loadgen.generator and what it imports), checked by a test against its
# imports; a name ending in / is every module of that package.
LOADGEN_MODULES = (
    "console/__init__.py",
    "console/untrusted.py",
    "console/schema.py",
    "console/engines/",  # every module: each engine is one
    "console/sweep/__init__.py",
    "console/sweep/capacity.py",
    "console/sweep/level_stats.py",
    "console/sweep/metrics.py",
    "console/sweep/model.py",
    "console/sweep/reported.py",
    "console/settings.py",
    "console/sweep/loadgen/__init__.py",
    "console/sweep/loadgen/chunks.py",
    "console/sweep/loadgen/feed.py",
    "console/sweep/loadgen/gauges.py",
    "console/sweep/loadgen/generator.py",
    "console/sweep/loadgen/on_host.py",
    "console/sweep/loadgen/requests.py",
    "console/sweep/loadgen/server_view.py",
    "console/sweep/loadgen/sse.py",
    "console/sweep/loadgen/workers.py",
)
LOADGEN_NEEDS = ("aiohttp", "orjson", "pydantic", "prometheus_client")
# Pure-python libraries the load generator imports, shipped inside the zipapp (from this machine's install): the host
# needs nothing more for them. ddsketch (a level's percentiles in bounded memory) and six, which ddsketch imports.
LOADGEN_BUNDLED = ("ddsketch", "six")
# Python 3.8 can read this much: a host whose python cannot run the load generator says why, as its one event.
LOADGEN_MAIN = f"""import json, sys
def unsupported(why):
    print(json.dumps({{"type": "unsupported", "why": why}}))
    sys.exit(4)
if sys.version_info < (3, 11):
    unsupported("the host's python is %d.%d; the load generator needs 3.11 or later" % sys.version_info[:2])
import importlib.util
missing = [m for m in {LOADGEN_NEEDS!r} if importlib.util.find_spec(m) is None]
if missing:
    unsupported("the host's python lacks " + ", ".join(missing))
import pydantic
if not pydantic.VERSION.startswith("2."):
    unsupported("the host's pydantic is %s; the load generator needs 2" % pydantic.VERSION)
import runpy
runpy.run_module("console.sweep.loadgen.on_host", run_name="__main__", alter_sys=True)
""".encode()


def _entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info


def build(prefix: str, main: bytes, files: Iterable[tuple[str, bytes]]) -> tuple[str, bytes]:
    """(the file name the host keeps it under, the zipapp's bytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(_entry("__main__.py"), main)
        for name, data in sorted(files):
            z.writestr(_entry(name), data)
    data = out.getvalue()
    return f"{prefix}_{hashlib.sha256(data).hexdigest()[:12]}.pyz", data


@cache
def agent_zip() -> tuple[str, bytes]:
    sources = (f for f in resources.files("console.gpu.agent").iterdir() if f.name.endswith(".py"))
    return build("pivot_agent", AGENT_MAIN, ((f"pivot_agent/{f.name}", f.read_bytes()) for f in sources))


def _bundled(name: str) -> Iterable[tuple[str, bytes]]:
    """An installed library's python files as the zipapp holds them: a package's modules (no subpackages), or one module."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, f"{name} is a dependency of pivot's (pyproject.toml)"
    origin = Path(spec.origin)
    if origin.name != "__init__.py":  # a module (six, once imported, says it has a __path__: not a package for that)
        return [(origin.name, origin.read_bytes())]
    return [(f"{name}/{f.name}", f.read_bytes()) for f in sorted(origin.parent.glob("*.py"))]


def _loadgen_files(root: Traversable) -> list[str]:
    files = []
    for name in LOADGEN_MODULES:
        if name.endswith("/"):
            package = root.joinpath(name.removeprefix("console/"))
            files += sorted(f"{name}{f.name}" for f in package.iterdir() if f.name.endswith(".py"))
        else:
            files.append(name)
    return files


@cache
def loadgen_zip() -> tuple[str, bytes]:
    root = resources.files("console")
    ours = ((name, root.joinpath(name.removeprefix("console/")).read_bytes()) for name in _loadgen_files(root))
    return build("pivot_loadgen", LOADGEN_MAIN, [*ours, *(f for name in LOADGEN_BUNDLED for f in _bundled(name))])


NOT_OURS = 99  # the file at the zipapp's name is not the one pivot built (truncated, empty, replaced)
# Run argv only if the file $1 (relative to the workdir) has the digest $2: whatever sits at the zipapp's name is run
# only if its bytes are pivot's. A host without sha256sum runs it as it is.
VERIFY = (
    'f=$1 h=$2; shift 2; if command -v sha256sum >/dev/null 2>&1; then echo "$h  $f" | sha256sum -c --status '
    '>/dev/null 2>&1 || { echo "pivot: $f is not the file pivot built" >&2; exit 99; }; fi; exec "$@"'
)


def checked(path: str, data: bytes, argv: Sequence[str]) -> list[str]:
    """argv, run on the host only if the file at `path` holds exactly `data` (else it exits NOT_OURS)."""
    return ["sh", "-c", VERIFY, "sh", path, hashlib.sha256(data).hexdigest(), *argv]


def not_there(status: int | None, stderr: Iterable[str]) -> bool:
    """This version of the zipapp is not on the host as pivot built it: missing, cut short or replaced (NOT_OURS), or
    (a host without sha256sum) the host's python could not open it ("can't open file '…'", exit status 2)."""
    return status == NOT_OURS or (status == 2 and any("can't open file" in line for line in stderr))

"""The agent as the host gets it: one zipapp, the same bytes for the same source, run by a plain python; its --help
cache asked again when the engine behind `python -m PACKAGE` is upgraded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from console.zipapp import agent_zip


def test_the_zipapp_is_the_same_for_the_same_source_and_runs_on_its_own(tmp_path: Path) -> None:
    name, data = agent_zip()
    assert agent_zip.__wrapped__() == (name, data)  # no build time in it: one name per version of the agent
    path = tmp_path / name
    path.write_bytes(data)
    out = subprocess.run(
        [sys.executable, "-I", str(path), "port", "127.0.0.1", "0"], capture_output=True, text=True, cwd=tmp_path, check=True
    )  # -I: nothing of pivot's on its path but the zipapp
    assert json.loads(out.stdout) == {"type": "port", "free": True, "v": 1}


def test_the_help_cache_is_asked_again_when_the_engine_is_upgraded(tmp_path: Path) -> None:
    engine = tmp_path / "site" / "fakeengine"
    engine.mkdir(parents=True)
    (engine / "__init__.py").write_text("")
    (engine / "serve.py").write_text("import sys\nprint('usage: serve --model-path PATH --port N (version 1)')\n")
    name, data = agent_zip()
    (tmp_path / name).write_bytes(data)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}

    def ask() -> dict:
        out = subprocess.run(
            [sys.executable, name, "help", "--cache-dir", "cache", "--", sys.executable, "-m", "fakeengine.serve"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            check=True,
        )
        return json.loads(out.stdout)

    first, again = ask(), ask()
    assert (first["cached"], again["cached"]) == (False, True) and "version 1" in again["text"]
    (engine / "serve.py").write_text("import sys\nprint('usage: serve --model-path PATH --port N (version 2)')\n")
    os.utime(engine / "__init__.py", (1, 1))  # what an upgrade does: the package's files written anew
    upgraded = ask()
    assert upgraded["cached"] is False and "version 2" in upgraded["text"]


def test_the_agent_is_python_3_8() -> None:
    """It runs on the host's own python: every module parses as 3.8 (the zipapp test runs on this one)."""
    import ast

    from console.gpu import agent

    for path in sorted(Path(agent.__file__).parent.glob("*.py")):
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))


def test_the_load_generator_zipapp_carries_the_pure_python_libraries_it_needs_beyond_the_hosts(tmp_path: Path) -> None:
    """ddsketch (and six, which it imports) come in the zipapp, not from the host's python: with the host's site-packages
    the load generator needs (aiohttp, pydantic…) on the path, its level statistics import from the zipapp."""
    import six  # imported, it says it has a __path__ (for six.moves): still one module, shipped as six.py

    from console.zipapp import loadgen_zip

    name, data = loadgen_zip.__wrapped__()
    path = tmp_path / name
    path.write_bytes(data)
    names = zipfile.ZipFile(path).namelist()
    assert "six.py" in names and "ddsketch/__init__.py" in names and not any(n.startswith("six/") for n in names), six
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import ddsketch, six; import console.sweep.level_stats as s;"
        "print(ddsketch.__file__, six.__file__, s.__file__)"
    )  # -I: no PYTHONPATH of the test run's, as the host's python has none of pivot's
    out = subprocess.run([sys.executable, "-I", "-c", probe, str(path)], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert all(f.startswith(str(path)) for f in out.stdout.split()), out.stdout

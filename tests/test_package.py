"""Themes, profiles and runbooks ship inside the package (console.themes, console.profiles) and are read through
importlib.resources: the repository's top-level directories are their only copy. (.ci/run checks a built wheel.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from console.config import shipped

REPO = Path(__file__).parent.parent


@pytest.mark.parametrize("directory", ["themes", "profiles", "profiles/runbooks"])
def test_the_shipped_files_are_the_repositorys(directory: str) -> None:
    package = shipped(directory.split("/")[0]) / "/".join(directory.split("/")[1:])
    ours = {p.name: p.read_bytes() for p in (REPO / directory).glob("*.toml")}
    assert ours and {p.name: p.read_bytes() for p in package.glob("*.toml")} == ours


def test_pivot_profiles_lists_the_shipped_ones_without_any_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from console.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("PIVOT_CONFIG", raising=False)
    assert main(["profiles"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines()[1:] if line.strip()}
    assert {"baseline", "eagle3", "vllm-baseline", "vllm-eagle3"} <= listed
    assert not any(name.startswith("demo-") for name in listed)  # the simulated host's: only with one

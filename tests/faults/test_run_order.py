"""Runs in the order they started, whatever the zones, the names and the imports (issue 34, H1 and H2): `last` is
the run that started last for every command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.campaign import Campaign
from console.sweep.model import RunMeta
from console.sweep.runs.store import create_run, list_runs
from tests.fixtures_runs import BASELINE, EAGLE3, write_run


@pytest.fixture
def zone() -> Iterator[None]:
    """Lets a test move this process's time zone; puts it back."""
    before = os.environ.get("TZ")
    yield
    if before is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = before
    time.tzset()


def _in_zone(name: str) -> None:
    os.environ["TZ"] = name
    time.tzset()


def test_a_run_made_in_tokyo_is_not_last_after_a_later_one_in_utc(tmp_path: Path, zone: None) -> None:
    meta = RunMeta(profile="t-baseline", settings={"levels": [1]})
    _in_zone("Asia/Tokyo")  # nine hours ahead: a local-time name would sort after every later run made in UTC
    tokyo = create_run(tmp_path, meta)
    _in_zone("UTC")
    utc = create_run(tmp_path, meta.model_copy(update={"profile": "t-eagle3"}))
    assert [r.name for r in list_runs(tmp_path)] == [tokyo.name, utc.name]
    assert tokyo.name[:8] == time.strftime("%Y%m%d", time.gmtime())  # names carry UTC too


def _pivot(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", "--config", str(config), *args], capture_output=True, text=True, timeout=60)


def test_an_import_named_with_letters_is_last_only_until_a_later_run(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign"
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "{campaign}"\n')
    write_run(campaign, "20261204-090000-baseline", "baseline", BASELINE, speculative=False)
    lines = tmp_path / "bench.jsonl"
    lines.write_text(
        "".join(
            json.dumps({"max_concurrency": c, "output_throughput": total, "completed": 100, "total_output_tokens": 51200}) + "\n"
            for c, (total, _) in EAGLE3.items()
        )
    )
    imported = _pivot(config, "runs", "import", str(lines), "--name", "zz-old-eagle3", "--profile", "eagle3")
    assert imported.returncode == 0, imported.stderr
    assert Campaign(campaign).resolve("last").name == "zz-old-eagle3"  # imported after the baseline ran
    write_run(campaign, "20261204-080000-eagle3", "eagle3", EAGLE3, speculative=True)  # an earlier name, made later
    assert Campaign(campaign).resolve("last").name == "20261204-080000-eagle3"
    assert Campaign(campaign).resolve("previous").name == "zz-old-eagle3"
    shown = _pivot(config, "runs", "show", "last")
    assert shown.returncode == 0 and "20261204-080000-eagle3" in shown.stdout, shown.stdout + shown.stderr
    listed = _pivot(config, "runs").stdout.splitlines()
    assert "STARTED (UTC)" in listed[0] and listed[-1].startswith("20261204-080000-eagle3")


def test_last_and_the_listing_read_run_metadata_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 runs (issue 34, L5): `runs` took 6.4 s, `compare previous last` 12.8 s, every run's tables opened. `last`
    walks the runs newest first and stops at the first measured; the listing's levels come from run.toml."""
    import console.sweep.runs.store as store

    for i in range(30):
        write_run(tmp_path, f"r{i:02d}", "baseline", BASELINE, speculative=False)
    opened: list[str] = []
    real = store.Run._stored_levels

    def counted(run: store.Run) -> list[store.LevelDone]:
        opened.append(run.name)
        return real(run)

    monkeypatch.setattr(store.Run, "_stored_levels", counted)
    assert [r.name for r in Campaign(tmp_path).resolve_all(["previous", "last"])] == ["r28", "r29"]
    assert opened == []  # run.toml says which levels its tables hold
    assert [run.level_cs() for run in list_runs(tmp_path)][-1] == sorted(BASELINE)
    assert opened == []

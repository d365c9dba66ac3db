"""`pivot report`: one HTML file that opens offline with the verdict, the charts, the energy and every run's
metadata; the chart alone as PNG or SVG; and the file as Chromium shows it."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures_runs import BASELINE, EAGLE3, write_run

POWER = {"gpu_watts": 4000.0, "gpu_watts_lo": 3960.0, "gpu_watts_hi": 4040.0}


def pivot(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", "--config", str(config), *args], capture_output=True, text=True, timeout=600
    )  # a hang guard: matplotlib's first import builds its font cache


@pytest.fixture
def config(tmp_path: Path) -> Path:
    campaign = tmp_path / "campaign"
    write_run(campaign, "base", "baseline", BASELINE, speculative=False, gpu_count=8, every_level=POWER)
    # a profile name is the operator's text: markup and a terminal escape in it stay text
    write_run(campaign, "spec", "eagle3<b>$x$\x1b[31m", EAGLE3, speculative=True, gpu_count=8, every_level=POWER)
    write_run(campaign, "short", "baseline", BASELINE, speculative=False, gpu_count=8, settings={"max_tokens": 16})
    path = tmp_path / "pivot.toml"
    path.write_text(f'campaign_dir = "{campaign}"\n')
    return path


def test_the_report_holds_the_verdict_the_charts_the_energy_and_every_runs_metadata_in_one_offline_file(
    config: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    done = pivot(config, "report", "base", "spec", "short", "-o", str(out), "--slo", "itl_p90_ms<=30")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {out}: 3 run(s), 2 comparison(s) with base"
    page = out.read_text()
    assert not re.search(r"<script|<link|<iframe|\bsrc=\"(?!data:)", page)  # nothing to fetch, nothing to run
    assert "<b>$x$" not in page and "eagle3&lt;b&gt;$x$\\x1b[31m" in page  # shown as text, the escape made visible
    assert (
        "recommendation: speculation (spec (eagle3&lt;b&gt;$x$\\x1b[31m), against base (baseline)) helps per-request speed "
        "and total throughput at C ≤ 1"
    ) in page
    assert "energy: J per output token of 8 GPU(s), A 47.34 vs B 45.45 at C=1" in page and "J/tok B/A" in page
    assert "slo: under ITL p90 ≤ 30 ms:" in page
    assert "eagle3-adaptive: extends eagle3" not in page  # the drafting profile is not among this machine's profiles
    assert "no adaptive profile: the drafting run&#x27;s profile" in page
    # a run that measured something else is not compared: said in one line, in the report
    assert "base (baseline) and short (baseline) did not measure the same thing: max_tokens" in page
    images = re.findall(r'<img alt="([^"]+)" src="data:image/svg\+xml;base64,([^"]+)"', page)
    assert [alt for alt, _ in images] == ["throughput by concurrency", "the frontier", "energy per token"]
    assert all(base64.b64decode(data).lstrip().startswith(b"<?xml") for _, data in images)
    for name in ("base", "spec", "short"):  # each run's table and its run.toml as written
        assert f"name = &quot;{name}&quot;" in page
    assert page.count("<th>J/tok</th>") == 3


def test_the_chart_alone_as_png_or_svg(config: Path, tmp_path: Path) -> None:
    assert pivot(config, "report", "base", "spec", "-o", str(tmp_path / "c.png")).returncode == 0
    assert (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert pivot(config, "report", "last", "-o", str(tmp_path / "c"), "--format", "svg").returncode == 0
    assert b"<svg" in (tmp_path / "c").read_bytes()[:2000]
    missing = pivot(config, "report", "nope", "-o", str(tmp_path / "x.html"))
    assert missing.returncode == 2 and "no run named 'nope'" in missing.stderr and not (tmp_path / "x.html").exists()


def test_chromium_shows_the_reports_charts(config: Path, tmp_path: Path) -> None:
    """Opened offline in headless Chromium: the curves are drawn (matplotlib's first colour is on the screenshot)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed")
    out = tmp_path / "report.html"
    assert pivot(config, "report", "base", "spec", "-o", str(out)).returncode == 0
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,2600",
            out.as_uri(),
        ],
        capture_output=True,
        timeout=600,
        check=True,
    )
    from PIL import Image  # matplotlib's own dependency

    counts = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 24) or []
    colours = [(n, rgb) for n, rgb in counts if isinstance(rgb, tuple)]  # an RGB image's colours are (r, g, b)
    blue = sum(n for n, (r, g, b) in colours if abs(r - 0x1F) < 24 and abs(g - 0x77) < 24 and abs(b - 0xB4) < 24)
    assert blue > 500  # the first run's lines and points, in matplotlib's C0 blue


def test_files_pivot_writes_follow_the_users_umask(tmp_path: Path) -> None:
    """Report files were written 0600 under umask 022, for a file meant to be attached to a ticket (issue 36)."""
    import os

    from console.files import write_atomically

    before = os.umask(0o022)
    try:
        write_atomically(tmp_path / "report.html", "<html></html>")
        assert (tmp_path / "report.html").stat().st_mode & 0o777 == 0o644
        (tmp_path / "mine.txt").write_text("x")
        (tmp_path / "mine.txt").chmod(0o600)  # a file the operator keeps private stays so when replaced
        write_atomically(tmp_path / "mine.txt", "y")
        assert (tmp_path / "mine.txt").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(before)

"""`pivot report RUN [RUN…] -o FILE.html`: the runs, the first compared with each other, as one file to share; or
with --format png|svg the throughput chart alone."""

from __future__ import annotations

import json
from pathlib import Path

import tomli_w

from console import config
from console.cli.sweep import resolve_runs
from console.files import write_atomically
from console.report import charts
from console.report.page import Pair, page
from console.server.profiles import ProfileError, load_profiles
from console.sweep.adaptive import NoAdaptiveProfile, plan
from console.sweep.analysis.comparable import NotComparable
from console.sweep.analysis.compare import compare
from console.sweep.analysis.slo import Slo
from console.sweep.runs.store import Run, RunError
from console.untrusted import visible


def _pair(cfg: config.Config, a: Run, b: Run, slo: Slo | None, *, anyway: bool, may_differ: frozenset[str]) -> Pair:
    try:
        cmp = compare(a, b, cfg.margin, anyway=anyway, may_differ=may_differ, slo=slo)
    except (NotComparable, ValueError) as e:
        return Pair(a, b, refused=str(e))
    if a.meta.measured_from or b.meta.measured_from:  # an adaptive profile's run: its verification is the point
        return Pair(a, b, cmp)
    try:
        adaptive = plan(cfg, cmp)
        written = [
            adaptive.summary(),
            tomli_w.dumps(adaptive.profile_data(f"<uploaded beside {adaptive.name}.toml>")),
            json.dumps(adaptive.config, indent=1),
        ]
    except NoAdaptiveProfile as e:
        written = [str(e)]
    return Pair(a, b, cmp, adaptive=written)


def _profiles(cfg: config.Config, runs: list[Run]) -> dict[str, str]:
    """The profile files pivot wrote (adaptive ones, which record the runs they came from), by run."""
    texts = {}
    try:
        profiles = load_profiles(*cfg.profile_dirs)
    except ProfileError:
        return {}
    for run in runs:
        if run.meta.measured_from:
            try:
                texts[run.name] = profiles.get(run.profile).path.read_text(encoding="utf-8", errors="replace")
            except (ProfileError, OSError):
                continue
    return texts


def report_command(
    config_path: str | None, names: list[str], output: Path, fmt: str | None, *, slo: str | None, anyway: bool, may_differ: frozenset[str]
) -> int:
    cfg = config.load(config_path)
    runs = resolve_runs(cfg, names)
    if missing := [run for run in runs if not run.has_measured_levels]:
        raise RunError(f"run {missing[0].name} has no measured level to report")
    fmt = fmt or (output.suffix.lstrip(".").lower() if output.suffix.lower() in (".png", ".svg") else "html")
    if fmt in ("png", "svg"):
        data = charts.render(charts.curves(runs), fmt)
    else:
        bounds = Slo.read(slo or cfg.compare.slo)
        pairs = [_pair(cfg, runs[0], other, bounds, anyway=anyway, may_differ=may_differ) for other in runs[1:]]
        data = page(runs, pairs, _profiles(cfg, runs)).encode()
    write_atomically(output, data, durable=False)
    print(
        f"wrote {visible(str(output))}: "
        + (
            "the throughput chart"
            if fmt != "html"
            else f"{len(runs)} run(s)" + (f", {len(runs) - 1} comparison(s) with {runs[0].name}" if len(runs) > 1 else "")
        )
    )
    return 0

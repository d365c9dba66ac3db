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
from console.report.page import Pair, page, tuning
from console.server.profiles import ProfileError, load_profiles
from console.sweep import tune
from console.sweep.adaptive import NoAdaptiveProfile, plan
from console.sweep.analysis.comparable import NotComparable
from console.sweep.analysis.compare import compare
from console.sweep.analysis.slo import Slo
from console.sweep.runs.store import Run, RunError, open_run
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


def _tuning(cfg: config.Config, name: str) -> tuple[list[Run], str]:
    """A tuning session's runs (no drafting first, the tuned profile's last) and its section of the report."""
    record = tune.find_session(cfg.campaign_dir, name)
    # an interrupted session: what it measured so far
    runs = {n: run for n, run in tune.load_runs(cfg.campaign_dir, record).items() if run.has_measured_levels}
    tuned = open_run(cfg.campaign_dir, record.verify_run) if record.verify_run else None
    tuned = tuned if tuned is not None and tuned.has_measured_levels else None
    if not runs:
        raise RunError(f"{record.name} has measured nothing yet")
    section = tuning(record, tune.outcome(record, runs, tuned, cfg.margin))
    return [*(runs[n] for n in sorted(runs)), *([tuned] if tuned else [])], section


def report_command(
    config_path: str | None,
    names: list[str],
    output: Path,
    fmt: str | None,
    *,
    slo: str | None,
    anyway: bool,
    may_differ: frozenset[str],
    session: str | None = None,
) -> int:
    cfg = config.load(config_path)
    tuned_runs, section = _tuning(cfg, session) if session else ([], "")
    runs = resolve_runs(cfg, names) + tuned_runs
    if not runs:
        raise RunError("name runs to report, or a tuning session with --tune")
    if missing := [run for run in runs if not run.has_measured_levels]:
        raise RunError(f"run {missing[0].name} has no measured level to report")
    fmt = fmt or (output.suffix.lstrip(".").lower() if output.suffix.lower() in (".png", ".svg") else "html")
    pairs: list[Pair] = []
    if fmt in ("png", "svg"):
        data = charts.render(charts.curves(runs), fmt)
    else:
        bounds = Slo.read(slo or cfg.compare.slo)
        # a tuning session's runs are held against each other in its own section, not pair by pair
        pairs = [] if session else [_pair(cfg, runs[0], other, bounds, anyway=anyway, may_differ=may_differ) for other in runs[1:]]
        data = page(runs, pairs, _profiles(cfg, runs), section).encode()
    write_atomically(output, data, durable=False)
    print(
        f"wrote {visible(str(output))}: "
        + (
            "the throughput chart"
            if fmt != "html"
            else f"{len(runs)} run(s)"
            + (f", tuning session {session}" if session else "")
            + (f", {len(pairs)} comparison(s) with {runs[0].name}" if pairs else "")
        )
    )
    return 0

"""The report's charts, drawn by matplotlib without a display (its object API, no pyplot: no global state): the
curves by concurrency with their 95 % intervals, the frontier, and the energy per token. Names in them are the
runs' labels, drawn as text (never read as mathtext)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from console.sweep.analysis.frontier import points
from console.sweep.analysis.intervals import estimate
from console.sweep.runs.store import Run, label
from console.sweep.words.verdicts import naming, value
from console.untrusted import visible

STYLE: dict[Any, Any] = {
    "svg.hashsalt": "pivot",
    "text.parse_math": False,
    "svg.fonttype": "path",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


@contextmanager
def _style() -> Iterator[None]:
    with rc_context(STYLE):
        yield


def _by_c(ax: Axes, runs: list[Run], metric: str, ylabel: str) -> bool:
    """One line per run of a figure (console/sweep/analysis/intervals.py METRICS) by C on a log axis, its interval as
    error bars; whether any run had a point."""
    drawn = False
    levels: set[int] = set()
    rates = any(run.rates for run in runs)  # (a report compares runs of one kind: all rates, or all concurrencies)
    for run in runs:
        found = [(lv.c, e.value, e.lo, e.hi) for lv in run.measured() if (e := estimate(lv, metric)).value is not None]
        if not found:
            continue
        cs = [c for c, _, _, _ in found]
        below = [y - (lo if lo is not None else y) for _, y, lo, _ in found]  # no interval: a bar of nothing
        above = [(hi if hi is not None else y) - y for _, y, _, hi in found]
        ax.errorbar(
            cs,
            [y for _, y, _, _ in found],
            yerr=[below, above],
            marker="o",
            markersize=3,
            capsize=2,
            linewidth=1.2,
            label=visible(label(run)),
        )
        levels.update(cs)
        drawn = True
    ax.set_xscale("log")
    if levels:
        ax.xaxis.set_major_locator(FixedLocator(sorted(levels)))
        ax.xaxis.set_minor_locator(NullLocator())
        with naming(rates):
            ax.set_xticklabels([value(c) for c in sorted(levels)])
    ax.set_xlabel("request rate, req/s (log scale)" if rates else "concurrency C (log scale)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    return drawn


def curves(runs: list[Run]) -> Figure:
    """Total output tok/s and per-request tok/s by concurrency, side by side."""
    with _style():
        fig = Figure(figsize=(10, 3.6), layout="constrained")
        total, per_request = fig.subplots(1, 2)
        _by_c(total, runs, "total", "total output tok/s")
        _by_c(per_request, runs, "per_request", "per-request tok/s")
        total.legend(loc="best", fontsize=8)
    return fig


def frontier(runs: list[Run]) -> Figure:
    """Total output tok/s (per GPU where every run says how many) against a user's tok/s, each point a level."""
    per_gpu = all(run.meta.gpu_count for run in runs)
    with _style():
        fig = Figure(figsize=(6, 4), layout="constrained")
        ax = fig.subplots()
        for run in runs:
            measured = [lv for lv in run.measured() if lv.req_tok_s_mean]
            found = points(measured, run.meta.gpu_count if per_gpu else None)
            if not found:
                continue
            (line,) = ax.plot([x for x, _ in found], [y for _, y in found], marker="o", markersize=3, label=visible(label(run)))
            for lv in measured:
                ax.annotate(
                    f"{lv.rate:g}/s" if lv.rate is not None else f"C={lv.c}",
                    (lv.req_tok_s_mean or 0, lv.total_tok_s / ((run.meta.gpu_count or 1) if per_gpu else 1)),
                    fontsize=6,
                    color=line.get_color(),
                    xytext=(3, 3),
                    textcoords="offset points",
                )
        ax.set_xlabel("a user's tok/s (per-request)")
        ax.set_ylabel("total output tok/s per GPU" if per_gpu else "total output tok/s")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.legend(loc="best", fontsize=8)
    return fig


def energy(runs: list[Run]) -> Figure | None:
    """Joules per output token by concurrency; None where no run read its GPUs' power."""
    with _style():
        fig = Figure(figsize=(6, 3.6), layout="constrained")
        ax = fig.subplots()
        if not _by_c(ax, runs, "energy", "GPU energy per output token (J)"):
            return None
        ax.legend(loc="best", fontsize=8)
    return fig


def render(fig: Figure, fmt: str) -> bytes:
    """The figure as SVG or PNG bytes (the same runs give the same SVG: no date, fixed ids)."""
    buffer = io.BytesIO()
    with _style():
        fig.savefig(buffer, format=fmt, dpi=150, metadata={"Date": None} if fmt == "svg" else None)
    return buffer.getvalue()

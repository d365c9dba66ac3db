"""The run's levels, one row each: throughput with its interval, per-request speed, latencies, errors, and what to
know about the level (failed, client-bound, latencies not measured, requests ended early, draft acceptance)."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable

from console.sweep.model import LevelDone
from console.sweep.words.levels import energy_text

COLUMNS = ("C", "tok/s", "±", "per-req", "TTFT p50", "ITL p50", "J/tok", "errors", "note")


def note(e: LevelDone) -> str:
    if e.failed:
        return "FAILED"
    if e.client_bound:
        return "client-bound"
    if e.lagging:
        return "no ITL: client late"  # its loop ran late, or chunks came in bursts: latencies not measured
    if e.short:
        return f"{e.short} short"
    if e.energy_unknown:
        return "J/tok? too short"
    if e.accept_rate is None:
        return ""
    share = e.draft_share  # what the drafts gave, beside how often they were right
    return f"acc {e.accept_rate:.0%}" + (f" · {share:.0%} drafted" if share is not None else "")


class LevelTable(DataTable[str]):
    def __init__(self, **kw: Any):
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self.rates = False  # its levels are request rates: the first column is named so

    def on_mount(self) -> None:
        self._head(rates=False)

    def _head(self, rates: bool) -> None:
        """Its columns, the first named as the levels are: C, or rate."""
        self.rates = rates
        for col in COLUMNS:
            self.add_column("rate" if col == "C" and rates else col, key=col)

    def show(self, levels: list[LevelDone]) -> None:
        rates = any(e.rate is not None for e in levels)
        self.clear(columns=rates != self.rates)
        if not self.columns:
            self._head(rates)
        for e in levels:
            self.add(e)

    def add(self, e: LevelDone) -> None:
        if (e.rate is not None) != self.rates and not self.row_count:  # a sweep of the other kind begins
            self.clear(columns=True)
            self._head(e.rate is not None)
        ms = lambda v: "—" if v is None else f"{v * 1000:.0f}"
        num = lambda v: "—" if v is None else f"{v:.1f}"
        lo, hi, total = e.total_tok_s_lo, e.total_tok_s_hi, e.total_tok_s
        spread = f"{(hi - lo) / 2 / total * 100:.0f}%" if lo is not None and hi is not None and total else "—"
        self.add_row(
            f"{e.rate:g}/s" if e.rate is not None else str(e.c),  # a rate level: its requests per second
            num(total),
            spread,
            num(e.req_tok_s_mean),
            ms(e.ttft_p50),
            "—" if e.itl_p50 is None else f"{e.itl_p50 * 1000:.1f}",
            energy_text(e),
            f"{e.errors}/{e.requests}",
            note(e),
        )

"""The run's levels, one row each: throughput with its interval, per-request speed, latencies, errors, and what to
know about the level (failed, client-bound, latencies not measured, requests ended early, draft acceptance)."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable

COLUMNS = ("C", "tok/s", "±", "per-req", "TTFT p50", "ITL p50", "errors", "note")


def note(e: dict[str, Any]) -> str:
    if e.get("failed"):
        return "FAILED"
    if e.get("client_bound"):
        return "client-bound"
    if e.get("lagging"):
        return "ITL?"
    if e.get("short"):
        return f"{e['short']} short"
    rate = e.get("server_spec_accept_rate", (e.get("server") or {}).get("spec_accept_rate"))
    return f"acc {rate:.0%}" if isinstance(rate, int | float) else ""


class LevelTable(DataTable[str]):
    def __init__(self, **kw: Any):
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)

    def on_mount(self) -> None:
        for col in COLUMNS:
            self.add_column(col, key=col)

    def show(self, levels: list[dict[str, Any]]) -> None:
        self.clear()
        for e in levels:
            self.add(e)

    def add(self, e: dict[str, Any]) -> None:
        ms = lambda v: "—" if v is None else f"{v * 1000:.0f}"
        num = lambda v: "—" if v is None else f"{v:.1f}"
        lo, hi, total = e.get("total_tok_s_lo"), e.get("total_tok_s_hi"), e.get("total_tok_s")
        spread = f"{(hi - lo) / 2 / total * 100:.0f}%" if lo is not None and hi is not None and total else "—"
        self.add_row(str(e["c"]), num(total), spread, num(e.get("req_tok_s_mean")), ms(e.get("ttft_p50")),
                     "—" if e.get("itl_p50") is None else f"{e['itl_p50'] * 1000:.1f}",
                     f"{e.get('errors', 0)}/{e.get('requests', 0)}", note(e))

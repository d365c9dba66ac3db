"""The GPU processes: sortable, taggable, with stray, zombie and orphan rows marked."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

from console.gpu.format import age, flags, gib
from console.gpu.samples import GpuProcess, Sample
from console.ui.colours import theme_style

ProcKey = tuple[int, int | None]
SORTS: list[tuple[str, Callable[[GpuProcess], Any], bool]] = [
    ("gpu", lambda p: (p.gpu if p.gpu is not None else -1, p.pid), False),
    ("memory", lambda p: p.mem_mib or 0, True),
    ("age", lambda p: -(p.start or 0), True),
    ("pid", lambda p: p.pid, False),
]


class ProcessTable(DataTable[Text | str]):
    BINDINGS = [
        Binding("space", "toggle_tag", "Tag", id="gpu.tag", tooltip="Tag or untag the process under the cursor"),
        Binding("s", "cycle_sort", "Sort", id="gpu.sort", tooltip="Sort by GPU, memory, age or pid"),
        Binding("escape", "clear_tags", "Untag", show=False, id="gpu.untag"),
    ]

    def __init__(self, **kw: Any):
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self.tagged: set[ProcKey] = set()
        self.sort_index = 0
        self.procs: dict[str, GpuProcess] = {}
        self.last_sample: Sample | None = None

    def on_mount(self) -> None:
        for label, key in (("", "tag"), ("GPU", "gpu"), ("PID", "pid"), ("USER", "user"), ("GPU-MEM", "mem"),
                           ("STATE", "state"), ("AGE", "age"), ("FLAGS", "flags"), ("COMMAND", "cmd")):
            self.add_column(label, key=key)

    @property
    def sort_name(self) -> str:
        return SORTS[self.sort_index][0]

    def _colour(self, name: str) -> Style:
        return theme_style(self.app, name)

    def _flags(self, proc: GpuProcess) -> Text:
        styles = {"zombie": "gpu-zombie", "orphan": "warning", "stray": "gpu-stray", "server": "success", "host-pid": "error"}
        joined = Text(" ").join(Text(f, style=self._colour(styles[f])) for f in flags(proc))
        joined.justify = "left"
        return joined

    def update_sample(self, sample: Sample) -> None:
        self.last_sample = sample
        cursor_key = self._cursor_key()
        _, key_fn, reverse = SORTS[self.sort_index]
        procs = sorted(sample.procs, key=key_fn, reverse=reverse)
        live = {p.key for p in procs}
        self.tagged &= live  # a process that is gone cannot stay tagged
        self.procs = {}
        self.clear()
        now = time.time()
        for p in procs:
            row_key = f"{p.pid}:{p.start_ticks}:{p.gpu}"
            self.procs[row_key] = p
            tag = Text("●", style=self._colour("accent")) if p.key in self.tagged else Text(" ")
            cmd_style = "dim" if p.zombie else ""
            self.add_row(
                tag, str(p.gpu if p.gpu is not None else "?"), str(p.pid), Text(p.user), f"{gib(p.mem_mib)}G", Text(p.state),
                age(p.age_s(now)), self._flags(p), Text(p.cmd or "(no command line)", style=cmd_style), key=row_key,
            )
        if cursor_key is not None:
            try:
                self.move_cursor(row=self.get_row_index(cursor_key), animate=False)
            except RowDoesNotExist:
                pass

    def _cursor_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        except RowDoesNotExist:
            return None

    @property
    def cursor_process(self) -> GpuProcess | None:
        key = self._cursor_key()
        return self.procs.get(key) if key else None

    def selected(self) -> list[GpuProcess]:
        """The tagged processes, or the one under the cursor when none is tagged."""
        if self.tagged:
            seen: dict[ProcKey, GpuProcess] = {}
            for p in self.procs.values():
                if p.key in self.tagged:
                    seen.setdefault(p.key, p)
            return list(seen.values())
        current = self.cursor_process
        return [current] if current else []

    def action_toggle_tag(self) -> None:
        proc = self.cursor_process
        if proc is None:
            return
        self.tagged ^= {proc.key}
        for row_key, p in self.procs.items():
            if p.key == proc.key:
                mark = Text("●", style=self._colour("accent")) if proc.key in self.tagged else Text(" ")
                self.update_cell(row_key, "tag", mark)
        if self.cursor_row < self.row_count - 1:
            self.move_cursor(row=self.cursor_row + 1)

    def action_clear_tags(self) -> None:
        self.tagged.clear()
        for row_key in self.procs:
            self.update_cell(row_key, "tag", Text(" "))

    def action_cycle_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.notify(f"processes sorted by {self.sort_name}", timeout=2)
        if self.last_sample is not None:
            self.update_sample(self.last_sample)

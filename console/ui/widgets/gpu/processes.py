"""The GPU processes: sortable, taggable, with stray, zombie and orphan rows marked."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowDoesNotExist, RowKey

from console.gpu.format import age, flags, gib
from console.gpu.samples import GpuProcess, Sample
from console.ui.colours import theme_style
from console.ui.text import fit_command

ProcKey = tuple[int, int | None]
COLUMN_LABELS = ("", "GPU", "PID", "USER", "GPU-MEM", "STATE", "AGE", "FLAGS", "COMMAND")
COLUMN_KEYS = ("tag", "gpu", "pid", "user", "mem", "state", "age", "flags", "cmd")
SORTS: list[tuple[str, Callable[[GpuProcess], Any], bool]] = [
    ("gpu", lambda p: (p.gpu if p.gpu is not None else -1, p.pid), False),
    ("memory", lambda p: p.mem_mib or 0, True),
    ("age", lambda p: -(p.start or 0), True),
    ("pid", lambda p: p.pid, False),
]


def _width(cell: Text | str) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


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
        self._shown: dict[str, tuple[Text | str, ...]] = {}  # the cells on screen, by row
        self.last_sample: Sample | None = None

    def on_mount(self) -> None:
        for label, key in zip(COLUMN_LABELS, COLUMN_KEYS, strict=True):
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
        """The sample's processes: the cells that changed when the rows are the same ones in the same order (each
        second, mostly none), else the table built again."""
        self.last_sample = sample
        _, key_fn, reverse = SORTS[self.sort_index]
        procs = sorted(sample.procs, key=key_fn, reverse=reverse)
        self.tagged &= {p.key for p in procs}  # a process that is gone cannot stay tagged
        now = time.time()
        rows = {f"{p.pid}:{p.start_ticks}:{p.gpu}": (p, self._cells(p, now)) for p in procs}
        if list(rows) == list(self.procs) and len(rows) == self.row_count:
            changed: list[tuple[str, str, Text | str]] = []
            for row_key, (p, cells) in rows.items():
                for column, old, new in zip(COLUMN_KEYS, self._shown[row_key], cells, strict=True):
                    if old != new:  # the width is measured again only when the cell may not fit (a second layout)
                        if _width(new) > _width(old):
                            self.update_cell(row_key, column, new, update_width=True)
                        else:
                            changed.append((row_key, column, new))
                self.procs[row_key], self._shown[row_key] = p, cells
            self._update_cells_in_place(changed)
            return
        cursor_key = self._cursor_key()
        self.clear()
        self.procs = {key: p for key, (p, _) in rows.items()}
        self._shown = {key: cells for key, (_, cells) in rows.items()}
        for row_key, (_, cells) in rows.items():
            self.add_row(*cells, key=row_key)
        if cursor_key is not None:
            try:
                self.move_cursor(row=self.get_row_index(cursor_key), animate=False)
            except RowDoesNotExist:
                pass

    def _update_cells_in_place(self, changed: list[tuple[str, str, Text | str]]) -> None:
        """Cells that still fit their columns, with only their own cached renders dropped. DataTable.update_cell
        counts an update of the whole table, after which every cell of every row is rendered again: about 15 ms a
        frame for nine rows at 160 columns, each second of a server's first minute, when every AGE ticks. This
        reaches into Textual 8's DataTable caches; where they are not as expected, update_cell does it."""
        if not changed:
            return
        caches = ("_data", "_cell_render_cache", "_row_render_cache", "_row_renderable_cache", "_line_cache")
        if not all(hasattr(self, name) for name in caches):
            for row_key, column, value in changed:
                self.update_cell(row_key, column, value)
            return
        cells = {(RowKey(row), ColumnKey(column)) for row, column, _ in changed}
        rows = {row for row, _ in cells}
        for row_key, column, value in changed:
            self._data[RowKey(row_key)][ColumnKey(column)] = value
        for cell_key in [k for k in self._cell_render_cache.keys() if (k[0], k[1]) in cells]:  # noqa: SIM118 - no __iter__
            self._cell_render_cache.discard(cell_key)
        for line_key in [k for k in self._row_render_cache.keys() if k[0] in rows]:  # noqa: SIM118 - an LRUCache
            self._row_render_cache.discard(line_key)
        for row in rows:
            self._row_renderable_cache.discard((self._update_count, self.get_row_index(row)))
        self._line_cache.clear()  # a line of the screen is its row's cached render, cropped: cheap to make again
        self.refresh()

    def _tag(self, p: GpuProcess) -> Text:
        return Text("●", style=self._colour("accent")) if p.key in self.tagged else Text(" ")

    def _cells(self, p: GpuProcess, now: float) -> tuple[Text | str, ...]:
        command = fit_command(p.cmd or "(no command line)", self._command_room())
        return (
            self._tag(p),
            str(p.gpu if p.gpu is not None else "?"),
            str(p.pid),
            Text(p.user),
            f"{gib(p.mem_mib)}G",
            Text(p.state),
            age(p.age_s(now)),
            self._flags(p),
            Text(command, style="dim" if p.zombie else ""),
        )

    def _command_room(self) -> int | None:
        """Columns left for COMMAND beside the others (None before the table has a size: nothing is cut)."""
        if not self.size.width or "cmd" not in {k.value for k in self.columns}:
            return None
        others = sum(c.get_render_width(self) for k, c in self.columns.items() if k.value != "cmd")
        return max(12, self.size.width - others - 2 * self.cell_padding - self.scrollbar_size_vertical)

    def on_resize(self) -> None:
        if self.last_sample is not None:  # the commands cut to the new width
            self.procs = {}
            self.update_sample(self.last_sample)

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
                self._set_tag(row_key, self._tag(p))
        if self.cursor_row < self.row_count - 1:
            self.move_cursor(row=self.cursor_row + 1)

    def action_clear_tags(self) -> None:
        self.tagged.clear()
        for row_key in self.procs:
            self._set_tag(row_key, Text(" "))

    def _set_tag(self, row_key: str, mark: Text) -> None:
        self.update_cell(row_key, "tag", mark)
        if row_key in self._shown:
            self._shown[row_key] = (mark, *self._shown[row_key][1:])

    def action_cycle_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.notify(f"processes sorted by {self.sort_name}", timeout=2)
        if self.last_sample is not None:
            self.update_sample(self.last_sample)

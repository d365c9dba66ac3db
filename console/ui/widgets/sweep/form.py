"""Choosing a sweep's levels and settings before it starts."""

from __future__ import annotations

import dataclasses

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from console.sweep.settings import SweepSettings


class SweepForm(ModalScreen[SweepSettings | None]):
    DEFAULT_CSS = """
    SweepForm { align: center middle; }
    SweepForm > Vertical { width: 70; max-width: 95%; height: auto; border: thick $accent; background: $surface; padding: 0 1; }
    SweepForm Input, SweepForm Select { margin-bottom: 0; }
    SweepForm #error { color: $error; height: auto; }
    SweepForm Horizontal { height: auto; align-horizontal: right; margin-top: 1; }
    SweepForm Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, defaults: SweepSettings):
        super().__init__()
        self.defaults = defaults

    def compose(self) -> ComposeResult:
        d = self.defaults
        with Vertical():
            yield Label("Levels (concurrency, comma-separated)")
            yield Input(",".join(map(str, d.levels)), id="levels")
            yield Label("Requests per level: auto = max(4·C, 16), c = exactly C, or a number")
            yield Input(str(d.requests), id="requests")
            yield Label("max_tokens per request (every request runs to length: ignore_eos)")
            yield Input(str(d.max_tokens), id="max_tokens", type="integer")
            yield Label("Prompt length in tokens")
            yield Input(str(d.input_tokens), id="input_tokens", type="integer")
            yield Select([("completions", "completions"), ("chat", "chat")], value=d.api, allow_blank=False, id="api")
            yield Label("", id="error")
            with Horizontal():
                yield Button("Start", variant="success", id="start")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#levels", Input).focus()

    def _settings(self) -> SweepSettings:
        value = lambda name: self.query_one(f"#{name}", Input).value.strip()  # noqa: E731
        requests = value("requests")
        data = {
            "levels": [int(c) for c in value("levels").replace(" ", "").split(",") if c],
            "requests": int(requests) if requests.isdigit() else requests,
            "max_tokens": int(value("max_tokens")), "input_tokens": int(value("input_tokens")),
            "api": self.query_one("#api", Select).value,
        }
        return SweepSettings.from_dict({**dataclasses.asdict(self.defaults), **data})

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
            return
        try:
            self.dismiss(self._settings())
        except ValueError as e:
            self.query_one("#error", Label).update(str(e))

    def on_input_submitted(self) -> None:
        self.on_button_pressed(Button.Pressed(self.query_one("#start", Button)))

    def action_cancel(self) -> None:
        self.dismiss(None)

"""Choosing a sweep's levels and settings before it starts: one line per field, so that the whole form (its buttons
included) fits an 80x24 terminal."""

from __future__ import annotations

import os

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from console.settings import PROMPT_SETS, SweepSettings, meaning, parse_levels, tidy_levels

ABSURD_C = 4096  # a level above it is asked about: a typo (100000 for 1000) would take hours
FIELDS = (
    ("levels", "Levels"),
    ("requests", "Requests/level"),
    ("max_tokens", "max_tokens"),
    ("prompts", "Prompts"),
    ("input_tokens", "Prompt tokens"),
    ("api", "API"),
)
LEVELS_HINT = ", comma-separated; or request rates, open loop: 0.5/s,2/s"


def parse_form_levels(text: str) -> dict[str, list[int] | list[float]]:
    """The Levels field: concurrencies (1,2,5), or request rates (0.5/s,2/s): {"levels": …} or {"rates": …, also
    clearing levels' meaning}; ValueError naming what is wrong."""
    items = [item for item in text.replace(" ", "").split(",") if item]
    rated = [item.endswith("/s") for item in items]
    if items and all(rated):
        try:
            rates = sorted({float(item.removesuffix("/s")) for item in items})
        except ValueError:
            raise ValueError(f"{text!r}: a rate is a number of requests per second, such as 0.5/s") from None
        if any(r <= 0 for r in rates):
            raise ValueError("a rate must be above 0")
        return {"rates": rates}
    if any(rated):
        raise ValueError("give concurrencies (1,2,5) or rates (0.5/s,2/s), not both")
    return {"levels": parse_levels(text), "rates": []}


class LevelsField(Input):
    """The levels, taking first what was typed while the form opened: in its own Focus event, which comes before the
    keys typed after it (the screen's DescendantFocus may come after them, and a key was lost between the two)."""

    def on_focus(self) -> None:
        form = self.screen
        if isinstance(form, SweepForm) and form.typed_early:
            self.value, form.typed_early = form.typed_early, ""  # typing replaces the default, as into a selected field
            self.cursor_position = len(self.value)


class SweepForm(ModalScreen[SweepSettings | None]):
    DEFAULT_CSS = """
    SweepForm { align: center middle; }
    SweepForm > Vertical { width: 76; max-width: 100%; height: auto; border: round $accent; background: $surface;
                           padding: 0 1; }
    SweepForm Grid { grid-size: 2; grid-columns: 14 1fr; grid-rows: 1; grid-gutter: 0 1; height: auto; }
    SweepForm Label { width: 100%; }
    SweepForm #hint { color: $text-muted; height: auto; max-height: 2; }
    SweepForm #error { color: $error; height: auto; }
    SweepForm #buttons { height: 1; align-horizontal: right; margin-top: 1; }
    SweepForm Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, defaults: SweepSettings):
        super().__init__()
        self.defaults = defaults
        self.levels_note: str | None = None  # what tidying the typed levels changed
        self.asked: tuple[int, ...] | None = None  # levels whose size was questioned once already
        self.typed_early = ""  # what was typed while the form opened, before its first field had the focus

    def compose(self) -> ComposeResult:
        d = self.defaults
        values = {
            "levels": ",".join(f"{r:g}/s" for r in d.rates) if d.rates else ",".join(map(str, d.levels)),
            "prompts": d.prompts,
            "requests": str(d.requests),
            "max_tokens": str(d.max_tokens),
            "input_tokens": str(d.input_tokens),
        }
        with Vertical():
            yield Static("Sweep the running server", classes="title")
            with Grid():
                for field, label in FIELDS[:-1]:
                    yield Label(label)
                    yield (LevelsField if field == "levels" else Input)(
                        values[field], id=field, compact=True, type="integer" if field in ("max_tokens", "input_tokens") else "text"
                    )
                yield Label("API")
                yield Select([("completions", "completions"), ("chat", "chat")], value=d.api, allow_blank=False, id="api", compact=True)
            yield Static(meaning("levels") + LEVELS_HINT, id="hint")
            yield Label("", id="error")
            with Horizontal(id="buttons"):
                yield Button("Start", variant="success", id="start", compact=True)
                yield Button("Cancel", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#levels", Input).focus()

    def on_key(self, event: events.Key) -> None:
        """Keys typed while the form opens (`n` then the levels, quickly) are the first field's: without this they
        reached the console behind it, where 1 and 2 move the focus to another pane."""
        if self.focused is None and event.is_printable and event.character:
            self.typed_early += event.character
            event.stop()
            event.prevent_default()

    def on_descendant_focus(self, event: object) -> None:
        """The hint says what the focused field takes (the label beside it has no room to)."""
        focused = self.focused
        if focused is not None and focused.id in {f for f, _ in FIELDS}:
            self.query_one("#hint", Static).update(meaning(focused.id) + (LEVELS_HINT if focused.id == "levels" else ""))

    def _settings(self) -> SweepSettings:
        value = lambda name: self.query_one(f"#{name}", Input).value.strip()
        requests = value("requests")

        def whole(name: str, label: str) -> int:
            text = value(name)
            if not text.isdigit():
                raise ValueError(f"{label}: {text!r} is not a whole number")
            return int(text)

        try:
            levels = parse_form_levels(value("levels"))
        except ValueError as e:
            raise ValueError(f"Levels: {e}") from None
        self.levels_note = None
        if (concurrencies := levels.get("levels")) is not None:
            tidy, self.levels_note = tidy_levels([int(c) for c in concurrencies])
            levels["levels"] = list(tidy)
        prompts = value("prompts") or "synthetic"
        data = {
            **levels,
            "prompts": prompts if prompts in PROMPT_SETS else os.path.abspath(os.path.expanduser(prompts)),
            "requests": int(requests) if requests.isdigit() else requests,
            "max_tokens": whole("max_tokens", "max_tokens"),
            "input_tokens": whole("input_tokens", "Prompt tokens"),
            "api": self.query_one("#api", Select).value,
        }
        return SweepSettings.from_dict({**self.defaults.to_dict(), **data})

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
            return
        try:
            chosen = self._settings()
        except ValueError as e:
            self.query_one("#error", Label).update(Text(str(e)))
            return
        if not chosen.rates and (most := max(chosen.levels)) > ABSURD_C and self.asked != chosen.levels:
            self.asked = chosen.levels  # said once: Start again goes ahead
            self.query_one("#error", Label).update(
                Text(f"C={most} is more than {ABSURD_C} requests in flight, beyond what one server takes: Start again sweeps it anyway")
            )
            return
        if self.levels_note:
            self.app.notify(self.levels_note, title="Levels", timeout=6)
        self.dismiss(chosen)

    def on_input_changed(self) -> None:
        """An error or a question about values since edited is no longer the form's word."""
        self.query_one("#error", Label).update("")

    def on_input_submitted(self) -> None:
        self.on_button_pressed(Button.Pressed(self.query_one("#start", Button)))

    def action_cancel(self) -> None:
        self.dismiss(None)

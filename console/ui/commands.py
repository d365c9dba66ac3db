"""Command palette entries built from the current state (ctrl+p)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.ui.widgets.sweep.pane import SweepPane

if TYPE_CHECKING:
    from console.ui.app import PivotApp


def readonly(app: PivotApp, what: str) -> Callable[[], None]:
    return lambda: app.notify(f"read-only: {what} is off (pivot was started with --readonly)", severity="warning",
                              timeout=4)


class PivotCommands(Provider):
    def _commands(self) -> list[tuple[str, object, str]]:
        app = cast("PivotApp", self.app)
        commands: list[tuple[str, object, str]] = [
            (f"focus {name}", partial(app.action_focus_pane, pane), f"move the focus to the {name} pane")
            for pane, name in (("gpus", "GPUs"), ("server", "Server"), ("tasks", "Tasks"), ("sweep", "Sweep"))
        ]
        commands += [
            ("zoom the focused pane", app.action_toggle_zoom, "show one pane on the whole screen, or all four again"),
            ("reconnect", app.action_reconnect, "drop and re-establish the SSH connection"),
            ("help: keys", app.action_help, "every key of every pane"),
            ("event log", app.action_event_log, "every kill, start, stop, sweep, comparison and task change"),
        ]
        pane = app.gpu_pane
        if pane is not None and pane.sample is not None:
            stray = len({p.pid for p in pane.sample.stray})
            if stray:
                commands.append((f"kill {stray} stray process{'es' if stray != 1 else ''}",
                                 readonly(app, "kill") if app.readonly else pane.action_kill_stray,
                                 "read-only: off" if app.readonly else
                                 "SIGTERM, then SIGKILL after the grace period, after a confirmation"))
        sweep = app.query("#sweep")
        if sweep:
            sweep_pane = sweep.first(SweepPane)
            commands.append(("compare the last two runs", sweep_pane.action_compare, "crossover, saturation and recommendation"))
            if app.readonly:
                commands.append(("start a sweep", readonly(app, "a sweep"), "read-only: off"))
            elif sweep_pane.check_action("new_sweep", ()):
                commands.append(("start a sweep", sweep_pane.action_new_sweep, "choose levels and settings, then sweep the running server"))
        for theme in sorted(app.available_themes):
            commands.append((f"theme: {theme}", partial(setattr, app, "theme", theme), "switch the colour theme"))
        return commands

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            if (score := matcher.match(name)) > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)  # type: ignore[arg-type]

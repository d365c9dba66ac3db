"""One line over the panes while the SSH link is down: what they show is what they last saw."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from console.remote import ConnectionEvent, ConnState
from console.ui.colours import theme_style


class LinkBanner(Static):
    DEFAULT_CSS = """
    LinkBanner { display: none; height: auto; padding: 0 1; background: $error 25%; }
    LinkBanner.-shown { display: block; }
    """

    def __init__(self, host: str, **kw: object):
        super().__init__("", **kw)  # type: ignore[arg-type]
        self.host = host
        self.down_since: float | None = None
        self.was_up = False
        self.reason: str | None = None

    def changed(self, event: ConnectionEvent) -> None:
        """Shown from the link's loss until it is up again: any state but up after an up, or a failed first
        connection."""
        if event.state == ConnState.UP:
            self.down_since, self.was_up, self.reason = None, True, None
        elif self.down_since is None and (self.was_up or event.state == ConnState.FAILED) and event.state != ConnState.CLOSED:
            self.down_since = event.at
        self.set_class(self.down_since is not None, "-shown")
        if self.down_since is None:
            return
        if event.reason:
            self.reason = event.reason  # "connecting" and "reconnecting in N s" carry none: keep why it went down
        since = time.strftime("%H:%M:%S", time.localtime(self.down_since))
        text = Text(f"✕ link to {self.host} lost at {since}", theme_style(self.app, "error", bold=True))
        text.append(f" ({self.reason or event.state}): panes show the last data seen; ")
        text.append("reconnecting, r retries now" if event.state != ConnState.FAILED else "gave up: r retries")
        self.update(text)

"""Calling an operator who watches another window: a sweep that ends, fails or stops, a server that becomes ready
or crashes, a runbook step that waits for an answer. The terminal's bell (tmux marks the window with activity) and,
where pivot.toml's [notify] asks for it, a desktop notification (OSC 777 and OSC 9: terminals that know neither
ignore them). What is said comes from the host: only printable text, no separator of the sequence, goes out."""

from __future__ import annotations

import re

from textual.app import App

from console.config import NotifyTable

_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f;]")  # control characters end an OSC sequence; ";" splits OSC 777's fields


def _plain(text: str, limit: int = 200) -> str:
    return _UNSAFE.sub(" ", text)[:limit]


def desktop_sequence(title: str, body: str) -> str:
    """OSC 777 ("notify", a title and a body) and OSC 9 (one message): a terminal that knows neither ignores them."""
    title, body = _plain(title, 60), _plain(body)
    return f"\x1b]777;notify;{title};{body}\x1b\\" + f"\x1b]9;{title}: {body}\x1b\\"


def call_attention(app: App[object], notify: NotifyTable, title: str, body: str) -> None:
    if notify.bell:  # (a headless app, as in tests, rings nothing)
        app.bell()
    # Textual has no call that writes an OSC sequence: its own bell() writes to its driver like this
    if notify.desktop and not app.is_headless and (driver := app._driver) is not None:
        driver.write(desktop_sequence(title, body))

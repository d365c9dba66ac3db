"""Warnings logged by the core while the screen is up go to the screen as notifications, never over it: the root
logger's stream handlers (stderr, the terminal Textual draws on) are set aside until the app ends."""

from __future__ import annotations

import logging
import threading
from typing import Any, Literal

from textual.app import App

from console.untrusted import visible


class ScreenLog(logging.Handler):
    def __init__(self, app: App[Any]):
        super().__init__(logging.WARNING)
        self.app = app
        self._thread = threading.get_ident()
        self._aside: list[logging.Handler] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        severity: Literal["warning", "error"] = "error" if record.levelno >= logging.ERROR else "warning"
        message = visible(message, newlines=True)  # data from a host: written out, never markup
        if threading.get_ident() == self._thread:
            self.app.notify(message, severity=severity, timeout=8, markup=False)
        else:
            self.app.call_from_thread(self.app.notify, message, severity=severity, timeout=8, markup=False)

    def install(self) -> None:
        root = logging.getLogger()
        self._aside = [h for h in root.handlers if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
        for handler in self._aside:
            root.removeHandler(handler)
        root.addHandler(self)

    def remove(self) -> None:
        root = logging.getLogger()
        root.removeHandler(self)
        for handler in self._aside:
            root.addHandler(handler)

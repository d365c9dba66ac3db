"""What goes wrong inside a pane is said in that pane, never as the console's end: a value nobody foresaw (from a host,
a server, a file) fails one drawing or one watch, which is tried again — a tick later, or after a backoff."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from rich.text import Text
from textual.widget import Widget

from console.ui.colours import theme_style
from console.ui.widgets.quiet import QuietStatic
from console.untrusted import visible

log = logging.getLogger(__name__)
BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
F = TypeVar("F", bound=Callable[..., Any])


def backoff(failures: int) -> float:
    """The wait before the next try of a watch that failed `failures` times in a row (1 for the first)."""
    return BACKOFF_S[min(max(failures, 1), len(BACKOFF_S)) - 1]


def failure(what: str, error: BaseException) -> str:
    return f"{what} failed ({type(error).__name__}: {visible(str(error))})"


class PaneProblem(QuietStatic):
    """The pane's last line while something in it fails; hidden otherwise."""

    DEFAULT_CSS = "PaneProblem { height: auto; max-height: 2; display: none; } PaneProblem.-shown { display: block; }"

    def say(self, text: str | None) -> None:
        self.update(Text(text, theme_style(self.app, "error")) if text else "")
        self.set_class(bool(text), "-shown")


def pane_problem(pane: Widget, text: str | None) -> None:
    """Say (or, with None, clear) the pane's problem on its PaneProblem line."""
    found = pane.query(PaneProblem)
    if found:
        found.first().say(text)


def survives(what: str) -> Callable[[F], F]:
    """A pane's method run by a timer or a message (a drawing, a reload) whose error would otherwise end the app: the
    error is said on the pane's problem line (and logged), once per cause, and the next call tries again."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def guarded(self: Widget, *args: Any, **kw: Any) -> Any:
            failures: dict[str, str] = self.__dict__.setdefault("_failures", {})
            try:
                result = method(self, *args, **kw)
            except Exception as e:
                said = f"{failure(what, e)}; tried again at the next change"
                if failures.get(what) != said:
                    failures[what] = said
                    log.debug("%s", said, exc_info=True)
                    pane_problem(self, said)
                return None
            if failures.pop(what, None) is not None:
                pane_problem(self, next(iter(failures.values()), None))
            return result

        return guarded  # type: ignore[return-value]

    return wrap

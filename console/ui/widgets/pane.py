"""What the four panes share: the session, and --readonly decided in one place. An action in a pane's READONLY set
(what changes the host, the servers, the runs or the campaign's tasks) is off in a read-only console, and its key says
why instead of doing nothing (PivotApp.on_key asks `readonly_binding`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.binding import Binding
from textual.containers import Vertical

if TYPE_CHECKING:
    from console.session import Session


class Pane(Vertical):
    READONLY: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, session: Session, *, readonly: bool = False, **kw: object):
        super().__init__(**kw)  # type: ignore[arg-type]
        self.session, self.readonly = session, readonly

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.readonly and action in self.READONLY:
            return False
        return self.can(action)

    def can(self, action: str) -> bool | None:
        """Whether an action is offered now (True), shown but off (None) or hidden (False): the pane's own rules."""
        return True

    def readonly_binding(self, key: str) -> Binding | None:
        """The binding of `key` that --readonly took away here, if any."""
        if not self.readonly:
            return None
        for binding in self.BINDINGS:
            if isinstance(binding, Binding) and key in binding.key.split(",") and binding.action.split("(")[0] in self.READONLY:
                return binding
        return None

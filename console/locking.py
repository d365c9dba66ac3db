"""One writer at a time on a campaign file that several processes change (consoles, headless commands, runbooks).

The lock is a file of its own beside the data (`.tasks.json.lock`): the data file is replaced by a rename, and a
lock on a file that has just been renamed away locks nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the campaign's lock for `path` (waiting for whoever holds it); raises OSError where it cannot be made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock

"""One load generator per run: an exclusive lock on a file in the run's directory while it writes.

A second `--resume` of a run that is still sweeping would measure each level under the first one's
load. The lock is fcntl's: the kernel drops it when its holder dies, however it dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

LOCK = ".loadgen.lock"


class RunLocked(Exception):
    pass


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise RunLocked(
                f"run {run_dir.name} is being written by another load generator (pid {holder}): wait for it, or stop that sweep first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def holder(run_dir: Path) -> int | None:
    """The pid of the load generator writing this run now; None when none is."""
    try:
        fd = os.open(run_dir / LOCK, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(fd)

"""Files pivot writes on this machine: whole or not at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path, *, durable: bool = True) -> Iterator[Path]:
    """A temporary path beside `path` to write; when the block ends, it replaces `path` in one rename (and, durable,
    after an fsync of the file and then of the directory: a crash, a kill -9, a full disk or a power cut leaves the
    old file or the new one, never half of either). When the block fails, the temporary file goes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:  # the mode a file made in place would have (mkstemp's is 0600: a report to attach to a ticket was unreadable)
        os.fchmod(fd, path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask())
    finally:
        os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if durable:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def write_atomically(path: Path, data: str | bytes, *, durable: bool = True) -> None:
    with replacing(path, durable=durable) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


def _umask() -> int:
    """This process's umask, read without setting it (os.umask sets it, for every thread, while it asks)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022

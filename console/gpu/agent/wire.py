"""What the agent prints: one JSON object per line, each with the protocol's version."""

from __future__ import annotations

import json
import sys

VERSION = 1


class NoDriver(Exception):
    pass


def emit(obj: dict) -> None:
    obj.setdefault("v", VERSION)
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()

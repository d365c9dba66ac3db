"""Text that came from a host, a server or a file: untrusted bytes.

Decoded with replacement (one bad byte never fails a read or drops a link) and
shown with every control character made visible, so that no escape sequence in
a log line, a process name, a task or an HTTP error body reaches the
operator's terminal: `\\x1b]0;pwned\\x07` is printed as those characters.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides that reorder what is shown
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def decode(data: bytes | str) -> str:
    """Remote output as text: UTF-8, every undecodable byte replaced (U+FFFD)."""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: bytes | str, *, newlines: bool = False) -> str:
    """The text with its control characters written out (`\\x1b`, `\\r`, `\\u202e`); newlines too unless `newlines`."""
    text = decode(text)
    if newlines:
        return "\n".join(CONTROL.sub(_escape, line.removesuffix("\r")) for line in text.split("\n"))
    return CONTROL.sub(_escape, text).replace("\n", "\\n")

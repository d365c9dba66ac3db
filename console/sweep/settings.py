"""What a sweep does: the levels, how many requests each, what each request asks for."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)


@dataclass(frozen=True)
class SweepSettings:
    levels: tuple[int, ...] = DEFAULT_LEVELS
    requests: str | int = "auto"  # "auto": 4*C; "c": exactly C (one wave); or a number; never under min_requests
    min_requests: int | None = None  # "auto" and "c" take at least this many (default 16 and 4): a level's interval
    # narrows with the square root of its requests, and a C=1 level of four requests decides little
    duration_s: float | None = None  # instead of a request count: run each level this long
    warmup: int = 0  # requests per level not counted
    max_tokens: int = 512
    input_tokens: int = 128
    prompt_file: str | None = None  # JSONL with a "prompt" (or "messages") per line
    api: str = "completions"  # or "chat"
    model: str | None = None  # None: ask the server
    api_key_env: str | None = None  # the NAME of an environment variable; the key is never written down
    timeout_s: float = 600.0  # one request, start to end
    idle_timeout_s: float = 60.0  # no byte from the server for this long ends a request with an error
    extra_body: dict[str, Any] = field(default_factory=dict)  # added to every request (min_tokens, logit_bias, …)
    server_wait_s: float = 60.0  # after a failed level: how long to wait for the server to answer again
    seed: int = 0

    def requests_for(self, c: int) -> int:
        if isinstance(self.requests, int):
            return self.requests
        if self.requests == "c":
            return max(c, self.min_requests or 4)
        return max(4 * c, self.min_requests or 16)

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()
                if v is not None and v != {}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSettings:
        """Raises ValueError naming the key when a value is wrong."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown sweep setting (known: {', '.join(cls.__dataclass_fields__)})")
        if "levels" in known:
            levels = known["levels"]
            if not isinstance(levels, (list, tuple)) or not all(_is_int(c) and c >= 1 for c in levels) or not levels:
                raise ValueError(f"levels: expected a list of positive integers, got {levels!r}")
            known["levels"] = tuple(int(c) for c in levels)
        settings = cls(**known)
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.requests not in ("auto", "c") and not (_is_int(self.requests) and int(self.requests) > 0):
            raise ValueError(f"requests: expected 'auto', 'c' or a positive integer, got {self.requests!r}")
        for key in ("max_tokens", "input_tokens"):
            value = getattr(self, key)
            if not _is_int(value) or value < 1:
                raise ValueError(f"{key}: expected a positive integer, got {value!r}")
        if self.min_requests is not None and (not _is_int(self.min_requests) or self.min_requests < 2):
            raise ValueError(f"min_requests: expected an integer of at least 2, got {self.min_requests!r}")
        if not _is_int(self.warmup) or self.warmup < 0:
            raise ValueError(f"warmup: expected a non-negative integer, got {self.warmup!r}")
        for key in ("timeout_s", "idle_timeout_s", "duration_s", "server_wait_s"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0):
                raise ValueError(f"{key}: expected a positive number of seconds, got {value!r}")
        if self.api not in ("completions", "chat"):
            raise ValueError(f"api: expected completions or chat, got {self.api!r}")
        if not isinstance(self.extra_body, dict):
            raise ValueError(f"extra_body: expected a table of request fields, got {self.extra_body!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)

"""What a sweep does: the levels, how many requests each, what each request asks for."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)


@dataclass(frozen=True)
class SweepSettings:
    levels: tuple[int, ...] = DEFAULT_LEVELS
    requests: str | int = "auto"  # "auto": max(4*C, 16); "c": exactly C (at least 4); or a number
    duration_s: float | None = None  # instead of a request count: run each level this long
    warmup: int = 0  # requests per level not counted
    max_tokens: int = 512
    input_tokens: int = 128
    prompt_file: str | None = None  # JSONL with a "prompt" (or "messages") per line
    api: str = "completions"  # or "chat"
    model: str | None = None  # None: ask the server
    api_key_env: str | None = None  # the NAME of an environment variable; the key is never written down
    timeout_s: float = 600.0
    seed: int = 0

    def requests_for(self, c: int) -> int:
        if isinstance(self.requests, int):
            return self.requests
        if self.requests == "c":
            return max(c, 4)
        return max(4 * c, 16)

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSettings:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "levels" in known:
            known["levels"] = tuple(int(c) for c in known["levels"])
        settings = cls(**known)
        settings.validate()
        return settings

    def validate(self) -> None:
        if not self.levels or any(c < 1 for c in self.levels):
            raise ValueError(f"levels must be positive integers, got {list(self.levels)}")
        if self.requests not in ("auto", "c") and not (isinstance(self.requests, int) and self.requests > 0):
            raise ValueError(f"requests must be 'auto', 'c' or a positive number, got {self.requests!r}")
        if self.max_tokens < 1 or self.input_tokens < 1:
            raise ValueError("max_tokens and input_tokens must be positive")
        if self.api not in ("completions", "chat"):
            raise ValueError(f"api must be completions or chat, got {self.api!r}")

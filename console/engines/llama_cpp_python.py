"""llama-cpp-python's server, as read in its 0.3.36 sdist (see ../shared/ENGINES.md).

It has no health route, and its /v1/models waits for the model's lock (and, with interrupt_requests, cuts the stream
holding it), so FastAPI's /openapi.json, served only once the model is loaded, stands in for it; the model it serves
is read from its command line instead. It ignores ignore_eos and stream_options."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from console.engines.base import Engine, FlagValue, register

OFF = ("0", "off", "f", "false", "n", "no")  # what its settings read as False (pydantic's bool)


@register
class LlamaCppPython(Engine):
    kind = "llama-cpp-python"
    title = "llama-cpp-python"
    model_arg = "--model"
    health = ("/openapi.json",)
    include_usage = False
    source = (
        "llama-cpp-python 0.3.36: llama_cpp/server/settings.py (--model, interrupt_requests), app.py (routes, "
        "locks), types.py (no ignore_eos or stream_options: ignored)"
    )

    def launch_warning(self, flags: Mapping[str, FlagValue], help_text: str) -> str | None:
        """It ends a stream as soon as another request waits (interrupt_requests, True by default:
        llama_cpp/server/settings.py, app.py get_event_publisher): at C >= 2 most requests would end early."""
        if "--interrupt_requests" not in help_text:
            return None
        value = flags.get("interrupt_requests")
        if isinstance(value, str) and value.strip().lower() in OFF:
            return None
        return (
            "this server ends each stream when the next request arrives unless told not to: "
            'set interrupt_requests = "False" in the profile\'s [flags] to measure concurrency'
        )

    async def served_model(self, argv: Sequence[str], get: Callable[[str], Awaitable[bytes]]) -> str | None:
        flag = next((a for a in ("--model", "-m") if a in argv[:-1]), None)
        return argv[list(argv).index(flag) + 1] if flag else None

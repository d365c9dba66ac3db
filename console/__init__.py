"""pivot: a terminal console for running and benchmarking LLM inference servers over SSH."""

from functools import cache


@cache
def version() -> str:
    """The installed version (read when asked: importlib.metadata costs every command ~25 ms at start)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pivot-console")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+src"

"""pivot: a terminal console for running and benchmarking LLM inference servers over SSH."""

import warnings
from functools import cache

# asyncssh (2.24) names DSA's key types at import; cryptography 51 warns of DSA's removal at each such name, on the
# operator's screen, before every command that opens SSH: news of cryptography's future, not of the host reached.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")


@cache
def version() -> str:
    """The installed version (read when asked: importlib.metadata costs every command ~25 ms at start)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pivot-console")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+src"

"""pivot: a terminal console for running and benchmarking LLM inference servers over SSH."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pivot-console")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+src"

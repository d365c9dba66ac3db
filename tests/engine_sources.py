"""The engines' own code, from their published wheels, for the contract tests: never installed, only read.

`pip download --no-deps` fetches sglang 0.5.23 and vllm 0.33.0 once into a cache
($PIVOT_ENGINE_WHEELS, default ~/.cache/pivot/engine-wheels); the functions pivot's configs must pass are
loaded from the wheels' source. Their heavy imports (torch, the server's runtime) are replaced by stubs that
only carry what those functions touch, and single functions are lifted out of large modules by their syntax
tree, so what runs is the engine's own code. Where the download fails: the tests fail in CI (CI is set) and
are skipped, with the reason, elsewhere.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

import pytest

WHEELS = {"sglang": "0.5.23", "vllm": "0.33.0"}


def cache_dir() -> Path:
    return Path(os.environ.get("PIVOT_ENGINE_WHEELS") or Path.home() / ".cache" / "pivot" / "engine-wheels")


@functools.cache
def wheel(name: str) -> zipfile.ZipFile:
    version = WHEELS[name]
    directory = cache_dir()
    found = sorted(directory.glob(f"{name}-{version}-*.whl")) if directory.is_dir() else []
    if not found:
        directory.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(directory), f"{name}=={version}"],
            capture_output=True,
            text=True,
            timeout=900,
        )
        found = sorted(directory.glob(f"{name}-{version}-*.whl"))
        if result.returncode != 0 or not found:
            why = f"cannot download {name}=={version}: {(result.stderr.strip().splitlines() or ['?'])[-1]}"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
    return zipfile.ZipFile(found[-1])


def source(name: str, path: str) -> str:
    return wheel(name).read(path).decode()


def _stub(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []  # a package, so that submodules can be stubbed under it
    module.__dict__.update(attrs)
    return module


def load_module(name: str, path: str, module_name: str, stubs: dict[str, dict[str, Any]]) -> types.ModuleType:
    """A module of the wheel, executed with `stubs` (module name -> attributes) standing in for its imports."""
    saved = {k: sys.modules.get(k) for k in stubs}
    try:
        for stub_name, attrs in stubs.items():
            sys.modules[stub_name] = _stub(stub_name, **attrs)
        spec = importlib.util.spec_from_loader(module_name, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        exec(compile(source(name, path), f"{name}-{WHEELS[name]}/{path}", "exec"), module.__dict__)
        return module
    finally:
        for stub_name, before in saved.items():
            if before is None:
                sys.modules.pop(stub_name, None)
            else:
                sys.modules[stub_name] = before


def load_function(name: str, path: str, function: str, namespace: dict[str, Any]) -> Any:
    """One top-level function of a wheel's module, lifted out by its syntax tree and run against `namespace`."""
    tree = ast.parse(source(name, path))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    code = compile(ast.Module(body=[node], type_ignores=[]), f"{name}-{WHEELS[name]}/{path}", "exec")
    scope = dict(namespace)
    exec(code, scope)
    return scope[function]


class _Algorithm:
    def __init__(self, name: str):
        self.name = name

    @classmethod
    def from_string(cls, name: str) -> _Algorithm:
        return cls(name)

    def get_platform_worker_cls(self) -> None:  # the built-in worker: what a CUDA host runs
        return None


@functools.cache
def sglang_adaptive() -> types.ModuleType:
    """sglang/srt/speculative/adaptive_spec_params.py: the loader, the tier routing, adaptive_unsupported_reason."""
    return load_module(
        "sglang",
        "sglang/srt/speculative/adaptive_spec_params.py",
        "sglang.srt.speculative.adaptive_spec_params",
        {
            "sglang": {},
            "sglang.srt": {},
            "sglang.srt.arg_groups": {},
            "sglang.srt.arg_groups.overrides": {"resolved_view": lambda a: a, "resolving_view": lambda a: a},
            "sglang.srt.runtime_context": {"attn_dp_enabled_of": lambda cfg: cfg.attn_dp},
            "sglang.srt.speculative": {},
            "sglang.srt.speculative.spec_info": {"SpeculativeAlgorithm": _Algorithm},
            "sglang.srt.utils": {"log_info_on_rank0": lambda logger, message: None},
        },
    )


@functools.cache
def sglang_capture_sizes() -> Any:
    """`generate_decode_cuda_graph_batch_sizes(server_args, max_bs)` from cuda_graph_hook.py."""
    return load_function(
        "sglang",
        "sglang/srt/arg_groups/cuda_graph_hook.py",
        "generate_decode_cuda_graph_batch_sizes",
        {"resolving_view": lambda a: a, "Any": Any},
    )


def sglang_init_adaptive() -> Any:
    """`_init_adaptive_speculative_params(server_args)` from speculative_hook.py: the check of the step count
    against the config's candidate steps, with SGLang's adaptive module importable as it is inside the server."""
    module = sglang_adaptive()

    def declare_resolution(server_args: Any, _where: str, **values: Any) -> None:
        for key, value in values.items():
            setattr(server_args, key, value)

    function = load_function(
        "sglang",
        "sglang/srt/arg_groups/speculative_hook.py",
        "_init_adaptive_speculative_params",
        {"resolving_view": lambda a: a, "declare_resolution": declare_resolution},
    )

    def run(server_args: Any) -> None:
        saved = sys.modules.get("sglang.srt.speculative.adaptive_spec_params")
        sys.modules["sglang.srt.speculative.adaptive_spec_params"] = module
        try:
            function(server_args)
        finally:
            if saved is None:
                sys.modules.pop("sglang.srt.speculative.adaptive_spec_params", None)
            else:
                sys.modules["sglang.srt.speculative.adaptive_spec_params"] = saved

    return run


@functools.cache
def vllm_dynamic() -> types.ModuleType:
    """vllm/v1/spec_decode/dynamic/utils.py: validate_and_normalize_dynamic_sd_schedule, build_dynamic_sd_schedule_lookup."""
    return load_module("vllm", "vllm/v1/spec_decode/dynamic/utils.py", "vllm.v1.spec_decode.dynamic.utils", {})


def _dataclass_flags(tree: ast.Module, classes: set[str]) -> set[str]:
    flags = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in classes:
            flags |= {
                "--" + st.target.id.replace("_", "-")
                for st in node.body
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and not st.target.id.startswith("_")
            }
    return flags


def _literal_flags(tree: ast.Module) -> set[str]:
    """Option strings passed literally to add_argument."""
    return {
        a.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "add_argument"
        for a in n.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
    }


@functools.cache
def sglang_flags() -> frozenset[str]:
    """Every option string of SGLang 0.5.23's server: the annotated fields of arg_groups/fields/*.py (`--field-name`,
    or the Arg's cli_name, and its aliases; no_cli fields left out) and server_args.py's own add_argument calls."""
    flags: set[str] = set()
    archive = wheel("sglang")
    for path in [n for n in archive.namelist() if n.startswith("sglang/srt/arg_groups/fields/") and n.endswith(".py")]:
        for node in ast.walk(ast.parse(source("sglang", path))):
            if not isinstance(node, ast.ClassDef):
                continue
            for st in node.body:
                if not (
                    isinstance(st, ast.AnnAssign)
                    and isinstance(st.target, ast.Name)
                    and isinstance(st.annotation, ast.Subscript)
                    and getattr(st.annotation.value, "id", None) == "A"
                ):
                    continue
                parts = st.annotation.slice.elts if isinstance(st.annotation.slice, ast.Tuple) else [st.annotation.slice]
                meta = parts[1] if len(parts) > 1 else None
                if meta is None:
                    continue
                name, aliases, no_cli = "--" + st.target.id.replace("_", "-"), [], False
                if isinstance(meta, ast.Call):
                    for kw in meta.keywords:
                        if kw.arg == "cli_name":
                            name = ast.literal_eval(kw.value)
                        elif kw.arg == "aliases":
                            aliases = ast.literal_eval(kw.value)
                        elif kw.arg == "no_cli":
                            no_cli = ast.literal_eval(kw.value)
                if not no_cli:
                    flags |= {name, *aliases}
    return frozenset(flags | _literal_flags(ast.parse(source("sglang", "sglang/srt/server_args.py"))))


@functools.cache
def vllm_flags() -> frozenset[str]:
    """Every option string of `vllm serve` 0.33.0: EngineArgs' and the frontend's fields, and literal add_argument calls."""
    engine = ast.parse(source("vllm", "vllm/engine/arg_utils.py"))
    frontend = ast.parse(source("vllm", "vllm/entrypoints/common/cli_args.py"))
    return frozenset(
        _dataclass_flags(engine, {"EngineArgs", "AsyncEngineArgs"})
        | _literal_flags(engine)
        | _dataclass_flags(frontend, {"BaseFrontendArgs", "FrontendArgs"})
        | _literal_flags(frontend)
    )

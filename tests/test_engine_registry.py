"""The engine registry (console/engines/): every kind states its facts with their source, the engines that span
nodes say how, and an engine added as one module is known to profiles, drafting, adaptive schedules and the load
generator's zipapp without another file changing."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from console.engines import ENGINES, HEALTH_PATH, KINDS, MULTINODE, POSITIONAL, Engine, engine


@pytest.mark.parametrize("kind", KINDS)
def test_every_engine_states_its_facts_and_where_they_were_read(kind: str) -> None:
    found = ENGINES[kind]
    assert found.kind == kind and found.title and found.source
    assert found.health and all(HEALTH_PATH.fullmatch(path) for path in found.health)
    assert found.model_arg == POSITIONAL or found.model_arg.startswith("--")
    assert not (found.ignore_eos and found.ends_early)  # a server that honours ignore_eos runs a request to max_tokens
    if found.adaptive_file:
        assert found.adaptive_flag, "a schedule in a file is passed by a flag"


@pytest.mark.parametrize("kind", MULTINODE)
def test_every_engine_that_spans_nodes_says_its_flags_and_its_rank_shell(kind: str) -> None:
    found = ENGINES[kind]
    assert found.rank_shell and "$SLURM_NODEID" in found.rank_shell
    written = {**found.node_flags(2, 0, "10.0.0.1", 5000), **found.node_flags(2, 1, "10.0.0.1", 5000)}
    assert set(written) <= set(found.rank_flags)


def test_a_kind_pivot_does_not_know_is_taken_for_any_openai_compatible_server() -> None:
    assert engine("mlc-from-a-newer-pivot").health == ("/v1/models",) and engine(None) is engine("openai")
    assert isinstance(engine("sglang"), Engine) and engine("sglang").title == "SGLang"


NEW_ENGINE = '''
"""A made-up engine: drafts with --draft-tokens N, reads its adaptive schedule from a file named by --draft-schedule."""
from console.engines.base import Drafting, Engine, Measured, Schedule, register
from console.engines.flags import as_int, parse_flags


@register
class Made(Engine):
    kind = "made"
    title = "Made-up"
    model_arg = "--weights"
    health = ("/alive",)
    source = "this test"
    adaptive_file = True
    adaptive_flag = "--draft-schedule"

    def drafting(self, argv, env=None):
        tokens = as_int(parse_flags(argv).get("draft-tokens"))
        return Drafting(self.kind, "made", tokens) if tokens else None

    def adaptive_warning(self, argv):
        return "Made-up drafts only alone" if "--draft-schedule" in argv and "--batch" in argv else None

    def schedule(self, measured: Measured) -> Schedule:
        return Schedule(measured.cut, measured.cut + 1, {"upto": measured.cut, "tokens": measured.found.steps})

    def adaptive_flags(self, profile_flags, schedule, config_path):
        return {"draft-schedule": config_path or ""}, ["draft-tokens"]
'''

CHECK = """
from pathlib import Path
import io, sys, zipfile
from console.engines import KINDS, Measured
from console.server.profiles import load_profiles
from console.sweep.adaptive import AdaptivePlan
from console.zipapp import loadgen_zip

assert "made" in KINDS, KINDS
profile = load_profiles(Path(sys.argv[1])).get("m")
assert profile.argv()[:3] == ["made-serve", "--weights", "/w"], profile.argv()
found = profile.drafting
assert (found.engine, found.steps) == ("made", 4), found
print(profile.engine.adaptive_warning([*profile.argv(), "--draft-schedule", "x", "--batch"]))
schedule = profile.engine.schedule(Measured("m", "base", profile.argv(), found, 8, [1, 8, 16], None, None))
plan = AdaptivePlan("m-adaptive", Path("m-adaptive.toml"), profile, schedule, {1: True, 8: True, 16: False}, ("b", "s"))
print(plan.summary())
print(plan.profile_data("/work/adaptive/m.json"))
print("made.py" in str(zipfile.ZipFile(io.BytesIO(loadgen_zip()[1])).namelist()))
"""


def test_an_engine_added_as_one_module_is_known_to_profiles_drafting_schedules_and_the_zipapp(tmp_path: Path) -> None:
    console = Path(__file__).parent.parent / "console"
    shutil.copytree(console, tmp_path / "console", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "console" / "engines" / "made.py").write_text(NEW_ENGINE)  # the one file
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "m.toml").write_text('kind = "made"\nlauncher = "made-serve"\nmodel_path = "/w"\n[flags]\ndraft-tokens = 4\n')
    ran = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHECK), str(profiles)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "Made-up drafts only alone",
        "m-adaptive: extends m, drafting for running batches up to 8 (measured C ≤ 8), off from 9",
        "{'description': 'm with drafting for running batches up to 8 (measured C ≤ 8), off from 9, from pivot compare', "
        "'extends': 'm', 'measured_from': ['b', 's'], 'unset': ['draft-tokens'], 'flags': {'draft-schedule': '/work/adaptive/m.json'}}",
        "True",
    ]

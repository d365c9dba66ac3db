"""Item 4: `pivot profiles show` prints what a shell on the host runs as is: `env KEY=VALUE … argv`, each word quoted,
a leading ~/ left to the shell, control characters written out in ANSI-C quotes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from console.server.profiles import load_profiles
from tests.faults.conftest import run_pivot

SHOW_ARGV = f"#!{sys.executable}\nimport json, os, sys\nprint(json.dumps([sys.argv[1:], os.environ.get('EVILENV')]))\n"


def test_profiles_show_prints_a_line_a_shell_runs_as_is(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "serve").write_text(SHOW_ARGV)
    (home / "bin" / "serve").chmod(0o755)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    evil = "x; touch pwned \x1b]0;title\x07 it's"
    (profiles / "p.toml").write_text(
        'launcher = "~/bin/serve --verbose"\nmodel_path = "~/models/a model"\n'
        f'[env]\nEVILENV = {json.dumps(evil)}\nNCCL_DEBUG = "WARN"\n[flags]\ntp = 8\nname = "$(id) `id`"\n'
    )
    config = tmp_path / "pivot.toml"
    config.write_text(f'campaign_dir = "campaign"\nprofiles_dir = {json.dumps(str(profiles))}\n')
    shown = run_pivot(config, "profiles", "show", "p")
    assert shown.returncode == 0, shown.stderr
    line = shown.stdout.splitlines()[-1]  # after the comment lines: the file, the engine
    assert line.startswith("env $'EVILENV=") and "\x1b" not in shown.stdout
    # pasted into a shell on the host: the launcher runs, with exactly the profile's environment and arguments
    ran = subprocess.run(
        ["bash", "-c", line], capture_output=True, text=True, cwd=tmp_path, env={"HOME": str(home), "PATH": os.environ["PATH"]}, timeout=30
    )
    assert ran.returncode == 0, ran.stderr
    argv, env_value = json.loads(ran.stdout)
    profile = load_profiles(profiles).get("p")
    assert argv == [f"{home}/{a[2:]}" if a.startswith("~/") else a for a in profile.argv()[1:]]
    assert env_value == evil and not (tmp_path / "pwned").exists()

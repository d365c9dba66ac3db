"""The headless commands, run as the operator runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import HostProcess, free_port


def pivot(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, input=input, timeout=60)


def test_demo_serve_prints_an_ssh_line_and_a_config_line(sim_host_process: HostProcess) -> None:
    assert sim_host_process.ssh.startswith("ssh -i ")
    assert "UserKnownHostsFile=" in sim_host_process.ssh
    assert 'default_host = "demo"' in sim_host_process.config_path.read_text()


def test_ping_reaches_the_demo_host(sim_host_process: HostProcess) -> None:
    result = pivot("--config", str(sim_host_process.config_path), "ping")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("demo: up, rtt ") and "Linux" in result.stdout


def test_trust_pins_the_key_only_after_confirmation(sim_host_process: HostProcess, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    config = tmp_path / "pivot.toml"
    config.write_text(sim_host_process.config_path.read_text().replace(str(sim_host_process.root / "known_hosts"), str(known)))
    known.write_text("")

    refused = pivot("--config", str(config), "ping")
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("pivot: demo: host key of 127.0.0.1:")
    assert "pivot trust demo" in refused.stderr and "Traceback" not in refused.stderr

    declined = pivot("--config", str(config), "trust", "demo", input="no\n")
    assert declined.returncode == 1 and "SHA256:" in declined.stdout and known.read_text() == ""

    accepted = pivot("--config", str(config), "trust", "demo", input="yes\n")
    assert accepted.returncode == 0 and "added to" in accepted.stdout
    assert known.read_text().startswith("[127.0.0.1]:")
    assert pivot("--config", str(config), "ping").returncode == 0
    assert "already trusted" in pivot("--config", str(config), "trust", "demo").stdout


def test_a_bad_config_is_one_line_without_a_traceback(tmp_path: Path) -> None:
    config = tmp_path / "pivot.toml"
    config.write_text("[hosts.gpu1]\nport = 'twenty-two'\n")
    result = pivot("--config", str(config), "config", "validate")
    assert result.returncode == 2
    assert result.stderr == f"pivot: {config}: hosts.gpu1.port: expected an integer, got 'twenty-two'\n"


def test_unknown_host_name_is_one_line(sim_host_process: HostProcess) -> None:
    result = pivot("--config", str(sim_host_process.config_path), "ping", "gpu9")
    assert result.returncode == 2 and result.stderr == "pivot: gpu9: unknown host 'gpu9' (configured: demo)\n"


def test_without_a_host_a_command_says_how_to_name_one(tmp_path: Path, sim_host_process: HostProcess) -> None:
    (tmp_path / "pivot.toml").write_text('[hosts.a]\nssh = "a"\n[hosts.b]\nssh = "b"\n')
    unnamed = pivot("--config", str(tmp_path / "pivot.toml"), "gpus")
    assert unnamed.returncode == 2
    where = tmp_path / "pivot.toml"
    assert unnamed.stderr == f'pivot: no host given: pass --host NAME (in {where}: a, b), or set default_host = "NAME" there\n'
    # --host and --config read the same after the command as before it
    named = pivot("gpus", "--config", str(sim_host_process.config_path), "--host", "demo", "--json")
    assert named.returncode == 0, named.stderr
    assert '"gpus"' in named.stdout


def test_config_show_prints_toml_that_reads_back_the_same(tmp_path: Path) -> None:
    import tomllib

    (tmp_path / "pivot.toml").write_text('theme = "pivot-light"\n[hosts.a]\nssh = "a"\ncleanup = ["x", "y"]\n[sweep]\nlevels = [1, 2]\n')
    shown = pivot("--config", str(tmp_path / "pivot.toml"), "config", "show")
    assert shown.returncode == 0, shown.stderr
    data = tomllib.loads(shown.stdout)  # no None, no Python reprs
    assert data["theme"] == "pivot-light" and "default_host" not in data and data["kill_grace_s"] == 5.0
    assert data["hosts"]["a"]["cleanup"] == ["x", "y"] and data["sweep"]["levels"] == [1, 2]
    assert data["sweep"]["max_tokens"] == 512  # every setting as it applies, the defaults too
    (tmp_path / "again.toml").write_text(shown.stdout)
    assert pivot("--config", str(tmp_path / "again.toml"), "config", "show").stdout.split("\n", 1)[1] == shown.stdout.split("\n", 1)[1]


def test_gpus_json_says_a_failure_in_json_too(tmp_path: Path) -> None:
    import json

    (tmp_path / "pivot.toml").write_text('[hosts.gone]\nhostname = "no-such-host.invalid"\n')
    result = pivot("--config", str(tmp_path / "pivot.toml"), "gpus", "--json")
    assert result.returncode == 2
    error = json.loads(result.stdout)
    assert error["type"] == "error" and error["host"] == "gone" and "cannot resolve" in error["message"]
    assert result.stderr.startswith("pivot: gone: cannot resolve")


def test_an_event_kind_is_one_pivot_writes() -> None:
    """`pivot events --kind` takes the kinds console/events.py writes, and refuses a typo in one line."""
    from console.cli.parser import EVENT_KINDS
    from console.events import Event

    assert set(EVENT_KINDS) == {cls.kind for cls in Event.__subclasses__()}
    typo = subprocess.run([sys.executable, "-m", "console", "events", "--kind", "kil"], capture_output=True, text=True, timeout=60)
    assert typo.returncode == 2 and "argument --kind: invalid choice: 'kil'" in typo.stderr


def test_server_switch_says_what_it_stopped(sim_host_process: HostProcess) -> None:
    local = sim_host_process.config_path.parent / "profiles"  # the demo's profiles on free ports, beside its pivot.toml
    local.mkdir(exist_ok=True)
    for name in ("baseline", "eagle3"):
        (local / f"t-{name}.toml").write_text(f'extends = "demo-{name}"\nport = {free_port()}\n', encoding="utf-8")
    pivot = [sys.executable, "-m", "console", "--config", str(sim_host_process.config_path), "server"]
    started = subprocess.run([*pivot, "start", "t-baseline"], capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stdout + started.stderr
    switched = subprocess.run([*pivot, "switch", "t-eagle3"], capture_output=True, text=True, timeout=300)
    assert switched.returncode == 0, switched.stdout + switched.stderr
    stopped = next(line for line in switched.stdout.splitlines() if line.startswith("stopped "))
    assert stopped.startswith("stopped t-baseline (pid ") and "started t-eagle3" in switched.stdout


def test_every_option_and_argument_says_what_it_is() -> None:
    import argparse

    from console.cli.parser import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    silent = [
        f"{name} {a.dest}"
        for name, sub in {"pivot": parser, **commands}.items()
        for a in sub._actions
        if not a.help and not isinstance(a, argparse._SubParsersAction)
    ]
    assert silent == []

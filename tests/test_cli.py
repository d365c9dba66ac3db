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
    from console.cli.types import EVENT_KINDS
    from console.events import Event

    assert set(EVENT_KINDS) == {cls.kind for cls in Event.__subclasses__()}
    typo = subprocess.run([sys.executable, "-m", "console", "events", "--kind", "kil"], capture_output=True, text=True, timeout=60)
    assert typo.returncode == 2 and "Invalid value for '--kind': 'kil' is not one of 'kill'" in typo.stderr


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
    """An option's help is its own; an argument's is in its command's text (click gives arguments none)."""
    import click

    from console.cli.commands import pivot

    commands = {"pivot": pivot, **pivot.commands}
    silent = [
        f"{name} {param.name}"
        for name, command in commands.items()
        for param in command.get_params(click.Context(command))  # (`pivot sweep`'s settings are made here)
        if (isinstance(param, click.Option) and not param.help and not param.hidden)
        or (isinstance(param, click.Argument) and f"{param.human_readable_name.strip('[]…')}:" not in (command.help or ""))
    ]
    assert silent == []


def test_every_sweep_setting_is_a_flag_and_a_bad_value_names_the_flag(tmp_path: Path) -> None:
    """`pivot sweep --help` lists every [sweep] key as a flag, from the settings' own declarations; a wrong value is
    refused before anything is measured, in one line naming the flag and the value."""
    from console.settings import documented

    shown = pivot("sweep", "--help")
    assert shown.returncode == 0
    assert [d.key for d in documented() if f"--{d.key.replace('_', '-')}" not in shown.stdout] == []
    levels = pivot("sweep", "--levels", "0,abc")
    assert levels.returncode == 2 and "Invalid value for '--levels': '0,abc': '0' is not a positive whole number" in levels.stderr
    (tmp_path / "pivot.toml").write_text("[sweep]\nmax_tokens = 64\n")
    zero = pivot("--config", str(tmp_path / "pivot.toml"), "sweep", "--url", "http://127.0.0.1:9", "--max-tokens", "0")
    assert zero.returncode == 2 and zero.stderr == "pivot: --max-tokens: expected a positive integer, got 0\n"


def test_the_shell_completes_commands_and_choices() -> None:
    import os

    def complete(words: str) -> list[str]:
        env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1), "_PIVOT_COMPLETE": "bash_complete"}
        ran = subprocess.run([sys.executable, "-m", "console"], capture_output=True, text=True, env=env, timeout=60)
        return [line.split(",", 1)[1] for line in ran.stdout.splitlines()]

    assert complete("pivot sw") == ["sweep"]
    assert sorted(complete("pivot server sta")) == ["start", "status"]

from __future__ import annotations

from pathlib import Path

import pytest

from console import config
from console.remote.errors import UnknownHost

EXAMPLE = Path(__file__).parent.parent / "pivot.example.toml"


def _parse(text: str, tmp_path: Path) -> config.Config:
    path = tmp_path / "pivot.toml"
    path.write_text(text)
    return config.load(path)


def test_the_example_config_loads() -> None:
    cfg = config.load(EXAMPLE)
    assert cfg.default_host in cfg.hosts
    gpu = cfg.host()
    assert gpu.role == "gpu" and gpu.python
    assert any(h.role == "hypervisor" and h.cleanup for h in cfg.hosts.values())


def test_a_host_by_alias_and_overrides(tmp_path: Path) -> None:
    cfg = _parse('[hosts.gpu1]\nssh = "gpu1-alias"\nport = 2222\njump = "bastion"\nkeepalive_s = 5\n', tmp_path)
    host = cfg.host()  # the only host is the default
    assert (host.target, host.port, host.jump, host.keepalive_s, host.role) == ("gpu1-alias", 2222, "bastion", 5.0, "gpu")
    assert cfg.campaign_dir == tmp_path / "campaign"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[hosts.a]\nport = 'x'\n", "pivot.toml: hosts.a.port: expected an integer, got 'x'"),
        ("[hosts.a]\nport = 70000\n", "pivot.toml: hosts.a.port: must be 1-65535, got 70000"),
        ("[hosts.a]\nrole = 'db'\n", "pivot.toml: hosts.a.role: must be one of gpu, hypervisor, slurm, got 'db'"),
        ("[hosts.a]\nhostnme = 'x'\n", "pivot.toml: hosts.a.hostnme: unknown key"),
        ("[hosts.a]\ncleanup = [1]\n", "pivot.toml: hosts.a.cleanup: expected a list of strings (an argv), got [1]"),
        ("default_host = 'b'\n[hosts.a]\n", "pivot.toml: default_host: names no host in [hosts] ('b')"),
        ("colour = 1\n", "pivot.toml: colour: unknown key"),
        ("[hosts.a\n", "pivot.toml: not valid TOML"),
        ("[hosts.a]\njump = 'a'\n", "pivot.toml: hosts.a.jump: a host cannot jump through itself"),
    ],
)
def test_errors_name_the_file_and_key(text: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(config.ConfigError) as info:
        _parse(text, tmp_path)
    assert str(info.value).replace(str(tmp_path) + "/", "").startswith(message)
    assert "\n" not in str(info.value)


def test_search_order_prefers_explicit_then_env_then_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("PIVOT_CONFIG", raising=False)
    assert config.load().path is None
    (tmp_path / "xdg" / "pivot").mkdir(parents=True)
    (tmp_path / "xdg" / "pivot" / "pivot.toml").write_text("[hosts.user]\n")
    assert list(config.load().hosts) == ["user"]
    (tmp_path / "pivot.toml").write_text("[hosts.project]\n")
    assert list(config.load().hosts) == ["project"]
    (tmp_path / "env.toml").write_text("[hosts.env]\n")
    monkeypatch.setenv("PIVOT_CONFIG", str(tmp_path / "env.toml"))
    assert list(config.load().hosts) == ["env"]
    assert list(config.load(tmp_path / "pivot.toml").hosts) == ["project"]


def test_no_default_host_with_several_is_a_clear_error(tmp_path: Path) -> None:
    cfg = _parse("[hosts.a]\n[hosts.b]\n", tmp_path)
    with pytest.raises(UnknownHost, match="no host given"):
        cfg.host()


def test_a_bad_sweep_table_is_one_line_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "pivot.toml"
    path.write_text('[sweep]\nmax_tokens = "eight"\n')
    with pytest.raises(config.ConfigError) as info:
        config.load(path)
    assert str(info.value) == f"{path}: sweep.max_tokens: expected a positive integer, got 'eight'"


COMMANDS = [
    [],
    ["--local"],
    ["config", "validate"],
    ["config", "show"],
    ["gpus"],
    ["kill", "--stray", "--yes"],
    ["server", "status"],
    ["profiles"],
    ["sweep", "--url", "http://127.0.0.1:9"],
    ["runs"],
    ["compare", "a", "b"],
    ["tasks"],
    ["run", "no-such-runbook.toml"],
    ["events"],
    ["ping"],
    ["trust", "gpu1"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "console")
def test_every_command_refuses_a_bad_sweep_table_at_start(command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli import main

    path = tmp_path / "pivot.toml"
    path.write_text('[hosts.gpu1]\nhostname = "gpu1.invalid"\n[sweep]\nlevels = [1, "two"]\n')
    assert main(["--config", str(path), *command]) == 2
    out, err = capsys.readouterr()
    assert err == f"pivot: {path}: sweep.levels: expected a list of positive integers, got [1, 'two']\n" and out == ""


def test_notify_is_a_table_of_two_switches(tmp_path: Path) -> None:
    """[notify]: the bell by default, a desktop notification when asked; a wrong type is one line; what goes out in
    the desktop sequence is printable text only (a server's name cannot end the sequence or start another)."""
    from console.ui.attention import desktop_sequence

    path = tmp_path / "pivot.toml"
    path.write_text("")
    assert config.load(path).notify.bell and not config.load(path).notify.desktop
    path.write_text("[notify]\nbell = false\ndesktop = true\n")
    assert not config.load(path).notify.bell and config.load(path).notify.desktop
    path.write_text('[notify]\ndesktop = "yes"\n')
    with pytest.raises(config.ConfigError, match=r"notify\.desktop: "):
        config.load(path)
    said = desktop_sequence("eagle3\x1b]0;x\x07 crashed", "rank 1;\x9c gone")
    assert said == ("\x1b]777;notify;eagle3 ]0 x  crashed;rank 1   gone\x1b\\" + "\x1b]9;eagle3 ]0 x  crashed: rank 1   gone\x1b\\")

"""Launch profiles: loading, inheritance, quoting, and every error with its message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.remote.command import shell_command
from console.server.profiles import ProfileError, diff, load_profiles

SHIPPED = Path(__file__).parent.parent / "profiles"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def test_shipped_profiles_load_with_the_campaign_flags() -> None:
    profiles = load_profiles(SHIPPED)
    assert not profiles.broken
    base, eagle = profiles.get("baseline"), profiles.get("eagle3")
    assert base.argv() == [
        "~/ml-env/bin/python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/shared/kimi-k2.5-int4",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--tp-size",
        "8",
        "--trust-remote-code",
        "--cuda-graph-max-bs-decode",
        "128",
        "--disable-custom-all-reduce",
        "--attention-backend",
        "flashinfer",
        "--flashinfer-allreduce-fusion-backend",
        "auto",
        "--enable-metrics",
    ]
    assert eagle.argv()[: len(base.argv())] == base.argv()
    assert [k for k, _, _ in diff(base, eagle)] == [
        "speculation",
        "--speculative-algorithm",
        "--speculative-draft-model-path",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
        "--mem-fraction-static",
    ]
    vllm = profiles.get("vllm-baseline")
    assert vllm.argv()[:3] == ["~/vllm-env/bin/vllm", "serve", "/shared/kimi-k2.5-int4"] and vllm.ready_line == "Starting vLLM server on"
    assert "demo-eagle3" not in profiles.names  # a real host is not offered the simulated host's profiles
    demo = load_profiles(SHIPPED, SHIPPED / "demo")
    assert demo.get("demo-eagle3").flags["speculative-draft-model-path"] == "~/models/kimi-k2.5-eagle3"


def test_value_types_become_flags(tmp_path: Path) -> None:
    write(
        tmp_path,
        "p",
        'launcher = ["serve"]\nmodel_path = "/m"\n[env]\nA = "1 2"\n[flags]\non = true\noff = false\n'
        'n = 3\nx = 0.5\ns = "a b"\nrepeat = ["x", 2]\n',
    )
    p = load_profiles(tmp_path).get("p")
    assert p.argv()[5:] == ["--port", "30000", "--on", "--n", "3", "--x", "0.5", "--s", "a b", "--repeat", "x", "--repeat", "2"]
    assert p.command_line().startswith("env 'A=1 2' serve --model-path /m")


def test_false_leaves_a_flag_out_and_says_so_while_the_string_false_passes(tmp_path: Path) -> None:
    write(tmp_path, "a", 'launcher = "llama-server"\nmodel_path = "/m"\n[flags]\ninterrupt_requests = false\n')
    write(tmp_path, "b", 'launcher = "llama-server"\nmodel_path = "/m"\n[flags]\ninterrupt_requests = "False"\n')
    profiles = load_profiles(tmp_path)
    a, b = profiles.get("a"), profiles.get("b")
    assert "--interrupt_requests" not in a.argv() and a.left_out == ["--interrupt_requests"]
    assert b.argv()[-2:] == ["--interrupt_requests", "False"] and b.left_out == []
    assert diff(a, b) == [("--interrupt_requests", "(left out)", "False")]
    (tmp_path / "pivot.toml").write_text(f'profiles_dir = "{tmp_path}"\n')
    shown = subprocess.run(
        [sys.executable, "-m", "console", "--config", str(tmp_path / "pivot.toml"), "profiles", "show", "a"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert '# left out (false): --interrupt_requests; write "False" to pass the word' in shown.stdout, shown.stderr


def test_unset_removes_an_inherited_flag(tmp_path: Path) -> None:
    write(tmp_path, "base", 'launcher = "serve"\nmodel_path = "/m"\n[flags]\na = 1\nb = 2\n')
    write(tmp_path, "child", 'extends = "base"\nunset = ["a"]\n[flags]\nc = 3\n')
    assert dict(load_profiles(tmp_path).get("child").flags) == {"b": 2, "c": 3}


@pytest.mark.parametrize(
    ("files", "broken", "message"),
    [
        ({"p": 'launcher = "s"\nmodel_path = "/m"\nflavour = 1\n'}, "p", "p.toml: flavour: unknown key"),
        ({"p": 'launcher = "s"\nmodel_path = "/m"\nport = "80"\n'}, "p", "p.toml: port: expected an integer, got '80'"),
        ({"p": 'launcher = "s"\nmodel_path = "/m"\nport = 0\n'}, "p", "p.toml: port: must be 1-65535, got 0"),
        ({"p": 'launcher = "s"\n'}, "p", "p.toml: model_path: missing: the path of the model on the host"),
        ({"p": 'model_path = "/m"\n'}, "p", "p.toml: launcher: missing"),
        (
            {"p": 'launcher = "s"\nmodel_path = "/m"\nkind = "mlc"\n'},
            "p",
            "p.toml: kind: must be one of sglang, llama-cpp-python, llamacpp, openai, tgi, trtllm, vllm, got 'mlc'",
        ),
        (
            {"p": 'launcher = "s"\nmodel_path = "/m"\n[flags]\n"--tp" = 8\n'},
            "p",
            "p.toml: flags.--tp: write the flag without its leading dashes",
        ),
        (
            {"p": 'launcher = "s"\nmodel_path = "/m"\n[flags]\ntp = {a = 1}\n'},
            "p",
            "p.toml: flags.tp: expected a boolean, number, string or list of those, got {'a': 1}",
        ),
        ({"p": 'launcher = "s"\nmodel_path = "/m"\n[env]\nA = 1\n'}, "p", "p.toml: env.A: expected a string, got 1"),
        ({"a": 'extends = "b"\n', "b": 'extends = "a"\n'}, "a", "a.toml: extends: cycle: a -> b -> a"),
        ({"a": 'extends = "nope"\n'}, "a", "a.toml: extends: no profile named 'nope'"),
        ({"a": 'launcher = "s"\nmodel_path = "/m"\n', "b": 'extends = "a"\nunset = ["x"]\n'}, "b", "b.toml: unset: 'x' is not set by 'a'"),
        ({"p": 'launcher = "s\n'}, "p", "p.toml: not valid TOML"),
    ],
)
def test_a_broken_profile_is_reported_with_file_key_and_problem(files: dict[str, str], broken: str, message: str, tmp_path: Path) -> None:
    for name, text in files.items():
        write(tmp_path, name, text)
    profiles = load_profiles(tmp_path)
    assert broken in profiles.broken and broken not in profiles.profiles  # never half-loaded
    assert str(profiles.broken[broken]).replace(f"{tmp_path}/", "").startswith(message)
    with pytest.raises(ProfileError):
        profiles.get(broken)


def test_an_unknown_profile_name_lists_the_known_ones() -> None:
    with pytest.raises(ProfileError, match=r"no profile named 'eagle4'.*baseline"):
        load_profiles(SHIPPED).get("eagle4")


def toml_string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, except that TOML also wants DEL escaped."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


values = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=40)


@settings(max_examples=150, deadline=None)
@given(value=values, model=values.filter(bool))
def test_any_string_value_arrives_as_exactly_one_argument(tmp_path_factory: pytest.TempPathFactory, value: str, model: str) -> None:
    directory = tmp_path_factory.mktemp("p")
    text = f'launcher = ["printf", "<%s>"]\nmodel_path = {toml_string(model)}\n[flags]\nvalue = {toml_string(value)}\n'
    (directory / "p.toml").write_text(text, encoding="utf-8")
    profile = load_profiles(directory).get("p")
    out = subprocess.run(["/bin/sh", "-c", shell_command(profile.argv())], capture_output=True, check=True).stdout.decode()
    assert out == "".join(f"<{a}>" for a in profile.argv()[2:])
    assert f"<{value}>" in out and f"<{model}>" in out


def test_the_profile_list_through_a_pipe_lists_every_shipped_profile_with_no_padding_at_line_ends(tmp_path: Path) -> None:
    """What CI's wheel check does (`pivot profiles | tee`): a table whose last column is padded with long runs of spaces
    once made the line trimming backtrack without end."""
    (tmp_path / "pivot.toml").write_text("")
    listed = subprocess.run(
        [sys.executable, "-m", "console", "--config", str(tmp_path / "pivot.toml"), "profiles"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert {path.stem for path in SHIPPED.glob("*.toml")} <= {line.split(" ")[0] for line in lines}
    assert not [line for line in lines if line != line.rstrip()]


def test_the_demos_profiles_are_offered_only_with_a_simulated_host(tmp_path: Path) -> None:
    """A console on a real host does not list the simulated host's profiles; the pivot.toml `pivot demo` writes does."""
    from console.config import parse

    real = parse(tmp_path / "pivot.toml", "")
    assert "demo-baseline" not in load_profiles(*real.profile_dirs).names
    demo = parse(tmp_path / "pivot.toml", "simulated = true\n")
    assert "demo-baseline" in load_profiles(*demo.profile_dirs).names

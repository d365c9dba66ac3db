"""A real engine on a real host (issue 20): llama.cpp's llama-server, built from its PyPI sdist (tests/real/build.py),
on OpenSSH's sshd, for a user whose home is new and empty. What the host gets beforehand is only what an operator
installs by hand: the server binary and a model, readable by everyone. pivot's workdir, its agent and everything else
are pivot's to create. Run by .ci/run (which builds llama-server first, or finds the build in ~/.cache/pivot); elsewhere
skipped, with the reason, where sshd or root (to add the user) is missing."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.test_openssh import SSHD, start_sshd

MODEL = "gemma-3-270m-q4_k_m.gguf"


def _why_not() -> str | None:
    if SSHD is None:
        return "OpenSSH sshd is not installed (CI installs openssh-server)"
    if os.geteuid() != 0 or not shutil.which("useradd"):
        return "adding a user whose home is new and empty needs root and useradd"
    if not os.environ.get("CI") and not os.environ.get("PIVOT_REAL"):
        return "the real-engine suite runs in CI, or with PIVOT_REAL=1 (it builds llama-server once: ~10 minutes)"
    return None


@dataclass
class RealHost:
    config: Path  # pivot.toml on the console's side
    home: Path  # the host user's home: empty at the start
    user: str
    opt: Path  # where the operator installed llama-server and the model


@pytest.fixture(scope="session")
def real_host() -> Iterator[RealHost]:
    if (why := _why_not()) is not None:
        pytest.skip(why)
    from tests.real.build import llama_server, model

    binary, gguf = llama_server(), model()
    root = Path(tempfile.mkdtemp(prefix="pivot-real-"))
    root.chmod(0o755)  # the host user reads the sshd's authorized keys and the installed server below it
    opt = root / "opt"
    opt.mkdir(mode=0o755)
    shutil.copy2(binary, opt / "llama-server")
    shutil.copy2(gguf, opt / MODEL)
    (opt / MODEL).chmod(0o644)
    user = f"pivotreal{os.getpid() % 100000}"
    home = root / "home"
    # a password of "*": no password login, yet not locked ("!"), which sshd refuses even for keys
    subprocess.run(["useradd", "--no-create-home", "--home-dir", str(home), "--shell", "/bin/sh", "--password", "*", user], check=True)
    home.mkdir(mode=0o700)
    shutil.chown(home, user, user)
    sshd = start_sshd(root / "sshd")
    (root / "sshd" / "authorized_keys").chmod(0o644)
    (root / "sshd").chmod(0o755)
    campaign = root / "campaign"
    config = root / "console" / "pivot.toml"
    config.parent.mkdir()
    python = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"  # the host's own python, not ours
    config.write_text(
        f'default_host = "cpu1"\ncampaign_dir = {json.dumps(str(campaign))}\n\n[hosts.cpu1]\nhostname = "127.0.0.1"\n'
        f'port = {sshd.port}\nuser = "{user}"\nidentity = {json.dumps(sshd.spec.identity)}\n'
        f'known_hosts = {json.dumps(sshd.spec.known_hosts)}\npython = "{python}"\ngpus = false\n\n'
        "[sweep]\nlevels = [1, 2, 4, 8]\nrequests = 16\nmax_tokens = 64\ninput_tokens = 64\n"
    )
    profiles = config.parent / "profiles"
    profiles.mkdir()
    port = free_port()
    (profiles / "ls-base.toml").write_text(
        f'description = "llama-server, Gemma 3 270M Q4_K_M, 8 slots, no speculation"\nkind = "llamacpp"\n'
        f'launcher = "{opt / "llama-server"}"\nmodel_path = "{opt / MODEL}"\nport = {port}\n\n'
        "[flags]\nparallel = 8\nthreads = 2\nctx-size = 8192\nmetrics = true\n"
    )
    (profiles / "ls-ngram.toml").write_text(
        'description = "ls-base + n-gram self-speculation (no draft model)"\nextends = "ls-base"\n\n[flags]\nspec-type = "ngram-simple"\n'
    )
    (profiles / "ls-draft.toml").write_text(
        'description = "ls-base + the same model as its own draft: a draft as costly as the target"\nextends = "ls-base"\n\n'
        f'[flags]\nspec-type = "draft-simple"\nspec-draft-model = "{opt / MODEL}"\n'
    )
    try:
        yield RealHost(config, home, user, opt)
    finally:
        if keep := os.environ.get("PIVOT_REAL_KEEP"):  # the campaign's runs, to read them afterwards
            shutil.copytree(campaign, Path(keep), dirs_exist_ok=True)
        subprocess.run(["pkill", "-KILL", "-u", user], check=False)  # whatever a failed test left running as the user
        sshd.proc.terminate()
        sshd.proc.wait(timeout=10)
        subprocess.run(["userdel", user], check=False)
        shutil.rmtree(root, ignore_errors=True)


def user_processes(user: str) -> list[str]:
    """The command lines of the host user's processes (sshd's session processes aside)."""
    uid = pwd.getpwnam(user).pw_uid
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return [c for c in found if c and not c.startswith("sshd")]

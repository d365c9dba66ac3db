"""known_hosts kept as OpenSSH keeps it (issue 34, H8, M1, L1): an entry pinned after a last line without its newline
starts a line of its own; a key marked @revoked is refused by `trust` and by every connect; a @cert-authority line is
recognised and never advised away."""

from __future__ import annotations

import asyncssh
import pytest

from tests.conftest import HostProcess
from tests.test_cli import pivot


@pytest.fixture
def own_known_hosts(sim_host_process: HostProcess, tmp_path):  # type: ignore[no-untyped-def]
    """(pivot.toml, known_hosts, the demo host's key line as `pivot trust` writes it) with a known_hosts of the test's."""
    pinned = (sim_host_process.root / "known_hosts").read_text().strip().splitlines()[0]
    known = tmp_path / "known_hosts"
    config = tmp_path / "pivot.toml"
    config.write_text(sim_host_process.config_path.read_text().replace(str(sim_host_process.root / "known_hosts"), str(known)))
    return config, known, pinned


def _other_host_line() -> str:
    key = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().strip()
    return f"gpu07.example {key}"


def test_a_key_pinned_after_a_last_line_without_its_newline_starts_its_own(own_known_hosts) -> None:  # type: ignore[no-untyped-def]
    config, known, _ = own_known_hosts
    other = _other_host_line()
    known.write_text(other)  # edited by hand: no newline at its end
    added = pivot("--config", str(config), "trust", "demo", "--yes")
    assert added.returncode == 0 and "added to" in added.stdout, added.stdout + added.stderr
    lines = known.read_text().splitlines()
    assert lines[0] == other and lines[1].startswith("[127.0.0.1]:") and len(lines) == 2
    assert pivot("--config", str(config), "ping").returncode == 0
    assert len(asyncssh.read_known_hosts(str(known)).match("gpu07.example", "", 22)[0]) == 1  # the other still pinned


def test_a_revoked_key_is_refused_by_trust_and_by_every_connect(own_known_hosts) -> None:  # type: ignore[no-untyped-def]
    config, known, pinned = own_known_hosts
    known.write_text(f"{pinned}\n@revoked {pinned}\n")
    for command in (("trust", "demo", "--yes"), ("ping",), ("gpus",)):
        refused = pivot("--config", str(config), *command)
        assert refused.returncode == 2, (command, refused.stdout, refused.stderr)
        assert "is marked @revoked in" in refused.stderr and "refusing to connect, as OpenSSH does" in refused.stderr
        assert "already trusted" not in refused.stdout and "added" not in refused.stdout and "Traceback" not in refused.stderr
    assert known.read_text() == f"{pinned}\n@revoked {pinned}\n"


def test_a_cert_authority_line_is_recognised_and_kept(own_known_hosts) -> None:  # type: ignore[no-untyped-def]
    config, known, pinned = own_known_hosts
    pattern = pinned.split()[0]
    authority = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().strip()
    known.write_text(f"@cert-authority {pattern} {authority}\n")
    refused = pivot("--config", str(config), "ping")  # the simulated host shows a plain key, no certificate
    assert refused.returncode == 2 and "@cert-authority" in refused.stderr and "ssh-keygen -R" not in refused.stderr
    trusted = pivot("--config", str(config), "trust", "demo", "--yes")
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert "also trusts a certificate authority for it (@cert-authority); that line stays" in trusted.stdout
    assert "ssh-keygen -R" not in trusted.stdout + trusted.stderr
    assert known.read_text().splitlines()[0] == f"@cert-authority {pattern} {authority}"
    assert pivot("--config", str(config), "ping").returncode == 0

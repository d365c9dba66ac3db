"""A host new to pivot (issue 20): no workdir yet. The first command of a connection creates it (mode 0700) and says
so once; every command works on such a host, on OpenSSH and on the simulated host alike."""

from __future__ import annotations

import stat

from tests.faults.conftest import Host, pivot


async def test_the_first_contact_creates_the_workdir(host: Host) -> None:
    assert not host.workdir.exists()  # nothing made it for pivot
    status, out, err = await pivot(host.config_path, "server", "status")
    assert status == 0, err
    assert "stopped" in out
    assert "created its workdir" in err and str(host.workdir).replace(str(host.workdir.parent.parent), "") in err
    assert stat.S_IMODE(host.workdir.stat().st_mode) == 0o700
    status, out, err = await pivot(host.config_path, "gpus")
    # this machine has no NVIDIA driver: OpenSSH's host says so; the simulated host has its own nvidia-smi
    assert status == 0 or "no NVIDIA driver on this host" in err, err
    assert "created its workdir" not in err  # said once: the workdir is there now

"""Issue 21, E: what pivot puts on the host and runs there is checked. A cut-short or replaced agent is never run
(uploaded again); an upload never writes through a symlink planted at the path's name. Both hosts."""

from __future__ import annotations

import os

from console.gpu.samples import AgentError, Sample
from console.gpu.telemetry import RemoteTelemetry
from console.remote import Connection
from console.zipapp import agent_zip
from tests.faults.conftest import Host


async def test_a_cut_short_or_replaced_agent_is_uploaded_again_not_run(host: Host) -> None:
    name, data = agent_zip()
    conn = Connection(host.spec)
    try:
        telemetry = RemoteTelemetry(conn, host.spec)
        await telemetry.sample_once()  # the agent is there now
        agent = host.workdir / "agent" / name
        fake = b'print(\'{"type": "sample", "gpus": [], "procs": []}\')'  # an "idle" sample from a file not pivot's
        for planted in (data[: len(data) // 2], b"", fake):
            agent.write_bytes(planted)
            sample = await telemetry.sample_once()
            assert isinstance(sample, Sample | AgentError)
            assert not (isinstance(sample, Sample) and not sample.gpus and not sample.problems)  # never an empty "idle"
            assert agent.read_bytes() == data  # replaced by the file pivot built
    finally:
        await conn.close()


async def test_an_upload_does_not_write_through_a_symlink(host: Host, tmp_path) -> None:  # type: ignore[no-untyped-def]
    victim = tmp_path / "victim"
    victim.write_text("precious")
    victim.chmod(0o600)
    conn = Connection(host.spec)
    try:
        await conn.run(["true"], cwd=host.spec.workdir)  # the workdir, as pivot makes it
        link = host.workdir / "server.json"
        os.symlink(victim, link)
        await conn.upload(b"{}", f"{host.spec.workdir}/server.json")
        assert victim.read_text() == "precious" and (victim.stat().st_mode & 0o777) == 0o600
        assert not link.is_symlink() and link.read_text() == "{}"
    finally:
        await conn.close()

"""`pivot demo`: a simulated GPU host on loopback, and the console on it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from console import config
from console.cli.console import open_console, open_fleet


def demo_home() -> Path:
    """Where demos keep their campaigns, each its own, so that a demo's runs can be compared after it ends."""
    from platformdirs import user_data_path

    return user_data_path("pivot", appauthor=False) / "demo"  # ~/.local/share/pivot/demo on Linux ($XDG_DATA_HOME)


@dataclass(frozen=True)
class Demo:
    """`pivot demo`'s options."""

    serve: bool  # only the simulated host, until Ctrl-C
    root: Path | None  # --dir: keep the host's files here
    campaign_dir: Path | None
    ephemeral: bool  # keep nothing
    gpus: int  # of each host
    hosts: int
    time_scale: float
    server: str  # eagle3, baseline or none: running when the demo starts
    traffic: bool  # background requests to it


def campaign_of(demo: Demo, root: Path) -> Path:
    if demo.campaign_dir:
        return demo.campaign_dir
    if demo.ephemeral or demo.root:
        return root / "campaign"
    # its own: another demo's runs (another user's sweeps, another host) are never this one's comparison partners
    return demo_home() / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}" / "campaign"


def offline_config(campaign: Path) -> Path | None:
    """A pivot.toml beside a kept campaign, for what needs no host after the demo: runs, compare, tasks, events."""
    if demo_home() not in campaign.parents:
        return None
    path = campaign.parent / "pivot.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"# written by pivot demo: its kept campaign, for runs, compare, tasks and events\ncampaign_dir = {json.dumps(str(campaign))}\n",
        encoding="utf-8",
    )
    return path


def run_demo(demo: Demo, theme: str | None, readonly: bool) -> int:
    from console.sim.host import SimHost, serve_forever
    from console.sim.state import GpuSpec

    root = demo.root or Path(tempfile.mkdtemp(prefix="pivot-demo-"))
    root.mkdir(parents=True, exist_ok=True, mode=0o700)  # --dir may name one that does not exist yet
    campaign = campaign_of(demo, root)
    kept = offline_config(campaign)  # (--serve's too: its temporary directory ends with it, the campaign stays)
    if demo.serve and demo.hosts > 1:
        from console.sim.fleet import serve_fleet

        try:
            asyncio.run(
                serve_fleet(
                    root,
                    demo.hosts,
                    gpus=GpuSpec(count=demo.gpus),
                    time_scale=demo.time_scale,
                    campaign_dir=campaign,
                    initial_server=demo.server,
                )
            )
        finally:
            if demo.root is None:
                shutil.rmtree(root, ignore_errors=True)
        return 0
    if demo.serve:
        host = SimHost(root, gpus=GpuSpec(count=demo.gpus), time_scale=demo.time_scale, subreaper=True, campaign_dir=campaign)
        try:
            asyncio.run(serve_forever(host, initial_server=demo.server, traffic=demo.traffic))
        finally:
            if demo.root is None:  # its keys among them: nothing of the host stays behind
                shutil.rmtree(root, ignore_errors=True)
        return 0
    # The host runs in its own process, as a remote host would: it adopts and reaps
    # the simulated server's orphans without touching the console's own children.
    argv = [
        sys.executable,
        "-m",
        "console",
        "demo",
        "--serve",
        "--dir",
        str(root),
        "--campaign-dir",
        str(campaign),
        "--gpus",
        str(demo.gpus),
        "--time-scale",
        str(demo.time_scale),
        "--server",
        demo.server,
        "--hosts",
        str(demo.hosts),
        *([] if demo.traffic else ["--no-traffic"]),
    ]
    # a closed terminal or tmux window must still end the host and remove its files
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    log = open(root / "host.log", "w")  # noqa: SIM115 - the host writes it until it ends
    host_proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
    try:
        lines = [host_proc.stdout.readline() for _ in range(2)] if host_proc.stdout else []
        config_line = next((line for line in lines if line.startswith("config: ")), None)
        if config_line is None:
            print(f"pivot: the simulated host did not start; see {root / 'host.log'}", file=sys.stderr)
            return 1
        config_path = config_line.removeprefix("config: ").strip()  # (where the campaign is kept: said once, at the end)
        if demo.hosts > 1:  # the fleet first; Enter opens a host's console, q there comes back
            return open_fleet(config.load(config_path), theme, readonly=readonly, hosts_outlive=False)
        notes = [
            f"This demo's simulated host: {lines[0].strip()}",
            f"Its server, ended as a crash would (from another terminal): kill $(cat {root / 'home/.pivot/server.pid'})",
            f"The demo's config, while it runs (pivot --config … from another terminal): {config_path}",
            campaign_line(campaign, kept),
            "q here ends the demo's host with its server too (on a real host, q leaves the server running)",
        ]
        return open_console(config.load(config_path), "demo", theme, readonly=readonly, notes=notes, host_outlives=False)
    finally:
        host_proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            host_proc.wait(timeout=10)
        if host_proc.poll() is None:
            host_proc.kill()
        log.close()
        if demo.root is None:
            shutil.rmtree(root, ignore_errors=True)
        print(campaign_line(campaign, kept) if kept or demo.campaign_dir else "the demo's campaign went with it (--ephemeral)")


def campaign_line(campaign: Path, kept: Path | None) -> str:
    if kept is None:
        return f"the demo's campaign: {campaign}"
    return f"the demo's campaign is kept in {campaign}: pivot --config {kept} compare previous last"

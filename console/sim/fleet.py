"""`pivot demo --serve --hosts N`: N simulated GPU hosts served by one process, each on its own SSH port with its
own GPUs (8, then 4, in turn), processes and server files, and one pivot.toml naming them all, gpu01 … gpuNN.

One process adopts the simulated servers' orphans for every host (the first host's reaper, told of the others'
sessions). The hosts share this machine's loopback: a server started on two of them at once needs two ports."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from console.sim.host import SimHost, free_port
from console.sim.state import GpuSpec


def fleet_hosts(root: Path, count: int, gpus: GpuSpec, time_scale: float, campaign_dir: Path) -> list[SimHost]:
    hosts = [
        SimHost(
            root / f"gpu{i:02d}",
            gpus=GpuSpec(count=gpus.count if i % 2 else max(1, gpus.count // 2), memory_mib=gpus.memory_mib),
            time_scale=time_scale,
            subreaper=i == 1,
            campaign_dir=campaign_dir,
        )
        for i in range(1, count + 1)
    ]
    hosts[0].siblings = hosts[1:]
    return hosts


def write_fleet_config(root: Path, hosts: list[SimHost], campaign_dir: Path) -> Path:
    lines = [
        "# written by pivot demo --hosts: the simulated GPU hosts",
        f'default_host = "{hosts[0].root.name}"',
        "simulated = true",
        f"campaign_dir = {json.dumps(str(campaign_dir))}",
        f"profiles_dir = {json.dumps(str(hosts[0].root / 'profiles'))}",
        "",
    ]
    for host in hosts:
        lines += [
            f"[hosts.{host.root.name}]",
            'hostname = "127.0.0.1"',
            f"port = {host.port}",
            f"user = {json.dumps(host.user)}",
            f"identity = {json.dumps(str(host.root / 'client_key'))}",
            f"known_hosts = {json.dumps(str(host.root / 'known_hosts'))}",
            f"python = {json.dumps(sys.executable)}",
            'workdir = "~/.pivot"',
            'role = "gpu"',
            "",
        ]
    lines += ["[sweep]", "max_tokens = 64", 'requests = "c"', "min_requests = 16", ""]
    path = root / "pivot.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    if len(hosts) >= 2:
        write_two_node_profile(hosts[0].root / "profiles", hosts[0].root.name, hosts[1].root.name)
    return path


def write_two_node_profile(profiles: Path, first: str, second: str) -> None:
    """demo-2node: the demo's baseline across two hosts, TP8 as four GPUs on each (the fleet's second host has four)."""
    (profiles / "demo-2node.toml").write_text(
        "# written by pivot demo --hosts: the demo baseline as one server across two simulated hosts\n"
        f'description = "demo fleet: simulated Kimi-K2.5, TP8 across {first} and {second}, four GPUs on each"\n'
        'extends = "demo-baseline"\n'
        f"nodes = [{json.dumps(first)}, {json.dumps(second)}]\n"
        f"port = {free_port(30100)}\n"  # the hosts share this machine's loopback: not the single-host demos' port
        f"dist_port = {free_port(50000)}\n",
        encoding="utf-8",
    )


async def serve_fleet(root: Path, count: int, *, gpus: GpuSpec, time_scale: float, campaign_dir: Path, initial_server: str) -> None:
    hosts = fleet_hosts(root, count, gpus, time_scale, campaign_dir)
    try:
        for host in hosts:
            await host.start()
        if initial_server != "none":
            hosts[0].start_server(f"demo-{initial_server}")
        config = write_fleet_config(root, hosts, campaign_dir)
        print(hosts[0].ssh_command, flush=True)
        print(f"config: {config}", flush=True)
        print(f"{count} simulated GPU hosts: `pivot --config {config} gpus --all` looks at them all", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        for host in reversed(hosts):
            await host.close()

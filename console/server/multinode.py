"""A server across nodes: a profile's `nodes` (hosts of pivot.toml, or one group's name) run rank R on the R-th,
each with its engine's own multi-node flags, the first node's address as the ranks' rendezvous.

What the engines do with them, read in their wheels:
- SGLang 0.5.23: `--nnodes`, `--node-rank`, `--dist-init-addr HOST:PORT` (srt/arg_groups/fields/parallel.py). A rank
  above 0 runs schedulers only (srt/entrypoints/engine.py, `node_rank >= 1`): no tokenizer, no API, but a dummy
  server answering /health on --host/--port (srt/utils/common.py launch_dummy_health_check_server, in a daemon thread:
  a port in use only ends that thread), and it ignores SIGTERM, waiting for rank 0's shutdown to reach it.
- vLLM 0.33.0: `--nnodes`, `--node-rank`, `--master-addr`, `--master-port` with its mp backend
  (engine/arg_utils.py, config/parallel.py); a rank above 0 runs `--headless` (entrypoints/cli/serve.py
  run_headless: the workers, no API server).
The server is ready when rank 0's health answers; any rank's end without a stop is the server's crash.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from console.config import Config, HostSpec
from console.server.profiles import FlagValue, Profile, ProfileError


@dataclass(frozen=True)
class Rank:
    rank: int
    host: HostSpec
    profile: Profile  # the profile with this rank's flags: its argv() is the rank's command line

    @property
    def serves_http(self) -> bool:
        """Whether this rank binds the profile's host and port: SGLang's every rank (the dummy health server above 0),
        vLLM's rank 0 only (the others are headless)."""
        return self.rank == 0 or self.profile.kind == "sglang"


def node_names(profile: Profile, config: Config) -> tuple[str, ...]:
    """The hosts a profile spans, in rank order; () for a profile of one host. Refused in one line naming the
    profile's file and `nodes`."""
    if not profile.nodes:
        return ()
    names = config.groups.get(profile.nodes[0], profile.nodes) if len(profile.nodes) == 1 else profile.nodes
    if unknown := [n for n in names if n not in config.hosts or config.hosts[n].role != "gpu"]:
        groups = f"; groups: {', '.join(sorted(config.groups))}" if config.groups else ""
        raise ProfileError(
            profile.path,
            "nodes",
            f"no GPU host or group named {', '.join(map(repr, unknown))} in "
            f"{config.path or 'pivot.toml'} (hosts: {', '.join(sorted(config.hosts))}{groups})",
        )
    if len(names) < 2:
        raise ProfileError(profile.path, "nodes", f"{names[0]!r} is one host: a server across nodes needs two or more")
    if len(set(names)) < len(names):
        raise ProfileError(profile.path, "nodes", "names a host twice")
    return tuple(names)


def ranks(profile: Profile, config: Config) -> list[Rank]:
    """One Rank per node (empty for a profile of one host)."""
    names = node_names(profile, config)
    if not names:
        return []
    first = config.hosts[names[0]].node_address
    return [
        Rank(
            r,
            config.hosts[name],
            dataclasses.replace(profile, flags={**profile.flags, **rank_flags(profile.kind, len(names), r, first, profile.dist_port)}),
        )
        for r, name in enumerate(names)
    ]


def rank_flags(kind: str, nnodes: int, rank: int, address: str, port: int) -> dict[str, FlagValue]:
    """The engine's own flags for rank `rank` of `nnodes` whose rank 0 is at address:port (see the module's doc)."""
    if kind == "sglang":
        host = f"[{address}]" if ":" in address else address  # NetworkAddress.parse takes an IPv6 host in brackets
        return {"nnodes": nnodes, "node-rank": rank, "dist-init-addr": f"{host}:{port}"}
    if kind == "vllm":
        return {"nnodes": nnodes, "node-rank": rank, "master-addr": address, "master-port": port, "headless": rank > 0}
    raise ValueError(f"no multi-node flags known for {kind}")

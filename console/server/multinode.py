"""A server across nodes: a profile's `nodes` (hosts of pivot.toml, or one group's name) run rank R on the R-th,
each with its engine's own multi-node flags (`Engine.node_flags`, read in each engine's source: console/engines/),
the first node's address as the ranks' rendezvous. The server is ready when rank 0's health answers; any rank's end
without a stop is the server's crash.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from console.config import Config, HostSpec
from console.server.profiles import Profile, ProfileError


@dataclass(frozen=True)
class Rank:
    rank: int
    host: HostSpec
    profile: Profile  # the profile with this rank's flags: its argv() is the rank's command line

    @property
    def serves_http(self) -> bool:
        """Whether this rank binds the profile's host and port: rank 0 always, the others where the engine says so."""
        return self.rank == 0 or self.profile.engine.every_rank_serves_http


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
            dataclasses.replace(profile, flags={**profile.flags, **profile.engine.node_flags(len(names), r, first, profile.dist_port)}),
        )
        for r, name in enumerate(names)
    ]

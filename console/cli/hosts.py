"""`pivot trust`, `pivot ping`, `pivot config`: hosts and the configuration."""

from __future__ import annotations

import asyncio
from pathlib import Path

from console import config
from console.cli.prompt import ask
from console.remote.state import ConnectionEvent, ConnState
from console.session import Session
from console.untrusted import visible

NO_CONFIG = "pivot: no pivot.toml found (looked in ./pivot.toml and ~/.config/pivot/pivot.toml); see pivot.example.toml"


def validate_config(config_path: str | None) -> int:
    cfg = config.load(config_path)  # a bad file: ConfigError, one line naming the file and the key
    if cfg.path is None:
        print(NO_CONFIG)
        return 1
    print(f"{cfg.path}: ok, {len(cfg.hosts)} host(s)")
    return 0


def show_config(config_path: str | None) -> int:
    cfg = config.load(config_path)
    if cfg.path is None:
        print(NO_CONFIG)
        return 0
    print(f"# {cfg.path}, as pivot reads it (its defaults filled in)")
    print(effective_toml(cfg), end="")
    return 0


def effective_toml(cfg: config.Config) -> str:
    """The configuration as pivot uses it, in pivot.toml's own keys (TOML has no null: unset keys are left out)."""
    import dataclasses

    import tomli_w

    def kept(value: object) -> bool:
        return value not in (None, (), {})

    top = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in ("path", "hosts", "sweep", "compare", "notify")}
    data: dict[str, object] = {k: str(v) if isinstance(v, Path) else v for k, v in top.items() if kept(v)}
    data["hosts"] = {
        spec.name: {k: list(v) if isinstance(v, tuple) else v for k, v in vars(spec).items() if k != "name" and kept(v)}
        for spec in cfg.hosts.values()
    }
    data["sweep"] = cfg.sweep.to_dict()
    data["compare"] = cfg.compare.model_dump(exclude_none=True)
    data["notify"] = cfg.notify.model_dump()
    return tomli_w.dumps(data)


async def trust_host(config_path: str | None, name: str, *, yes: bool) -> int:
    from console.remote import trust
    from console.remote.pool import HostPool

    cfg = config.load(config_path)
    spec = cfg.host(name)
    pool = HostPool(cfg)  # a jump that names a configured host is reached as that host, as every command does
    try:
        offered = await trust.fetch_key(spec, pool.get(spec.jump) if spec.jump in cfg.hosts else None)
    finally:
        await pool.close()
    print(f"{spec.name} ({offered.host_pattern}) offers a {offered.algorithm} key:\n  {offered.fingerprint}")
    if offered.already_trusted:
        print(f"already trusted in {offered.known_hosts}")
        return 0
    if offered.authority:
        print(f"{offered.known_hosts} also trusts a certificate authority for it (@cert-authority); that line stays")
    if not yes:
        answer = ask(f"Add it to {offered.known_hosts}? Check the fingerprint first. [yes/no] ")
        if answer not in ("y", "yes"):
            print("not added")
            return 1
    trust.pin(offered)
    print(f"added to {offered.known_hosts}")
    return 0


async def ping_host(config_path: str | None, host: str | None) -> int:
    async with Session(config.load(config_path), host) as session:
        await session.connect()
        rtt, result = await asyncio.gather(session.conn.round_trip(), session.conn.run(["uname", "-srm"], timeout=10))
        print(f"{ConnectionEvent(session.conn.host, ConnState.UP, rtt_s=rtt).describe()}; {visible(result.stdout.strip())}")
    return 0

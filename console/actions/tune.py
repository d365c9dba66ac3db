"""`pivot tune` driven on the session's host: for each draft length, its profile written (extending the drafting one),
its server switched in with the lifecycle's checks and the levels swept; the close levels measured again; the best
length per level written as the engine's schedule in a profile; that profile swept and held against the best measured
length at every level; the server stopped. Each step is recorded (console/sweep/tune.py) as it ends, so that the same
command goes on with an interrupted session."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from console.actions.adaptive import write_config, write_profile_file
from console.actions.campaign import ActionFailed, CampaignActions
from console.engines import Drafting, LengthSchedule, NoAdaptiveProfile
from console.remote.errors import RemoteError
from console.server.profiles import Profile, ProfileError, drafting_text
from console.server.state import ServerState
from console.settings import SweepSettings
from console.sweep import tune
from console.sweep.adaptive import written_profiles_dir
from console.sweep.analysis.repeats import REPEAT_CAP
from console.sweep.runs.store import Run, RunError, open_run
from console.sweep.sweeps import SweepHandle
from console.untrusted import decode, visible


@dataclass(frozen=True)
class TuneOrder:
    profile: str
    lengths: list[int] | None = None  # None: the engine's default around the profile's own length
    levels: list[int] | None = None  # None: [sweep] levels
    counterpart: str | None = None  # the server without drafting; None: the profile with its drafting flags unset
    requests: int | None = None  # per level; None: [sweep] requests, but "c" (one wave, mostly ramp) taken as "auto"
    prompts: str | None = None  # None: [sweep] prompts
    repeat_cap: int | None = None  # requests a close level is measured again with at most (None: REPEAT_CAP); 0: never


@dataclass(frozen=True)
class Tuned:
    record: tune.TuneRecord
    outcome: tune.Outcome

    def __str__(self) -> str:
        found = self.outcome
        lines = [f"tuning session {self.record.name} of {visible(self.record.profile)}:"]
        lines += [f"  C={c.c} (running batch {c.batch}): best {tune.length_text(c.best)}, {c.margin_text}" for c in found.found]
        if found.schedule is None:
            lines.append(f"  {found.refusal}")
        else:
            lines.append(f"  schedule ({self.record.kind}'s own form):")
            lines += [f"    {line}" for line in found.schedule.text.rstrip("\n").splitlines()]
            lines += [f"  warning: {w}" for w in found.schedule.warnings]
        if self.record.tuned:
            lines.append(f"  profile {self.record.tuned} runs it")
        if found.checks:
            lines.append(f"  verified: {tune.checks_summary(found.checks)}")
            lines += [f"    {c.text}" for c in found.checks]
        lines.append(f"  the report: pivot report --tune {self.record.name} -o {self.record.name}.html")
        return "\n".join(lines)


HEADER = "# Written by pivot tune"
OPTIONS_LIMIT = 1 << 20  # an options file larger than this is not one


def _yaml(options: dict[str, Any]) -> str:
    return yaml.safe_dump(options, sort_keys=False)


def _header(what: str) -> str:
    return f"{HEADER}: {what}.\n"


def _ours(path: Path) -> bool:
    """Whether a profile file may be written over: absent, or one pivot tune wrote."""
    try:
        with path.open("rb") as f:
            return f.read(len(HEADER)) == HEADER.encode()
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _write_ours(path: Path, what: str, data: dict[str, Any], warnings: tuple[str, ...] = ()) -> None:
    if not _ours(path):
        raise ActionFailed(f"{path} is a profile pivot tune did not write: move it, or tune under another profile name")
    write_profile_file(path, _header(what) + "".join(f"# warning: {w}\n" for w in warnings), data)


class Tuning:
    """One session's steps on the host, through the campaign's verbs (start, switch, sweep, repeat, stop). What reads
    or writes files runs in a thread: the console's event loop is never held by it."""

    def __init__(self, actions: CampaignActions, order: TuneOrder, *, confirm: Callable[[str], Awaitable[bool]] | None = None):
        self.actions, self.order, self.confirm = actions, order, confirm
        self.session, self.cfg, self.say = actions.session, actions.cfg, actions.say
        self.campaign_dir = self.cfg.campaign_dir
        self.directory = written_profiles_dir(self.cfg)
        self.options: dict[str, Any] | None = None  # the profile's options file, for an engine told by one

    @property
    def _repeat_cap(self) -> int:
        return REPEAT_CAP if self.order.repeat_cap is None else self.order.repeat_cap

    def _profile(self, name: str) -> Profile:
        try:
            return self.session.profiles().get(name)
        except ProfileError as e:
            raise ActionFailed(str(e)) from None

    async def _options(self, profile: Profile) -> dict[str, Any] | None:
        """For an engine told how it drafts by a file of options (TensorRT-LLM's YAML): the file its command line
        names, read from the host ({} where it names none); None for an engine told by its command line."""
        engine = profile.engine
        if not engine.options_flags:
            return None
        path = engine.options_path(profile.argv())
        if path is None:
            return {}
        conn = self.session.conn if self.session.spec is not None else None
        if conn is None:
            raise ActionFailed(f"{profile.name} names its options file {visible(path)} on a host, and none is configured")
        if path.startswith("~"):  # the server opens it as given: no shell expands it
            raise ActionFailed(f"{profile.name}'s options file {visible(path)}: the server does not expand ~; give the whole path")
        if not path.startswith("/"):  # the server runs in pivot's workdir on the host
            path = f"{await conn.expand(conn.spec.workdir.rstrip('/'))}/{path}"
        try:
            text = decode(await conn.read_file(path, limit=OPTIONS_LIMIT))
        except RemoteError as e:
            raise ActionFailed(f"{profile.name}'s options: {e}") from None
        try:
            options = await asyncio.to_thread(yaml.safe_load, text)
        except yaml.YAMLError as e:
            why = " ".join(str(e).split())
            raise ActionFailed(f"{conn.spec.name}:{visible(path)} ({profile.name}'s options): not YAML: {visible(why)}") from None
        if options is not None and not isinstance(options, dict):
            raise ActionFailed(f"{conn.spec.name}:{visible(path)} ({profile.name}'s options): expected a YAML mapping")
        return options or {}

    async def _drafting(self, profile: Profile) -> Drafting | None:
        options = await self._options(profile)
        return profile.drafting if options is None else profile.engine.drafting_in(options)

    def _new_settings(self, levels: list[int]) -> dict[str, Any]:
        """The [sweep] settings the session's runs take, checked; kept in its record as it starts."""
        asked = self.order.requests or self.cfg.sweep.requests
        data = {**self.cfg.sweep.to_dict(), "levels": levels, "requests": "auto" if asked == "c" else asked}
        if self.order.prompts is not None:
            data["prompts"] = self.order.prompts
        try:
            SweepSettings.from_dict(data)
        except ValueError as e:
            raise ActionFailed(str(e)) from None
        return data

    def _differs(self, record: tune.TuneRecord) -> list[str]:
        """What this command asks that the unfinished session it would go on with did not."""
        asked = {
            "--requests": (self.order.requests, record.settings.get("requests")),
            "--prompts": (self.order.prompts, record.settings.get("prompts")),
            "--baseline": (self.order.counterpart, record.variants[0]),
        }
        return [f"{flag} {given} (the session's: {kept})" for flag, (given, kept) in asked.items() if given is not None and given != kept]

    async def _length_flags(self, spec: Profile, name: str, length: int) -> tuple[dict[str, Any], list[str]]:
        """The flags of the variant drafting `length`: for an engine told by a file of options, that file written
        (beside the profile, and on the host) with the length in it."""
        try:
            if self.options is None:
                return spec.engine.length_flags(spec.flags, length)
            text = await asyncio.to_thread(_yaml, spec.engine.options_at_length(self.options, length))
        except NoAdaptiveProfile as e:
            raise ActionFailed(f"cannot tune {spec.name}: {e}") from None
        remote = await self._upload(name, text, ".yaml")
        return {spec.engine.options_flag(spec.flags): remote}, []

    async def _upload(self, name: str, text: str, suffix: str) -> str:
        try:
            remote, _ = await write_config(self.session, self.directory, name, text, suffix)
        except (OSError, RemoteError) as e:
            raise ActionFailed(f"cannot write {name}'s options: {e}") from None
        return remote

    async def _write_variants(self, spec: Profile, record: tune.TuneRecord) -> None:
        """The profile of each length pivot names (the profile's own length is itself, a named counterpart the
        operator's); then each is read back and must draft exactly its length."""
        for length, name in record.variants.items():
            if name != tune.variant_name(spec.name, length):
                continue
            flags, unset = await self._length_flags(spec, name, length)
            what = f"{spec.name} drafting {length} tokens a step" if length else f"{spec.name} without drafting"
            data: dict[str, Any] = {"description": f"{what}, for {record.name}", "extends": spec.name, "flags": flags}
            if unset:
                data["unset"] = unset
            await asyncio.to_thread(_write_ours, self.directory / f"{name}.toml", what, data)
        for length, name in record.variants.items():
            variant = await asyncio.to_thread(self._profile, name)
            drafting = await self._drafting(variant)
            if (drafting is None) != (length == 0) or (length and drafting and drafting.steps != length):
                said = "drafts" if drafting else "does not draft"
                fix = ": name one that does not with --baseline" if length == 0 else ""
                raise ActionFailed(f"{name} {said} ({drafting_text(drafting)}), not {tune.length_text(length)}{fix}")

    def _plan_text(self, record: tune.TuneRecord) -> str:
        servers = ", ".join(f"{tune.length_text(n)} ({record.variants[n]})" for n in record.lengths)
        levels = ",".join(map(str, record.levels))
        todo = [n for n in record.lengths if n not in record.runs or not self._complete(record.runs[n])]
        requests = record.settings.get("requests")
        return (
            f"tune {record.profile}: {len(todo)} of {len(record.lengths)} servers to measure: {servers}; C = {levels}, "
            f"{requests} requests a level; then the close levels again (at most {self._repeat_cap} requests each), "
            f"the schedule written and its profile swept ({self._pace(record)})"
        )

    def _pace(self, record: tune.TuneRecord) -> str:
        """About how long, from the newest run of the profile at these levels: its seconds per request."""
        from console.campaign import Campaign

        asked = record.settings.get("requests")
        runs = [r for r in Campaign(self.campaign_dir).runs() if r.profile == record.profile and r.has_measured_levels]
        for run in reversed(runs):
            levels = [lv for lv in run.levels() if lv.measured and lv.wall_s and lv.c in record.levels]
            if len(levels) == len(record.levels):
                seconds = sum(
                    (lv.wall_s or 0.0) * (asked if isinstance(asked, int) else lv.requests) / max(1, lv.requests) for lv in levels
                )
                total = seconds * (len(record.lengths) + 1)
                return f"about {total / 60:.0f} min of sweeps by {run.name}'s pace, plus {len(record.lengths) + 1} server starts"
        return "its length is known once the first server is measured; each server start comes on top"

    def _complete(self, name: str) -> bool:
        try:
            return open_run(self.campaign_dir, name).state == "complete"
        except RunError:
            return False

    def _kept(self, name: str | None) -> Run | None:
        """A run the record names, where it still is."""
        if name is None:
            return None
        try:
            return open_run(self.campaign_dir, name)
        except RunError:
            return None

    async def _save(self, record: tune.TuneRecord) -> None:
        await asyncio.to_thread(record.save, self.campaign_dir)

    async def _serve(self, profile: str) -> None:
        """The profile's server, switched in unless it already serves."""
        status = await self.actions.lifecycle.poll()
        if status.state == ServerState.READY and status.profile == profile:
            return
        self.say(f"  switching to {profile}")
        await self.actions.do_switch(profile)

    async def _measure(
        self, record: tune.TuneRecord, profile: str, kept: str | None, settings: SweepSettings, keep: Callable[[str], None]
    ) -> Run:
        """A complete run of `profile` at the session's levels: the one kept (its name recorded) if it is complete,
        resumed if it stopped short, else a new one, whose name `keep` records as soon as it exists."""
        run = await asyncio.to_thread(self._kept, kept)
        state = await asyncio.to_thread(lambda: (run.state, run.has_measured_levels) if run is not None else (None, False))
        if state[0] == "complete" and run is not None:
            return run
        await self._serve(profile)
        if run is not None and state[1]:
            handle = await self._start(run.settings, run=run, how="resume")
        else:
            handle = await self._start(settings)
        keep(handle.run.name)
        await self._save(record)
        await self._follow(handle)
        return handle.run

    async def _start(self, settings: SweepSettings, **how: Any) -> SweepHandle:
        try:
            return await self.session.sweeps.start(settings, via=self.actions.via, **how)
        except (RunError, RemoteError, ValueError) as e:
            raise ActionFailed(str(e)) from None

    async def _follow(self, handle: SweepHandle) -> None:
        await self.actions._follow(handle)
        if handle.end != "done":
            raise ActionFailed(f"the sweep {handle.end}: {handle.reason or 'by the operator'}")

    async def _repeat(self, record: tune.TuneRecord, runs: dict[int, Run], found: list[tune.LevelChoice]) -> None:
        for again in tune.to_repeat(found, self._repeat_cap):
            run = runs[again.length]
            levels = ", ".join(map(str, again.levels))
            await self._serve(record.variants[again.length])
            self.say(f"  {tune.length_text(again.length)}: C = {levels} again, {again.requests} requests each (too close to call)")
            settings = dataclasses.replace(run.settings, requests=again.requests)
            await self._follow(await self._start(settings, run=run, how="repeat", levels=list(again.levels)))

    async def _write_tuned(self, spec: Profile, record: tune.TuneRecord, schedule: LengthSchedule) -> str:
        name = f"{spec.name}-tuned"
        path = self.directory / f"{name}.toml"
        if not await asyncio.to_thread(_ours, path):
            raise ActionFailed(f"{path} is a profile pivot tune did not write: move it, or tune under another profile name")
        remote = None
        if self.options is not None:
            remote = await self._upload(name, await asyncio.to_thread(_yaml, spec.engine.options_tuned(self.options, schedule)), ".yaml")
        elif spec.engine.adaptive_file:
            remote = await self._upload(name, schedule.text, ".json")
        flags, unset = spec.engine.tuned_flags(spec.flags, schedule, remote)
        data: dict[str, Any] = {"description": f"{spec.name} with the draft lengths {record.name} measured best", "extends": spec.name}
        data |= {"unset": unset} if unset else {}
        data["flags"] = flags
        await asyncio.to_thread(_write_ours, path, f"the schedule of {record.name}", data, schedule.warnings)
        return name

    def _prepare(self, spec: Profile, found_drafting: Drafting) -> tuple[tune.TuneRecord, str]:
        """The session (the unfinished one to go on with, or a new one) and its plan in words: files read, so off the
        event loop."""
        lengths = self.order.lengths or tune.default_lengths(found_drafting)
        levels = self.order.levels or list(self.cfg.sweep.levels)
        if self.cfg.sweep.rates:
            raise ActionFailed("tune measures concurrency levels ([sweep] rates is set): drafting is switched by running batch")
        record = tune.unfinished(self.campaign_dir, spec.name, lengths, levels)
        going_on = ""
        if record is not None:
            if differs := self._differs(record):
                raise ActionFailed(
                    f"{record.name} is unfinished and asked otherwise: {'; '.join(differs)}. Give its own options to go on, "
                    f"or remove {record.path(self.campaign_dir)} to start anew"
                )
            going_on = f"going on with {record.name} (its runs so far: {', '.join(record.runs.values()) or 'none'})\n"
        else:
            counterpart = self.order.counterpart or tune.variant_name(spec.name, 0)
            record = tune.new_record(spec.name, spec.kind, counterpart, lengths, self._new_settings(levels))
            # its own length is itself, unless it drafts by a schedule of its own (then that length is written too)
            if found_drafting.steps in record.variants and spec.engine.fixed_length(found_drafting):
                record.variants[found_drafting.steps] = spec.name
        return record, going_on + self._plan_text(record)

    async def run(self) -> Tuned:
        spec = await asyncio.to_thread(self._profile, self.order.profile)
        self.options = await self._options(spec)
        found = await self._drafting(spec)
        if found is None:
            how = "by its options file" if self.options is not None else "by its own flags"
            raise ActionFailed(f"{spec.name} does not draft {how}: nothing to tune")
        record, plan = await asyncio.to_thread(self._prepare, spec, found)
        if self.confirm is None:
            self.say(plan)
        elif not await self.confirm(plan):
            raise ActionFailed("not confirmed: nothing was measured")
        await self._write_variants(spec, record)
        await self._save(record)
        settings = SweepSettings.from_dict(record.settings)
        for length in record.lengths:
            await self._measure(
                record, record.variants[length], record.runs.get(length), settings, functools.partial(record.runs.__setitem__, length)
            )
        runs = await asyncio.to_thread(tune.load_runs, self.campaign_dir, record)
        if not record.repeated:
            await self._repeat(record, runs, await asyncio.to_thread(tune.choices, runs, self.cfg.margin))
            record.repeated = True
            await self._save(record)
            runs = await asyncio.to_thread(tune.load_runs, self.campaign_dir, record)
        result = await self._schedule_and_verify(spec, record, runs, settings)
        record.finished = True
        await self._save(record)
        stopped = await self.actions.do_stop()
        self.say(f"  {stopped}")
        return result

    async def _schedule_and_verify(self, spec: Profile, record: tune.TuneRecord, runs: dict[int, Run], settings: SweepSettings) -> Tuned:
        found = await asyncio.to_thread(tune.outcome, record, runs, None, self.cfg.margin)
        if found.schedule is None or found.schedule.config is None:  # none, or the engine is told by which server runs
            return Tuned(record, found)
        if record.tuned is None:
            record.tuned = await self._write_tuned(spec, record, found.schedule)
            await self._save(record)
        self.say(f"  the schedule, in {record.tuned}:")
        verify_run = await self._measure(
            record, record.tuned, record.verify_run, settings, functools.partial(setattr, record, "verify_run")
        )
        return Tuned(record, await asyncio.to_thread(tune.outcome, record, runs, verify_run, self.cfg.margin))

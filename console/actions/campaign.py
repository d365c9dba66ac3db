"""The campaign's verbs: kill the strays, check the GPUs are idle and the files are there, start, switch and stop a
server, sweep it, compare runs, repeat their uncertain levels and refine them. A runbook's actions
(console/actions/runbook.py parses them and dispatches here), the Sweep pane's `u` and `f` and `pivot sweep
--repeat-uncertain` / `--refine` run them."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sized

from console.actions import kill
from console.actions.outcomes import Checked, Compared, Killed, Repeated, ServerNow, Swept, Verified, Written
from console.campaign import Campaign
from console.gpu.format import idle_line
from console.gpu.samples import AgentError, Sample
from console.remote.errors import RemoteError
from console.server.state import ServerState
from console.session import Session
from console.settings import PROMPT_SETS, SweepSettings, level_name
from console.sweep.analysis.compare import Comparison, compare, counterpart
from console.sweep.analysis.refine import refine
from console.sweep.analysis.repeats import REPEAT_CAP, REPEAT_ROUNDS, repeat_plan
from console.sweep.analysis.slo import Slo
from console.sweep.analysis.verification import verification
from console.sweep.model import LevelDone
from console.sweep.runs.store import Run, RunError
from console.sweep.sweeps import SweepHandle
from console.sweep.words.comparison import recommendation
from console.sweep.words.repeats import refusal_text, repeat_time, requests_each
from console.sweep.words.verdicts import listed, naming

READY_TIMEOUT_S = 1800.0
RELEASE_TIMEOUT_S = 60.0


def _them(levels: Sized) -> str:
    """'it' for one level, 'them' for several."""
    return "it" if len(levels) == 1 else "them"


class ActionFailed(Exception):
    pass


def _number(value: str) -> int | float | str:
    """A runbook's value as TOML would read it: a whole number, a number, or else the text itself."""
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


# sweep settings a runbook may not set: what they would send to the server
OPERATOR_ONLY = {
    "api_key_env": "an environment variable of yours as a bearer token",
    "prompt_file": "a file of this machine's as the prompts",
    "prompts": "a file of this machine's as the prompts",  # (but for a named set: PROMPT_SETS)
    "extra_body": "fields of its choosing",
}


class CampaignActions:
    """The campaign's verbs, each a runbook action (console/actions/runbook.py names them) and each used by a pane or a
    command too. What a task's action does, on the session's host, through the same actions the panes and the commands use;
    each event it causes says who asked (`via`: "runbook", or "console" and "cli" for the verbs a pane or a command
    uses). In the console the session is the console's own, so its panes show each step (the Server pane follows the
    lifecycle, the Sweep pane every sweep started through the session)."""

    def __init__(
        self,
        session: Session,
        *,
        confirm_kill: Callable[[str], Awaitable[bool]],
        say: Callable[[str], None] = print,
        via: str = "runbook",
    ):
        if session.lifecycle is None:
            raise ActionFailed("runbooks run on a host from pivot.toml, not on --local")
        self.session, self.lifecycle, self.say, self.via = session, session.lifecycle, say, via
        self.cfg = session.config
        self.confirm_kill = confirm_kill

    async def _sample(self) -> Sample:
        sample = await self.session.telemetry.sample_once()
        if isinstance(sample, AgentError):
            raise ActionFailed(sample.message)
        return sample

    async def do_kill_stray(self) -> Killed:
        sample = await self._sample()
        stray = sorted({p.pid for p in sample.stray})
        if not stray:
            return Killed((), ())
        chosen = kill.plan(self.session, sample, stray)
        listing = ", ".join(f"{p.pid} ({p.cmd or p.state})" for p in chosen.targets)
        if not await self.confirm_kill(f"kill {len(chosen.targets)} stray processes: {listing}?"):
            raise ActionFailed("not confirmed: nothing was killed")
        report = await kill.kill(self.session, chosen, via=self.via)
        released: list[str] = []
        samples = kill.only_samples(self.session)
        try:
            done = await kill.follow_release(samples, chosen, released.append, timeout_s=RELEASE_TIMEOUT_S, since=report.began)
        finally:
            await samples.aclose()
        if not done:
            raise ActionFailed(released[-1])
        return Killed(tuple(o.pid for o in report.outcomes), tuple(released))

    async def do_verify_idle(self) -> Checked:
        sample = await self._sample()
        line = idle_line(sample, self.cfg.idle_threshold_mib)
        if not sample.idle(self.cfg.idle_threshold_mib):
            raise ActionFailed(line)
        return Checked(line)

    async def do_check_files(self, *paths: str) -> Checked:
        missing = []
        conn = self.session.conn
        for path in paths:
            if not (await conn.run(["test", "-e", await conn.expand(path)])).ok:
                missing.append(path)
        if missing:
            raise ActionFailed("missing on the host: " + ", ".join(missing))
        return Checked(f"{len(paths)} present")

    async def _ready(self) -> ServerNow:
        deadline = asyncio.get_running_loop().time() + READY_TIMEOUT_S
        while asyncio.get_running_loop().time() < deadline:
            status = await self.lifecycle.poll()
            if status.state == ServerState.READY:
                return ServerNow(status.profile, True, status.describe())
            if status.state == ServerState.CRASHED:
                raise ActionFailed(f"{status.describe()}; last line: {status.log_tail[-1] if status.log_tail else ''}")
            await asyncio.sleep(1.0)
        raise ActionFailed("not ready in time")

    async def do_start(self, name: str) -> ServerNow:
        return await self._launch("start", name)

    async def do_switch(self, name: str) -> ServerNow:
        return await self._launch("switch", name)

    async def _launch(self, how: str, name: str) -> ServerNow:
        launch = self.lifecycle.start if how == "start" else self.lifecycle.switch
        try:
            await launch(self.session.profiles().get(name), via=self.via)  # the lifecycle writes the events
        except Exception as e:  # noqa: BLE001 - a refused preflight, a broken profile, a lost link: the step fails with why
            raise ActionFailed(str(e)) from None
        return await self._ready()

    async def do_stop(self) -> ServerNow:
        """Idempotent, as a runbook step should be: nothing running is already the state the step asks for."""
        try:
            current = await self.lifecycle.poll()
            if not current.state.running:
                return ServerNow(None, False, f"no server running ({current.describe()})")
            report = await self.lifecycle.stop(via=self.via)  # the lifecycle writes it in the event log
        except Exception as e:  # noqa: BLE001 - as _launch: the step fails with why
            raise ActionFailed(str(e)) from None
        if not report.ok:
            raise ActionFailed(report.describe())
        return ServerNow(None, False, report.describe())

    async def do_sweep(self, *overrides: str) -> Swept:
        data = self.cfg.sweep.to_dict()
        for item in overrides:
            key, _, value = item.partition("=")
            if key in OPERATOR_ONLY and not (
                key == "prompts" and value in PROMPT_SETS
            ):  # a runbook is a file of the campaign's, not the operator's word
                raise ActionFailed(
                    f"a runbook may not set {key}: it would send {OPERATOR_ONLY[key]}; set it in pivot.toml's [sweep] if you mean it"
                )
            try:
                data[key] = (
                    [int(c) for c in value.split(",")]
                    if key == "levels"
                    else [float(r) for r in value.split(",")]
                    if key == "rates"
                    else _number(value)
                )
            except ValueError:
                raise ActionFailed(f"{key}={value}: expected a list of numbers, such as {key}=1,2,4") from None
        try:
            handle = await self.session.sweeps.start(SweepSettings.from_dict(data), via=self.via)
        except (RunError, RemoteError, ValueError) as e:
            raise ActionFailed(str(e)) from None
        await self._follow(handle)
        summary = handle.run.summary()
        if summary is None:
            raise ActionFailed(f"run {handle.run.name} has no completed level")
        return Swept(handle.run.name, summary)

    async def _follow(self, handle: SweepHandle) -> None:
        async for event in handle.events():
            if isinstance(event, LevelDone):
                failed = f" FAILED ({event.failed})" if event.failed else ""
                again = " (measured again: the sweep's drift)" if event.reference else ""
                self.say(f"    {level_name(event.c, event.rate is not None)}: {event.total_tok_s:.1f} tok/s{failed}{again}")
        if handle.end == "failed":
            raise ActionFailed(f"the sweep stopped: {handle.reason}")

    def _runs(self, a: str, b: str) -> tuple[Run, Run]:
        campaign = Campaign(self.cfg.campaign_dir)
        try:
            return campaign.resolve(a), campaign.resolve(b)
        except RunError as e:
            raise ActionFailed(str(e)) from None

    async def do_repeat_uncertain(
        self,
        name: str = "last",
        against: str | None = None,
        rounds: int = REPEAT_ROUNDS,
        go_on: Callable[[str], Awaitable[bool]] | None = None,
    ) -> Repeated:
        """Measure again, on the running server, the levels of run `name` that its comparison with `against` (its
        counterpart by default) cannot tell, with as many requests as the comparison estimates would settle them;
        compare again and repeat until every level settles or `rounds` is reached, and say which. `go_on` is asked
        before each round after the first (each is estimated again, and can be far longer than the one agreed to)."""
        campaign = Campaign(self.cfg.campaign_dir)
        try:
            run = campaign.resolve(name)
            other = campaign.resolve(against) if against else counterpart(run, campaign.runs())
        except RunError as e:
            raise ActionFailed(str(e)) from None
        if other is None:
            raise ActionFailed(f"nothing to compare {run.name} with: name the run to hold it against")
        wanted: dict[int, int] = {}  # the levels the round before measured
        for round_ in range(1, rounds + 1):
            cmp = await asyncio.to_thread(self._compare, other, run)
            plan = repeat_plan(cmp.repeats, "b")  # what this run alone settles
            if plan.refusal is not None:
                return Repeated(run.name, other.name, round_ - 1, (), refusal=refusal_text(plan, {"a": other.name, "b": run.name}))
            before, wanted, requests = wanted, plan.wanted, plan.requests
            with naming(run.rates):
                levels = listed(sorted(wanted))
            asked = requests_each(requests, len(wanted))
            if round_ > 1 and go_on is not None:  # the question says what the last round found first
                took = repeat_time(cmp.levels, "b", sorted(wanted), requests)
                settled = sorted(set(before) - set(wanted))
                with naming(run.rates):
                    found = (f"round {round_ - 1} settled {listed(settled)}; " if settled else "") + (f"{recommendation(cmp)}\n")
                if not await go_on(f"{found}round {round_} of {rounds}: {levels} of {run.name}, {asked}, {took}"):
                    return Repeated(run.name, other.name, round_ - 1, tuple(sorted(wanted)), stopped=True)
            self.say(
                f"  round {round_} of {rounds}: repeating {levels} of {run.name}, "
                f"{asked} (what the comparison estimates would settle {_them(wanted)}"
                + (f", capped at {REPEAT_CAP}" if requests < plan.estimate else "")
                + ")"
            )
            try:
                settings = dataclasses.replace(run.settings, requests=requests)  # run.toml's, read once by the run
                handle = await self.session.sweeps.start(settings, run=run, how="repeat", levels=sorted(wanted), via=self.via)
            except (RunError, RemoteError, ValueError) as e:
                raise ActionFailed(str(e)) from None
            await self._follow(handle)
            if handle.end != "done":
                raise ActionFailed(f"the repeat {handle.end}: {handle.reason or 'by the operator'}")
        cmp = await asyncio.to_thread(self._compare, other, run)
        return Repeated(run.name, other.name, rounds, tuple(r.c for r in cmp.repeats))

    def _compare(self, a: Run, b: Run) -> Comparison:
        try:
            return compare(a, b, self.cfg.margin, slo=Slo.read(self.cfg.compare.slo))
        except (ValueError, RunError) as e:
            raise ActionFailed(str(e)) from None

    async def do_compare(self, a: str, b: str) -> Compared:
        return Compared(await asyncio.to_thread(self._compare, *self._runs(a, b)))  # Parquet reads: off the console's loop

    async def do_write_profile(self, a: str = "previous", b: str = "last") -> Written:
        """The adaptive profile the comparison of A and B recommends, written as `w` writes it."""
        from console.actions.adaptive import write_adaptive_profile
        from console.sweep.adaptive import NoAdaptiveProfile, plan

        cmp = await asyncio.to_thread(self._compare, *self._runs(a, b))
        try:
            adaptive = await asyncio.to_thread(plan, self.cfg, cmp)
        except NoAdaptiveProfile as e:
            raise ActionFailed(str(e)) from None
        try:
            return Written(await write_adaptive_profile(self.session, adaptive))
        except (OSError, RemoteError) as e:
            raise ActionFailed(f"cannot write {adaptive.name}: {e}") from None

    async def do_verify(self, name: str = "last") -> Verified:
        """Whether the run of an adaptive profile pivot wrote kept each of its parents' gains, level by level."""
        run = self._runs(name, name)[0]
        said = await asyncio.to_thread(verification, run, lambda x, y: compare(x, y, self.cfg.margin, verify=False).levels)
        if said is None:
            raise ActionFailed(f"{run.name} is not a run of an adaptive profile pivot wrote: nothing to verify")
        return Verified(said)

    async def do_refine(self, a: str = "previous", b: str = "last") -> Compared:
        first, second = self._runs(a, b)
        actions = self

        class Driver:
            async def switch_to(self, run: Run) -> None:
                await actions._launch("switch", run.profile)

            async def measure(self, run: Run, level: int) -> None:
                settings = run.settings
                try:
                    handle = await actions.session.sweeps.start(settings, run=run, how="refine", levels=[level], via=actions.via)
                except (RunError, RemoteError) as e:
                    raise ActionFailed(str(e)) from None
                await actions._follow(handle)

            def running(self) -> str | None:
                return actions.lifecycle.status.profile if actions.lifecycle.status.state.running else None

        await self.lifecycle.poll()
        try:
            result = await refine(first, second, Driver(), say=self.say, margin=self.session.config.margin)
        except ValueError as e:
            raise ActionFailed(str(e)) from None
        return Compared(result)

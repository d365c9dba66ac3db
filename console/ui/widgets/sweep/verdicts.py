"""The Sweep pane's comparison and what it offers: the runs compared (in a thread: every run's state, two runs' tables
and their intervals), `w` writes the adaptive profile it recommends, `u` repeats its uncertain levels, `f` refines
where the decision changes; and `t` tunes the running drafting profile's draft length (pivot tune).
console/ui/widgets/sweep/pane.py is the pane itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.reactive import var

from console.actions.adaptive import write_adaptive_profile
from console.campaign import Campaign
from console.remote.errors import RemoteError
from console.settings import level_name
from console.sweep.adaptive import NoAdaptiveProfile, plan, spec_host
from console.sweep.analysis.compare import Comparison, bracket, compare, counterpart
from console.sweep.analysis.repeats import repeat_plan
from console.sweep.analysis.sides import Side
from console.sweep.analysis.slo import Slo
from console.sweep.runs.store import Run, RunError, label, list_runs
from console.sweep.words.repeats import plan_lines, refusal_text
from console.ui.screens.confirm import confirmed
from console.ui.widgets.pane import Pane
from console.ui.widgets.sweep.comparison import ComparisonView
from console.ui.widgets.sweep.levels import LevelTable

if TYPE_CHECKING:  # imported when used: the console's first screen does not wait for the campaign's verbs
    from console.actions.campaign import CampaignActions


class ComparisonActions(Pane):
    """The comparison part of the Sweep pane, which composes a ComparisonView and a LevelTable."""

    start_sweep: Callable[..., Any]  # the Sweep pane's: measure levels again on the running server
    handle: Any  # the Sweep pane's: the sweep in progress, if any
    comparing = var(False, bindings=True, toggle_class="-comparing")  # the comparison takes the level table's place

    @property
    def comparison(self) -> Comparison | None:
        return self.query_one(ComparisonView).comparison

    @property
    def comparison_text(self) -> Text | None:
        return self.query_one(ComparisonView).text

    def _cannot_act(self, what: str) -> bool:
        """Whether w, u and f must wait: they act on the comparison on screen, and not while a sweep runs; said."""
        if self.handle is not None:
            self.notify(f"{what} waits for the sweep's end", severity="warning", timeout=5)
            return True
        if not self.comparing or self.comparison is None:
            self.notify(f"{what} acts on the comparison on screen: c shows one first", severity="warning", timeout=5)
            return True
        return False

    @work(group="adaptive", exit_on_error=False)
    async def action_write_adaptive(self) -> None:
        cmp = self.comparison
        if self._cannot_act("w (an adaptive profile)") or cmp is None:
            return
        try:
            adaptive = await asyncio.to_thread(plan, self.session.config, cmp)  # it reads the profiles: off the loop
        except NoAdaptiveProfile as e:
            self.notify(str(e), title="Adaptive profile", severity="warning", timeout=12)
            return
        host = spec_host(self.session.config, cmp) if adaptive.engine.adaptive_file else None
        path = adaptive.profile_path
        lines = [
            adaptive.summary(),
            # the file's name, then its directory on a line of its own: a whole path broke mid-name at the dialog's edge
            f"will be written to {path.name}" + (" (replacing the one there)" if path.exists() else "") + f" in\n{path.parent}/",
            (
                f"its config will be uploaded to {host.name}"
                if host is not None
                else f"the schedule goes inside {adaptive.engine.adaptive_flag}"
                if not adaptive.engine.adaptive_file
                else "no host configured: nothing is uploaded"
            ),
            *[f"warning: {w}" for w in adaptive.warnings],
        ]

        if not await confirmed(self.app, f"Write profile {adaptive.name}?", [Text(line) for line in lines], "Write"):
            self.notify("no profile written", timeout=4)
            return
        try:
            written = await write_adaptive_profile(self.session, adaptive)
        except (RemoteError, OSError) as e:
            self.notify(f"no profile written: {e}", title="Adaptive profile", severity="error", timeout=12)
            return
        self.notify(written.describe(paths=False), title="Adaptive profile", timeout=12)

    def action_repeat_uncertain(self) -> None:
        """Re-measure, on the running server's run, the levels the comparison on screen cannot decide, compared again
        after each round until they settle or the rounds run out (console/actions/campaign.py do_repeat_uncertain)."""
        cmp = self.comparison
        lifecycle = self.session.lifecycle
        if self._cannot_act("u (repeat the uncertain levels)") or cmp is None or self._busy():
            return
        if lifecycle is None:
            self._no_server()
            return
        running = lifecycle.status.profile
        side: Side | None = "b" if cmp.b.profile == running else "a" if cmp.a.profile == running else None
        plan = repeat_plan(cmp.repeats, side)
        if plan.refusal is not None or plan.side is None:
            self.notify(refusal_text(plan, cmp.names, {"a": cmp.a.profile, "b": cmp.b.profile}), severity="warning", timeout=8)
            return
        run, other = (cmp.a, cmp.b) if plan.side == "a" else (cmp.b, cmp.a)
        self.repeat_uncertain(run, other, (cmp.a, cmp.b), plan_lines(plan, cmp.levels, label(run)))

    @work(exclusive=True, group="refine", exit_on_error=False)
    async def repeat_uncertain(self, run: Run, other: Run, shown: tuple[Run, Run], what: list[str]) -> None:
        from console.actions.campaign import ActionFailed

        if not await confirmed(self.app, "Measure the undecided levels again?", [Text(line) for line in what], "Repeat"):
            return
        try:
            said = await self._actions().do_repeat_uncertain(run.name, other.name, go_on=self._another_round)  # each round shows here
        except ActionFailed as e:
            self.notify(f"the repeat stopped: {e}", severity="error", timeout=12)
        else:
            self.notify(str(said), title="Repeat uncertain", timeout=15)
        self.show_comparison(*shown)

    def _no_server(self) -> None:
        """u and f measure on a server this console manages: without one (local mode) they say so."""
        self.notify("nothing to measure on: this console manages no server (pivot --host NAME)", severity="warning", timeout=6)

    async def _another_round(self, question: str) -> bool:
        lines = [line[:1].upper() + line[1:] for line in question.split("\n")]  # what the last round found, then the next
        return await confirmed(self.app, "Measure another round?", [Text(line) for line in lines], "Repeat")

    def _busy(self) -> bool:
        """A repeat or a refinement runs (switching servers, maybe): another would cut it short, so it is said."""
        if any(w.group == "refine" and w.is_running for w in self.workers):
            self.notify("a repeat or a refinement is running: wait for its end", severity="warning", timeout=6)
            return True
        return False

    def _actions(self) -> CampaignActions:
        from console.actions.campaign import CampaignActions

        async def never(question: str) -> bool:
            return False  # a repeat or a refinement kills nothing

        return CampaignActions(self.session, confirm_kill=never, say=lambda line: self.notify(line.strip(), timeout=6), via="console")

    @work(group="ask", exit_on_error=False)
    async def action_refine(self) -> None:
        cmp = self.comparison
        if self._cannot_act("f (refine the crossover)") or cmp is None or self._busy():
            return
        if self.session.lifecycle is None:
            self._no_server()
            return
        found = bracket(cmp)
        if found is None or found.located:
            self.notify(
                "nothing to refine: "
                + (
                    "no change of decision between two levels"
                    if found is None
                    else f"{found.what} is located ({level_name(found.lo, cmp.rates)}..{level_name(found.hi, cmp.rates)})"
                ),
                timeout=6,
            )
            return
        lines = [
            f"{found.what} lies between {level_name(found.lo, cmp.rates)} and {level_name(found.hi, cmp.rates)}: "
            f"{level_name(found.middle, cmp.rates)} is measured on both "
            f"runs, and more levels until it is located within ±15 %",
            f"the server is switched between {cmp.a.profile} and {cmp.b.profile} as often as it takes",
        ]

        if await confirmed(self.app, "Refine the crossover?", [Text(line) for line in lines], "Refine"):
            self.refine(cmp.a, cmp.b)

    @work(exclusive=True, group="refine", exit_on_error=False)
    async def refine(self, a: Run, b: Run) -> None:
        from console.actions.campaign import ActionFailed

        try:
            await self._actions().do_refine(a.name, b.name)  # each measurement shows here through the session's sweeps
        except ActionFailed as e:
            self.notify(f"refinement stopped: {e}", severity="error", timeout=12)
        self.show_comparison(a, b)

    @work(group="ask", exit_on_error=False)
    async def action_tune(self) -> None:
        """`pivot tune` of the profile the server runs, with its defaults (console/actions/tune.py): the plan is asked
        about first; each step shows here, the sweeps in this pane."""
        lifecycle = self.session.lifecycle
        if lifecycle is None:
            self._no_server()
            return
        if self.handle is not None:
            self.notify("t (tune) waits for the sweep's end", severity="warning", timeout=5)
            return
        if self._busy():
            return
        status = await lifecycle.poll()
        if not status.state.running or status.profile is None:
            self.notify("t tunes the drafting profile the server runs: start one first", severity="warning", timeout=6)
            return
        self.tune(status.profile)

    @work(exclusive=True, group="refine", exit_on_error=False)
    async def tune(self, profile: str) -> None:
        from console.actions.campaign import ActionFailed
        from console.actions.tune import TuneOrder, Tuning

        async def asked(plan: str) -> bool:
            return await confirmed(self.app, f"Tune {profile}?", [Text(line) for line in plan.split("\n")], "Tune")

        try:
            said = await Tuning(self._actions(), TuneOrder(profile), confirm=asked).run()
        except ActionFailed as e:
            self.notify(f"tune stopped: {e}", severity="error", timeout=12)
            return
        self.notify(str(said), title="Tune", timeout=30)

    def action_compare(self) -> None:
        if self.comparing:
            self.hide_comparison()
            return
        shown = self.comparison
        self._compare_latest(None if shown is None else (shown.a.name, shown.b.name))

    # Comparisons are read and computed in a thread: every run's state, two runs' tables and their intervals.
    @work(thread=True, exclusive=True, group="sweep-compare", exit_on_error=False)
    def _compare_latest(self, shown: tuple[str, str] | None) -> None:
        """The comparison last shown while no newer run measured anything (an adaptive profile's check against
        the baseline comes back, not the two newest runs); else the two newest runs."""
        campaign = Campaign(self.session.config.campaign_dir)
        measured = campaign.measured_runs()
        if shown is not None and measured and measured[-1].name in shown:
            try:
                self._compare_in_thread(*(campaign.resolve(name) for name in shown))
                return
            except RunError:
                pass  # one of them was deleted since
        pair = (measured[-2], measured[-1]) if len(measured) >= 2 else None
        if pair is None:
            self.app.call_from_thread(self.notify, "two runs with completed levels are needed to compare", severity="warning")
            return
        self._compare_in_thread(*pair)

    @work(thread=True, exclusive=True, group="sweep-compare", exit_on_error=False)
    def _compare_with_counterpart(self, run: Run) -> None:
        """After a sweep: the earlier run to hold it against (console/sweep/analysis/compare.py counterpart), if any."""
        if not run.has_measured_levels:
            return
        runs = list_runs(self.session.config.campaign_dir)
        other = counterpart(run, runs)
        if other is None:
            if any(r.name != run.name and r.profile != run.profile and r.has_measured_levels for r in runs):
                self.app.call_from_thread(
                    self.notify,
                    f"{run.name} is compared with no earlier run: none of another "
                    "profile measured the same thing (max_tokens, prompts, model, host, GPUs, …); "
                    "pivot compare --anyway compares two regardless",
                    timeout=10,
                )
            return
        kind = "the other kind (drafting or not)" if other.speculative != run.speculative else "another profile"
        self.app.call_from_thread(
            self.notify, f"compared with {label(other)}: the newest run of {kind} that measured the same thing", timeout=8
        )
        self._compare_in_thread(other, run)

    @work(thread=True, exclusive=True, group="sweep-compare", exit_on_error=False)
    def show_comparison(self, a: Run, b: Run) -> None:
        self._compare_in_thread(a, b)

    def _compare_in_thread(self, a: Run, b: Run) -> None:
        try:
            cmp = compare(a, b, self.session.config.margin, slo=Slo.read(self.session.config.compare.slo))
        except (ValueError, RunError) as e:
            self.app.call_from_thread(self.notify, str(e), severity="error")
            return
        self.app.call_from_thread(self._show_comparison, cmp)

    def hide_comparison(self) -> None:
        view = self.query_one(ComparisonView)
        had_focus = view.has_focus
        view.hide()
        self.comparing = False
        if had_focus:
            self.query_one(LevelTable).focus()

    def _show_comparison(self, cmp: Comparison) -> None:
        view = self.query_one(ComparisonView)
        view.show(cmp, keys=not self.readonly, measures=self.session.lifecycle is not None)
        if self.has_focus_within:
            view.focus()  # the level table it replaces had the focus
        self.comparing = True  # the comparison has the same levels: it takes the table's room

"""`pivot tune`: a drafting profile measured at several draft lengths (0: its server without drafting), the best length
for each level with its margin over the runner-up, and that choice written as the engine's own schedule by running
batch (console/engines/). A tuning session is one JSON record under the campaign's `tunes/`, written after each step,
so that an interrupted session goes on where it stopped; its runs are ordinary runs of the campaign.

The driving (servers, sweeps) is console/actions/tune.py; this module decides and records."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, ValidationError

from console.engines import Drafting, Engine, LengthSchedule, NoAdaptiveProfile, engine
from console.files import write_atomically
from console.sweep.analysis.compare import why_out
from console.sweep.analysis.drift import drift as drift_of
from console.sweep.analysis.intervals import MARGIN, Level, Verdict, estimate, judge
from console.sweep.analysis.repeats import repeats
from console.sweep.model import LevelDone
from console.sweep.runs.store import Run, RunError, open_run

TUNES = "tunes"  # under the campaign directory
NAME = re.compile(r"tune-[A-Za-z0-9._-]{1,160}")
UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_lengths(found: Drafting) -> list[int]:
    """What to try when the operator names no lengths: one step, the profile's own length, and twice it."""
    own = found.steps or 3
    return sorted({1, own, 2 * own})


def variant_name(profile: str, length: int) -> str:
    """The profile pivot writes for a length (0: the same server without drafting)."""
    return f"{profile}-draft{length}" if length else f"{profile}-nodraft"


def _file_stem(name: str) -> str:
    """A profile's name from a record (untrusted): it becomes a file name beside pivot.toml."""
    if not name or "/" in name or "\0" in name or name.startswith("."):
        raise ValueError(f"{name!r} is not a profile's name")
    return name


class TuneRecord(BaseModel):
    """One tuning session, as it stands."""

    name: Annotated[str, Field(pattern=NAME.pattern)]
    profile: Annotated[str, AfterValidator(_file_stem)]  # the drafting profile tuned
    kind: str  # its engine
    lengths: list[int]  # 0 first, then the draft lengths tried
    levels: list[int]
    settings: dict[str, Any]  # the [sweep] settings every run of the session takes, as it started
    variants: dict[int, Annotated[str, AfterValidator(_file_stem)]]  # length -> its profile (0: without drafting)
    runs: dict[int, str] = {}  # length -> its run
    repeated: bool = False  # the close levels were measured again
    tuned: Annotated[str, AfterValidator(_file_stem)] | None = None  # the profile written from the schedule
    verify_run: str | None = None
    finished: bool = False
    started: str = ""

    def path(self, campaign_dir: Path) -> Path:
        return campaign_dir / TUNES / f"{self.name}.json"

    def save(self, campaign_dir: Path) -> None:
        write_atomically(self.path(campaign_dir), self.model_dump_json(indent=1) + "\n")


def new_record(profile: str, kind: str, counterpart: str, lengths: list[int], settings: Mapping[str, Any]) -> TuneRecord:
    """settings: the sweep's, its levels among them."""
    now = datetime.now(UTC)
    variants = {0: counterpart} | {n: variant_name(profile, n) for n in lengths if n}
    return TuneRecord(
        name=f"tune-{UNSAFE.sub('_', profile)[:120]}-{now:%Y%m%d-%H%M%S}",
        profile=profile,
        kind=kind,
        lengths=[0, *sorted(n for n in set(lengths) if n)],
        levels=sorted(set(settings["levels"])),
        settings=dict(settings),
        variants=variants,
        started=now.isoformat(timespec="seconds"),
    )


def read_record(path: Path) -> TuneRecord:
    try:
        return TuneRecord.model_validate_json(path.read_bytes()[: 1 << 20])
    except (OSError, ValidationError, ValueError) as e:
        raise RunError(f"{path}: not a tuning session pivot wrote ({str(e).splitlines()[0]})") from None


def sessions(campaign_dir: Path) -> list[TuneRecord]:
    """The campaign's tuning sessions, oldest first; a file pivot cannot read is left out."""
    found = []
    directory = campaign_dir / TUNES
    for path in sorted(directory.glob("tune-*.json")) if directory.is_dir() else []:
        try:
            found.append(read_record(path))
        except RunError:
            continue
    return sorted(found, key=lambda r: r.started)


def find_session(campaign_dir: Path, name: str) -> TuneRecord:
    """A session by its name, or `last`."""
    if name == "last":
        if not (found := sessions(campaign_dir)):
            raise RunError(f"no tuning session in {campaign_dir / TUNES}")
        return found[-1]
    if not NAME.fullmatch(name):
        raise RunError(f"{name!r} is not a tuning session's name (tune-PROFILE-STAMP, or last)")
    return read_record(campaign_dir / TUNES / f"{name}.json")


def unfinished(campaign_dir: Path, profile: str, lengths: list[int], levels: list[int]) -> TuneRecord | None:
    """The newest unfinished session that tunes the same profile over the same lengths and levels: the one to go on."""
    wanted = ([0, *sorted(n for n in set(lengths) if n)], sorted(set(levels)))
    return next(
        (r for r in reversed(sessions(campaign_dir)) if r.profile == profile and not r.finished and (r.lengths, r.levels) == wanted),
        None,
    )


@dataclass(frozen=True)
class LevelChoice:
    """One level: each length's total throughput, the best length and the verdict of the runner-up (A) against it (B)."""

    c: int
    batch: int  # the running batch the engine routes it by
    tok_s: dict[int, float]
    best: int
    runner_up: int | None
    verdict: Verdict | None
    level: Level | None  # the two as compare.py holds a level: what settles it
    measured: LevelDone  # the best length's level

    @property
    def word(self) -> str:
        """clear (the best leads beyond the margin), alike (within it: either would do) or close (cannot tell)."""
        if self.verdict is None:
            return "clear"
        return "clear" if self.verdict.leader == "b" else "alike" if self.verdict.alike else "close"

    @property
    def margin_text(self) -> str:
        if self.runner_up is None or self.verdict is None or self.verdict.ratio is None:
            return "the only length measured"
        spread = f" ± {self.verdict.spread * 100:.0f} %" if self.verdict.spread else ""
        said = {"clear": "leads", "alike": "alike within the margin", "close": "cannot tell"}[self.word]
        return f"{(self.verdict.ratio - 1) * 100:+.0f} %{spread} over {length_text(self.runner_up)}: {said}"


def length_text(length: int) -> str:
    return f"draft {length}" if length else "no drafting"


def running_batch(c: int, run: Run) -> int:
    """The batch the engine routes a level of C in flight by: C (a closed loop refills a slot as soon as a request
    ends), or the most the server runs at once where it or its command line says that is fewer."""
    limits = [
        run.meta.server.max_running_requests if run.meta.server else None,
        engine(run.meta.kind).max_batch(run.meta.argv_or_words()),
    ]
    return min([c, *(n for n in limits if n)])


def choices(runs: dict[int, Run], margin: float = MARGIN) -> list[LevelChoice]:
    """For each level every length measured: the best by total throughput, against the runner-up, judged as a
    comparison judges a level (a failed or client-bound level left out; a lead must pass both runs' drift)."""
    by_length = {n: {lv.c: lv for lv in run.levels() if not why_out(lv)} for n, run in runs.items()}
    drifts = {n: d for n, run in runs.items() if (d := drift_of(run, margin)) is not None and d.amount}
    found = []
    for c in sorted({c for levels in by_length.values() for c in levels}):
        here = {n: levels[c] for n, levels in by_length.items() if c in levels and levels[c].total_tok_s}
        if not here:
            continue
        ranked = sorted(here, key=lambda n: (-here[n].total_tok_s, n))
        best = ranked[0]
        runner = ranked[1] if len(ranked) > 1 else None
        verdict = level = None
        if runner is not None:
            a, b = here[runner], here[best]
            drift = sum(drifts[n].at(here[n].total_tok_s) for n in (runner, best) if n in drifts)
            total = judge(estimate(a, "total"), estimate(b, "total"), margin=margin, drift=drift)
            # the choice is by total throughput alone (at one C, per-request speed follows it)
            verdict, level = total, Level(c, total, total, None, None, a, b)
        batches = [running_batch(c, runs[n]) for n in here]
        tok_s = {n: lv.total_tok_s for n, lv in here.items()}
        found.append(LevelChoice(c, max(batches), tok_s, best, runner, verdict, level, here[best]))
    return found


@dataclass(frozen=True)
class Again:
    """Levels of one length's run to measure again, and with how many requests."""

    length: int
    levels: tuple[int, ...]
    requests: int


def to_repeat(found: list[LevelChoice], cap: int) -> list[Again]:
    """The close levels' repeats, per length and request count, with the requests the comparison estimates would
    settle them (at least the level's own count again, at most `cap`): only the best length and its runner-up of a
    close level are measured again, never a clear one, nor one more requests cannot settle (it sits on the margin's
    edge, or the runs drifted)."""
    wanted: dict[tuple[int, int], set[int]] = {}
    for choice in found:
        if cap <= 0 or choice.word != "close" or choice.level is None or choice.runner_up is None:
            continue
        for r in repeats([choice.level]):  # its per-request verdict is its total one: the repeat is of total tok/s
            if r.more_requests is None:
                continue
            # an estimate from a few requests is itself rough: never fewer than the level had
            more = min(cap, max(r.more_requests, choice.level.a.requests, choice.level.b.requests))
            sides = {"a": choice.runner_up, "b": choice.best}
            for side in r.sides:
                wanted.setdefault((sides[side], more), set()).add(choice.c)
    return [Again(n, tuple(sorted(levels)), more) for (n, more), levels in sorted(wanted.items())]


def points(found: list[LevelChoice]) -> tuple[list[tuple[int, int]], list[str]]:
    """(running batch, best length) in order of batch; two levels at the same batch (the server held fewer than C)
    keep the first's choice, said."""
    kept: list[tuple[int, int]] = []
    said = []
    for choice in found:
        if kept and choice.batch <= kept[-1][0]:
            said.append(f"C={choice.c} ran the server at the same running batch as a lower level: the schedule follows the lower level")
            continue
        kept.append((choice.batch, choice.best))
    return kept, said


def schedule(engine: Engine, found: list[LevelChoice], argv: list[str], sizes: list[int] | None) -> LengthSchedule:
    """The engine's schedule of the best lengths; NoAdaptiveProfile when none is to be written (no length drafted best
    anywhere, or the engine has no such schedule)."""
    wanted, said = points(found)
    if not any(length for _, length in wanted):
        raise NoAdaptiveProfile("no schedule: drafting was best at no level (run the server without it)")
    written = engine.length_schedule(wanted, argv, sizes)
    return dataclasses.replace(written, warnings=(*said, *written.warnings))


def load_runs(campaign_dir: Path, record: TuneRecord) -> dict[int, Run]:
    return {n: open_run(campaign_dir, name) for n, name in record.runs.items()}


@dataclass(frozen=True)
class Check:
    """The tuned profile's run at one level, against the best length measured there."""

    c: int
    best: int
    runs_at: int  # the length the engine's schedule runs that level's batch at
    verdict: Verdict  # the best length's run (A) against the tuned one (B), total tok/s

    @property
    def matched(self) -> bool:
        return self.verdict.leader == "b" or self.verdict.alike

    @property
    def text(self) -> str:
        ratio = f"{(self.verdict.ratio - 1) * 100:+.0f} %" if self.verdict.ratio is not None else "?"
        if self.matched:
            return f"C={self.c}: matches {length_text(self.best)} ({ratio})"
        why = (
            f"the schedule runs {length_text(self.runs_at)} at its running batch (a tier boundary or padding)"
            if self.runs_at != self.best
            else f"it runs {length_text(self.best)} at batch {self.c} as measured: the batch moved as requests ended and "
            "began, or switching lengths costs the engine"
        )
        if self.verdict.leader == "a":
            return f"C={self.c}: {ratio} against {length_text(self.best)}, beyond the margin: {why}"
        return f"C={self.c}: cannot tell against {length_text(self.best)} ({ratio}): repeat it to know"


def verify(found: list[LevelChoice], tuned: Run, routes: dict[int, int], margin: float = MARGIN) -> list[Check]:
    levels = {lv.c: lv for lv in tuned.levels() if lv.measured}
    return [
        Check(
            choice.c,
            choice.best,
            routes.get(choice.batch, choice.best),
            judge(estimate(choice.measured, "total"), estimate(levels[choice.c], "total"), margin=margin),
        )
        for choice in found
        if choice.c in levels
    ]


def checks_summary(checks: list[Check]) -> str:
    matched = sum(c.matched for c in checks)
    short = sum(c.verdict.leader == "a" for c in checks)
    unsure = len(checks) - matched - short
    return (
        f"{matched} of {len(checks)} levels match the best measured length"
        + (f", {short} fall short" if short else "")
        + (f", {unsure} cannot be told" if unsure else "")
    )


@dataclass(frozen=True)
class Outcome:
    """What a session found: each level's choice, the schedule (or why none), and the tuned run's checks."""

    found: list[LevelChoice]
    schedule: LengthSchedule | None
    refusal: str | None
    checks: list[Check]


def outcome(record: TuneRecord, runs: dict[int, Run], tuned: Run | None, margin: float = MARGIN) -> Outcome:
    """From the session's runs (Parquet reads: call it off an event loop). The schedule is made from the longest
    length's run: its server's command line and the CUDA-graph sizes it reported."""
    found = choices(runs, margin)
    if not found:
        return Outcome([], None, "no level measured yet", [])
    drafting = runs[max(runs)]
    sizes = drafting.meta.server.cuda_graph_bs if drafting.meta.server else None
    try:
        written = schedule(engine(record.kind), found, drafting.meta.argv_or_words(), sizes)
    except NoAdaptiveProfile as e:
        return Outcome(found, None, str(e), [])
    checks = verify(found, tuned, written.routes, margin) if tuned is not None else []
    return Outcome(found, written, None, checks)

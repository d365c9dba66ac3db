"""A comparison's parts beside its verdicts, in words: the verification of an adaptive profile's run, the answer
under an SLO, the frontier, energy, the notes and the drift."""

from __future__ import annotations

from console.engines import engine
from console.sweep.analysis.drift import Drift
from console.sweep.analysis.energy import Energy
from console.sweep.analysis.frontier import Frontier
from console.sweep.analysis.intervals import POINT_SPREAD, Level
from console.sweep.analysis.notes import Acceptance, Counted, Drifted, Evidence, Gap, Lagging, Note, SyntheticText
from console.sweep.analysis.sides import SIDES, Side
from console.sweep.analysis.slo import Slo, SloAnswer
from console.sweep.analysis.verification import Verification
from console.sweep.model import Capacity
from console.sweep.words.verdicts import at, figures, undecided, where


def verification_text(v: Verification, aliases: dict[str, str] | None = None) -> str:
    """aliases: a short name for a run the words name (the pane's A and B), by its label."""
    run, base, spec = ((aliases or {}).get(x, x) for x in (v.run, v.base, v.spec))
    if v.error is not None:
        return f"{run} cannot be held against the runs it was written from: {v.error}"
    parts = []
    if v.kept_gain:
        parts.append(f"keeps the gain of {spec} at {where(v.kept_gain, v.levels)}")
    if v.matched:
        parts.append(f"{'matches' if v.alike else 'matches or beats'} {base} at {where(v.matched, v.levels)}")
    if v.unsure:
        parts.append(f"cannot tell at {where(v.unsure, v.levels)} (repeat those levels of {run})")
    said = f"{run} " + (", ".join(parts) if parts else "has no level in common with the runs it was written from")
    if v.short:
        said += "; falls short at " + "; ".join(
            f"{at(s.c)}: {spec if s.parent == 'spec' else base} leads it ({figures(s.verdict, 'tok/s')})" for s in v.short
        )
        said += engine(v.engine).adaptive_cost if v.engine else ""
    return said


def slo_text(ans: SloAnswer, names: dict[Side, str]) -> str:
    said = []
    for side in SIDES:
        served, blind = ans.served[side], ans.blind[side]
        if blind is not None:
            said.append(f"{names[side]} cannot say from {at(blind, True)} (a figure the SLO needs was not measured there)")
        if served is None:
            if blind is None:
                said.append(f"{names[side]} serves it at no measured level")
            continue
        gpu = f", {served.per_gpu:.1f} per GPU" if served.per_gpu is not None else ""
        said.append(f"{names[side]} up to {at(served.c, True)} at {served.tok_s:.1f} tok/s{gpu}")
    text = f"under {ans.slo}: " + "; ".join(said)
    if ans.choice == "either":
        return text + f": for this SLO either serves alike (within ±{ans.margin * 100:g} %)"
    return text + (f": for this SLO run {names[ans.choice]}" if ans.choice else "")


def capacities_text(found: dict[Side, Capacity], names: dict[Side, str]) -> str:
    """Which run serves more under the SLO both searched, and by how much: "capacity under TTFT p90 ≤ 500 ms: A C=8,
    B C=12 (each bracketed within 10 %): B serves 1.50× as much"."""
    a, b = found["a"], found["b"]
    if a.slo != b.slo or a.rates != b.rates:
        return f"capacity: {names['a']} searched under {Slo.parse(a.slo)}, {names['b']} under {Slo.parse(b.slo)}: not the same question"
    each = "; ".join(
        f"{names[side]} {at(cap.served) if cap.served is not None else 'no level'}" + (f" (not {at(cap.failed)})" if cap.failed else "")
        for side, cap in found.items()
    )
    said = f"capacity under {Slo.parse(a.slo)}: {each}"
    if a.served is None or b.served is None:
        return said
    unit = "requests per second" if a.rates else "users"
    pairs: tuple[tuple[Side, Side], ...] = (("a", "b"), ("b", "a"))
    for more, less in pairs:  # one meets it where the other does not: it serves more
        over, under = found[more], found[less]
        if over.served is not None and under.served and under.failed is not None and over.served >= under.failed:
            return said + f": {names[more]} serves more, about {over.served / under.served:.2f}× the {unit} of {names[less]}"
    return said + ": their brackets overlap, so neither is shown to serve more (a finer capacity_precision may tell)"


def frontier_text(f: Frontier, names: dict[Side, str]) -> str:
    unit = "total tok/s per GPU" if f.per_gpu else "total tok/s"
    if not f.spans:
        return f"frontier ({unit} against a user's tok/s): the two reach no user's speed in common"

    def at(x0: float, x1: float) -> str:
        return f"at {x0:.1f} tok/s a user" if x0 == x1 else f"at {x0:.1f}–{x1:.1f} tok/s a user"

    said = [
        f"{names[s.leader]} gives more {at(s.lo, s.hi)} (up to ×{s.most:.2f})" if s.leader else f"alike {at(s.lo, s.hi)}" for s in f.spans
    ]
    return f"frontier ({unit} against a user's tok/s, within ±{f.margin * 100:g} %): " + "; ".join(said)


def energy_line(e: Energy, levels: list[Level], names: dict[Side, str]) -> str:
    """Who spends less energy per output token where, in one line; or why it is not known."""
    if e.dark:
        return (
            f"energy per token: not known: {' and '.join(names[s] for s in e.dark)} read no GPU power (a host without "
            "nvidia-smi or power readings, a server across nodes or behind a URL)"
        )
    if not e.levels:
        return "energy per token: not known at any level both runs measured"
    first = next(lv for lv in levels if lv.c == e.levels[0])
    gpus = f" of {e.gpus} GPU(s)" if e.gpus else ""
    said = [f"J per output token{gpus}, A {first.a.joules_per_token:.2f} vs B {first.b.joules_per_token:.2f} at {at(first.c)}"]
    for side in ("b", "a"):
        if cs := e.less.get(side):
            said.append(f"{names[side]} spends less at {where(cs, e.levels)} (down to ×{e.most[side]:.2f})")
    verdicts = [(lv.c, lv.energy) for lv in levels if lv.energy is not None]
    return "energy: " + "; ".join(said) + undecided(verdicts, e.levels)


def drift_text(d: Drift, name: str) -> str:
    return f"{name} drifted at {at(d.c)}, measured again at the end: {figures(d.verdict, 'tok/s')}"


GAP_WORDS = {
    "client_cpu": ("its load generator's CPU", "{:.0%} of a core"),
    "load_avg": ("the client machine's load", "{:.1f}"),
    "host_load_avg": ("the server host's load", "{:.1f}"),
}


def gaps_text(gaps: list[Gap], names: dict[Side, str]) -> str:
    """Noise that is not the server's, where it differs between the runs, in one note."""
    parts = []
    for g in gaps:
        if g.what == "placement":
            parts.append(f"the load generator ran {g.a} in {names['a']} and {g.b} in {names['b']}")
        else:
            what, fmt = GAP_WORDS[g.what]
            parts.append(f"{what} peaked at {fmt.format(g.a)} in {names['a']} and {fmt.format(g.b)} in {names['b']}")
    return f"note: {'; '.join(parts)}"


def note_text(n: Note, names: dict[Side, str], margin: float, levels: list[int]) -> str:
    """One note (a Gap alone; gaps_text says them together)."""
    match n:
        case Acceptance(side=side, method=method, drafted_nothing=True, synthetic=synthetic):
            return (
                f"note: {names[side]} is set to draft ({method}), but its server drafted no token at any level (its own "
                "count of every request)" + ("; pivot's synthetic words give an n-gram draft nothing to match" if synthetic else "")
            )
        case Acceptance(side=side, method=method, per_level=()):
            return f"note: {names[side]} drafts ({method}) but its server reported no draft acceptance"
        case Acceptance(side=side, per_level=per_level):
            said = [
                f"{at(c)}: {rate:.0%} accepted"
                + (f", {share:.0%} of the output drafted" if share is not None else "")
                + (f", {length:.1f} tokens a step" if length is not None else "")
                for c, rate, length, share in per_level
            ]
            return f"acceptance: {names[side]}: " + "; ".join(said)
        case SyntheticText(sides=sides):
            who = " and ".join(names[side] for side in sides)
            return (
                f"note: {who} drafted on pivot's synthetic prompts, words made up per request, not text users send: a "
                'draft accepts what text repeats, so its gain there is not the one users get (measure with prompts = "humaneval" '
                "or a set of yours)"
            )
        case Gap():
            return gaps_text([n], names)
        case Counted(side=side, what=what, count=count):
            counted = (
                "usage missing: tokens counted from chunks or finish_reason"
                if what == "usage_missing"
                else "ended early (finish_reason stop): their tokens count"
            )
            return f"note: {names[side]}: {count} request(s) {counted}"
        case Lagging(side=side, levels=lagging, of=of, why=why):
            return f"note: {names[side]}: latencies not measured at {where(lagging, of)} ({why})"
        case Evidence(side=side, kind="aggregates", source=source):
            return (
                f"note: {names[side]} is aggregates imported from {source or 'another tool'}, without per-request data: each "
                f"figure it gave without an interval is taken as ±{POINT_SPREAD * 100:g} %, so a lead must exceed that"
            )
        case Evidence(side=side, kind="records", source=source):
            return (
                f"note: {names[side]} was imported from {source or 'another tool'} with its per-request records: its "
                "intervals are pivot's own"
            )
        case Evidence(side=side):
            return f"note: {names[side]} has levels under two requests: their numbers carry no interval and decide nothing"
        case Drifted(side=side, drift=d, held=held):
            return (
                f"note: {drift_text(d, names[side])}: the server or the machine changed while it ran. A lead must exceed "
                f"the ±{margin * 100:g} % margin and that drift: ±{d.amount * 100:.1f} % at {at(d.c)}, its {d.tok_s:.1f} tok/s "
                "as a share of each other level's throughput"
                + (f"; the drift alone leaves {where(held, levels)} undecided" if held else "")
            )
    raise AssertionError(n)


def notes_text(notes: tuple[Note, ...], names: dict[Side, str], margin: float, levels: list[int]) -> list[str]:
    """The notes in order, the gaps between the runs said together where the first of them stands."""
    lines, gaps = [], [n for n in notes if isinstance(n, Gap)]
    for n in notes:
        if isinstance(n, Gap):
            if n is gaps[0]:
                lines.append(gaps_text(gaps, names))
            continue
        lines.append(note_text(n, names, margin, levels))
    return lines

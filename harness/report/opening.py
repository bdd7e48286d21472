"""The report's opening (issue 42): per window and kind of session, the answer a design review
needs, decided on sessions. The same sentences go to the terminal (``ctxsim sweep``, ``ctxsim
report``), Markdown marks removed, so the terminal and the report agree.

For each strategy the grid tunes, at each window, on each population of sessions (a synthetic
population, a folder of real logs):

* **the setting to ship**, named only where it holds across sessions (harness/sweep/sessions.py
  ``holds``: the saving's interval over sessions above 0, cheaper on most sessions, retention not
  worse beyond noise), with its saving and retention difference (paired by session, 95% intervals
  over sessions), n sessions and n needs, the detection limit, on how many sessions it holds and
  what the sessions where it reverses have in common; a flag when a parameter sits on the grid's
  edge (the largest or smallest value tried: a value beyond it may be better); otherwise "keep the
  default", with the best candidate's evidence;
* **the front's knee**: on the cost–retention front of every configuration there, the point
  farthest from the line joining the front's ends (both axes scaled to their range): where paying
  more stops buying retention;
* **the peers at equal retention**: the cheapest other strategy whose retention is not worse than
  the shipped setting's beyond noise, and the cheapest other strategy of all with what it loses
  (needs at risk, the goal and the user's constraints kept, against the shipped setting's).
"""

from __future__ import annotations

import math
from typing import Any

from ctxsim.harness.report import formatting as fmt
from ctxsim.harness.report.content import Bullets, Context, Para, Section
from ctxsim.harness.sweep import sessions, tuning

# assumed: a bend smaller than this (in units of the front's own ranges) is no knee: retention then
# rises about in step with cost along the front
KNEE_MIN = 0.1


def _name(s: tuning.Setting) -> str:
    ch = ", ".join(f"{k}={fmt.value(v)}" for k, v in sorted(s.changed.items()))
    return f"`{s.label}" + (f" ({ch})`" if ch else "`")


def edge(a: tuning.Answer, s: tuning.Setting) -> list[str]:
    """The swept parameters of ``s`` at the largest or smallest value the grid tried."""
    out = []
    for p in a.swept:
        vals = sorted({x.params.get(p) for x in a.settings if isinstance(x.params.get(p), (int, float))
                       and not isinstance(x.params.get(p), bool)})
        v = s.params.get(p)
        if len(vals) < 2 or v is None or v == a.default.params.get(p):
            continue
        if v == vals[-1]:
            out.append(f"{p}={fmt.value(v)} is the largest value tried")
        elif v == vals[0]:
            out.append(f"{p}={fmt.value(v)} is the smallest value tried")
    return out


def knee(front: list[tuning.Setting]) -> tuple[tuning.Setting, bool] | None:
    """The point of the cost–retention front farthest from the chord between its ends (both axes
    scaled to the front's range: the Kneedle construction), and whether it lies above the chord
    (retention comes cheap before it, dear after it) or below (dear before, cheap after); None with
    fewer than three points."""
    pts = [s for s in front if not math.isnan(s.retention.est)]
    if len(pts) < 3:
        return None
    c0, c1 = pts[0].cost, pts[-1].cost
    r0, r1 = pts[0].retention.est, pts[-1].retention.est
    if c1 == c0 or r1 == r0:
        return None

    def dist(s: tuning.Setting) -> float:
        x, y = (s.cost - c0) / (c1 - c0), (s.retention.est - r0) / (r1 - r0)
        return y - x   # above the chord: more retention than the cost's share of the way
    best = max(pts[1:-1], key=lambda s: abs(dist(s)))
    return (best, dist(best) > 0) if abs(dist(best)) >= KNEE_MIN else None


def _kept(s: tuning.Setting) -> str:
    r = s.retention
    if math.isnan(r.est):
        return "no need at risk"
    return f"{r.est:.0%} of needs kept"


def _part(s: tuning.Setting, what: str) -> tuple[float, int]:
    k = sum(getattr(v, f"{what}_kept") for v in s.needs.values())
    n = sum(getattr(v, f"{what}_n") for v in s.needs.values())
    return k, n


def _loses(peer: tuning.Setting, tuned: tuning.Setting, whom: str) -> str:
    """What ``peer`` keeps of the goal and the constraints at risk, beside ``tuned``."""
    bits = []
    for what in ("goal", "constraints"):
        kp, n = _part(peer, what)
        kt, _ = _part(tuned, what)
        if n:
            bits.append(f"{what} kept {kp:.0f}/{n} ({whom}: {kt:.0f}/{n})")
    return ", ".join(bits)


def peer_lines(a: tuning.Answer, tuned: tuning.Setting, sets: list[tuning.Setting]) -> list[str]:
    """The cheapest peer at equal retention, and the cheapest peer of all with what it loses."""
    peers = [s for s in sets if s.window == a.window and s.group == a.group and s.label != a.label and s.completed]
    if not peers:
        return []
    out = []
    equal = []
    for p in peers:
        d = tuning.retention_difference(p, tuned)
        if tuning.not_worse(d):
            equal.append((p, d))
    if equal:
        p, d = min(equal, key=lambda x: x[0].cost)
        c = tuning.comparison(p, tuned)
        sv = c.saving if c is not None else sessions.Interval(1 - p.cost / tuned.cost if tuned.cost else math.nan)
        out.append(f"cheapest peer at equal retention: {_name(p)}, {fmt.money(p.cost)} per session, "
                   f"{sessions.more_or_less(sv)} than {'the shipped setting' if a.cheapest else 'the default'}; needs "
                   f"kept {sessions.points(sessions.Interval(*d))}")
    else:
        out.append("no peer keeps as many needs at risk as the shipped setting (each is worse beyond noise)")
    cheapest = min(peers, key=lambda s: s.cost)
    if not equal or cheapest is not min(equal, key=lambda x: x[0].cost)[0]:
        d = sessions.Interval(*tuning.retention_difference(cheapest, tuned))
        whom = "the shipped setting" if a.cheapest else "the default"
        loses = _loses(cheapest, tuned, whom)
        keeps = f"it loses {sessions.loss(d)} of needs kept" if d.est < 0 else f"needs kept {sessions.points(d)}"
        out.append(f"cheapest peer of all: {_name(cheapest)}, {fmt.money(cheapest.cost)} per session; {keeps}"
                   + (f"; {loses}" if loses else ""))
    failed = sorted({s.label for s in sets if s.window == a.window and s.group == a.group and not s.completed
                     and s.label != a.label})
    if failed:
        out.append(f"failed a session (never compared by cost): {', '.join(failed)}")
    return out


def answer_lines(a: tuning.Answer, sets: list[tuning.Setting]) -> list[str]:
    """The opening's sentences for one strategy, window and population (Markdown)."""
    n = a.default.n_sessions
    head = f"**Window {a.window:,}, {a.group} ({n} session{'s' if n != 1 else ''})**, {a.label}: "
    lines = []
    if not a.default.completed:
        return [head + "no setting can be named: its default failed a session here (" + (a.note or "") + ")."]
    if a.cheapest is not None and a.cheapest.comparison is None:   # one session: nothing holds across sessions
        p = a.cheapest
        s = p.setting
        lines.append(head + f"one session only, so no setting can be shown to hold across sessions (run a population: "
                     f"a folder of sessions, or population:PRESET:N). On this session the cheapest setting at equal "
                     f"retention is {_name(s)}: {fmt.money(s.cost)} against {fmt.money(a.default.cost)} at the default "
                     f"(saving {fmt.money(p.saving[0])}, {p.saving_pct[0]:.1%}), needs kept "
                     f"{sessions.points(sessions.Interval(*p.retention_diff))} (interval over its own needs).")
    elif a.cheapest is not None:
        p = a.cheapest
        s = p.setting
        line = (head + f"ship {_name(s)}: {fmt.money(s.cost)} per session against {fmt.money(a.default.cost)} at the "
                f"default, saving {sessions.pct(sessions.Interval(*p.saving_pct))}; needs kept "
                f"{sessions.points(sessions.Interval(*p.retention_diff))} against the default; "
                f"{sessions.evidence(p.comparison, s.traits, s.names)}")
        ed = edge(a, s)
        if ed:
            line += f". **On the grid's edge**: {'; '.join(ed)}: a value beyond it may be better"
        lines.append(line + ".")
    else:
        cands = [s for s in a.settings if s.completed and s is not a.default and s.cost < a.default.cost]
        line = head + f"keep the default ({fmt.money(a.default.cost)} per session, {_kept(a.default)})"
        if cands:
            best = min(cands, key=lambda s: s.cost)
            c = tuning.comparison(best, a.default)
            d = tuning.retention_difference(best, a.default)
            if c is not None:
                why = []
                if not c.saving.has_ci or c.saving.lo <= 0:
                    why.append("its saving's interval over sessions reaches 0")
                if 2 * c.cheaper_on <= c.n:
                    why.append(f"it is cheaper on only {c.cheaper_on} of {c.n} sessions")
                if c.retention.has_ci and c.retention.hi < 0:
                    why.append("it keeps fewer needs beyond noise")
                line += (f": no setting holds across sessions. The cheapest, {_name(best)}, saves "
                         f"{sessions.pct(c.saving)} with needs kept {sessions.points(c.retention)}, but "
                         f"{' and '.join(why) or 'not beyond noise'}; {sessions.evidence(c, best.traits, best.names)}")
            else:
                line += (f": the cheapest setting, {_name(best)}, saves {fmt.money(a.default.cost - best.cost)} with "
                         f"needs kept {sessions.points(sessions.Interval(*d))} on one session: no interval over sessions")
        else:
            line += ": no setting is cheaper"
        lines.append(line + ".")
    here = [s for s in sets if s.window == a.window and s.group == a.group]
    fr = tuning.front(here)
    k = knee(fr)
    if k is not None:
        s, above = k
        lines.append(f"The front's knee: {_name(s)}, {fmt.money(s.cost)} per session, {_kept(s)} ("
                     + ("up to it retention comes cheap, past it each point of retention costs more" if above else
                        "up to it retention comes dear, past it it comes cheap") + f"; the front has {len(fr)} points).")
    elif len(fr) >= 2:
        lines.append(f"The front ({len(fr)} point{'s' if len(fr) != 1 else ''}, {_name(fr[0])} to {_name(fr[-1])}) "
                     "has no clear knee: " + ("too few points to bend" if len(fr) < 3 else
                                                "retention rises about in step with cost along it") + ".")
    tuned = a.cheapest.setting if a.cheapest else a.default
    peers = peer_lines(a, tuned, sets)
    if peers:
        lines.append("Peers (" + ("the shipped setting" if a.cheapest else "against the default") + "): "
                     + "; ".join(peers) + ".")
    return lines


def section(ctx: Context) -> Section | None:
    if not ctx.answers:
        return None
    content: list[Any] = [Para(
        "Per window and population of sessions, decided on sessions: a setting is named only where it holds "
        "across them (its saving's 95% interval over sessions above 0, cheaper on most sessions, needs at risk kept "
        "not worse beyond noise); differences are paired by session, intervals a bootstrap over sessions, needs "
        "counted once whatever the seeds. The detection limit is the smallest loss of needs kept these sessions "
        f"could have shown. Cost: `{ctx.cost_column}`.")]
    for a in ctx.answers:
        content.append(Bullets(answer_lines(a, ctx.sets)))
    return Section("The answer", content)


def terminal(sets: list[tuning.Setting], answers: list[tuning.Answer]) -> list[str]:
    """The opening for the terminal: the same sentences, Markdown marks removed."""
    return [line.replace("**", "").replace("`", "") for a in answers for line in answer_lines(a, sets)]


# --- a comparison of strategies over a population (``ctxsim compare FOLDER``, its report) -----------

def reference(here: list[tuning.Setting], target: float) -> tuning.Setting | None:
    """Whom every configuration is compared with: the cheapest that completed every session with
    needs kept ≥ ``target``, else the cheapest that completed."""
    done = sorted((s for s in here if s.completed), key=lambda s: s.cost)
    ok = [s for s in done if not math.isnan(s.retention.est) and s.retention.est >= target]
    return (ok or done or [None])[0]


def population_lines(sets: list[tuning.Setting], target: float) -> list[str]:
    """Per window and population with two sessions or more: each configuration against the reference,
    paired by session (the saving, needs kept, n, detection limit, where it reverses)."""
    out = []
    keys = sorted({(s.window, s.group) for s in sets})
    for w, g in keys:
        here = [s for s in sets if s.window == w and s.group == g]
        ref = reference(here, target)
        if ref is None or ref.n_sessions < 2:
            continue
        n_needs = sum(v.n for v in ref.needs.values())
        out.append(f"**Window {w:,}, {g}** ({ref.n_sessions} sessions, {n_needs} needs at risk): against "
                   f"{_name(ref)} ({fmt.money(ref.cost)} per session, {_kept(ref)}; "
                   + ("the cheapest that completed every session with needs kept ≥ "
                      f"{target:g})" if not math.isnan(ref.retention.est) and ref.retention.est >= target
                      else f"the cheapest that completed every session; none keeps ≥ {target:g})"))
        for s in sorted(here, key=lambda x: (not x.completed, x.cost)):
            if s is ref:
                continue
            c = tuning.comparison(s, ref)
            if not s.completed:
                out.append(f"- {_name(s)} failed a session: its cost is spend until it failed, never compared")
                continue
            if c is None:
                continue
            out.append(f"- {_name(s)}: {fmt.money(s.cost)} per session, {sessions.more_or_less(c.saving)}; needs kept "
                       f"{sessions.points(c.retention)} "
                       f"({_verdict(c.retention)}); {sessions.evidence(c, s.traits, s.names)}")
    return out


def _verdict(i: sessions.Interval) -> str:
    if math.isnan(i.est):
        return "no need at risk"
    if not i.has_ci:
        return "no interval"
    return {0: "within noise", 1: "more kept", -1: "fewer kept"}[sessions.direction(i)]


def population_section(ctx: Context) -> Section | None:
    """For a report without a tuned strategy (``ctxsim compare FOLDER --report``): the same lines as
    the terminal's."""
    if ctx.answers:
        return None
    lines = population_lines(ctx.sets, ctx.target)
    if not lines:
        return None
    body: list[Any] = [Para(
        "Every configuration against the reference on the same sessions, paired by session; 95% intervals are a "
        "bootstrap over sessions; needs at risk counted once whatever the seeds. The detection limit is the "
        f"smallest loss of needs kept these sessions could have shown. Cost: `{ctx.cost_column}`.")]
    for line in lines:
        if line.startswith("- "):
            if not isinstance(body[-1], Bullets):
                body.append(Bullets([]))
            body[-1].items.append(line[2:])
        else:
            body.append(Para(line))
    return Section("Across sessions", body)

"""A population of synthetic sessions (issue 42): each session's shape drawn from what real logs
show, each with its own seed, so that an answer rests on many sessions rather than one.

What varies from session to session, and from what it is drawn (:data:`FITTED`, fitted by
:func:`fit` on imported traces of real Claude Code sessions that compacted at a 200k window):

* **where the window turns over**: how many times the session fills the window (its turnovers,
  from the real compaction counts) and how fast its context grows per model call (the real
  sessions' mean growth per call, in the window's tokens). The session's content sizes (tool
  results, tool inputs, assistant text) are scaled together so the generator's growth per call is
  the one drawn (:data:`GROWTH_BY_SCALE`, measured on the generator), and its number of calls is
  what that growth needs to turn the window over that many times and go a part of the way to the
  next turnover;
* **user turns**: the session's median calls per user turn (real sessions' own medians);
* **tool mix**: a Dirichlet draw around the real mix, as concentrated as the real sessions are.

The rest (gaps, probes, facts, content) is the preset's, drawn with the session's own seed. Session
``i`` of a population with seed ``s`` is generated with seed ``s + i`` and its shape drawn from
``(SALT, s + i)``: the first 30 sessions of a population of 60 are the population of 30.

The real sessions start at a median 29,700 tokens (system prompt, tools, instruction files); the
generator's start is ~2,300 (its system prompt is what the preset asks for). The calls a session
needs are counted from the generator's start, so the turnovers drawn are the turnovers it has.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ctxsim.harness.synth.distributions import LogNormal

SALT = 42_042   # the shape's random stream (any fixed number: it keeps shapes apart from the generator's draws)

# The fit of :func:`fit` on the development population (../shared/population/dev.tsv: 209 real Claude
# Code sessions from 14 public repositories at the commits it names; imported traces, ctxsim import
# claude-code): the 83 sessions recorded at a 200,000-token window with at least one compaction.
# Printed by `python -m ctxsim.harness.synth.population fit /work/base/traces`.
FIT_SOURCE = ("83 real Claude Code sessions that compacted at a 200k window, from the development population "
              "(../shared/population/dev.tsv, 14 public repositories at the commits it names)")


@dataclass(frozen=True)
class Shape:
    """Per-session distributions of a population, with where they were fitted."""

    growth: LogNormal                  # window tokens added per main call (the session's mean)
    calls_per_turn: LogNormal          # the session's median model calls per user turn
    turnovers: dict[int, int]          # sessions by how many times their window turned over
    tool_mix: dict[str, float]         # the mean share of each tool kind
    concentration: float               # Dirichlet concentration of a session's mix around tool_mix
    post_turnover: float               # context tokens right after a turnover (median)
    sessions: int
    source: str
    calls: LogNormal | None = None     # the real sessions' calls (a check on the draw, not drawn)


FITTED = Shape(
    growth=LogNormal(median=2079.1, p90=4610.3, lo=300.0, hi=12_000.0),
    calls_per_turn=LogNormal(median=4.5, p90=18.0, lo=1.0, hi=60.0),
    turnovers={1: 65, 2: 11, 3: 5, 6: 2},
    tool_mix={"bash": 0.473, "edit": 0.219, "glob": 0.030, "grep": 0.050, "read": 0.220, "task": 0.006, "web": 0.003},
    concentration=13.2,
    post_turnover=41_322.0,
    sessions=83,
    source=FIT_SOURCE,
    calls=LogNormal(median=79.0, p90=182.6),
)

# The generator's growth per main call (tokens, cl100k at scale 1.0) when every content size is
# scaled by the key: the long-200k preset at 200 calls, seeds 11-13, append_only at a 1M window
# (mean of the three). Between keys: linear; beyond the last: its slope.
GROWTH_BY_SCALE = {0.5: 503.0, 1.0: 771.0, 2.0: 1371.0, 3.0: 1918.0, 4.0: 2438.0, 6.0: 2683.0}
MAX_CALLS = 4_000   # assumed: a longer session is cut here (a replay's time grows with it; none of the real ones reaches 600)
MAX_TURNOVERS_1M = 3   # assumed: at a 1M window, more turnovers would need sessions far beyond MAX_CALLS
from ctxsim.harness.synth.recurrence import RESERVE_TOKENS as RESERVE  # noqa: E402  (the window turns over at window - 33,000)

START_TOKENS = 2_300   # the generator's context at its first call (measured, the presets' system prompt)


def scale_for(growth: float) -> float:
    """The content scale that gives the generator ``growth`` tokens per call (inverse of
    :data:`GROWTH_BY_SCALE`)."""
    xs = sorted(GROWTH_BY_SCALE)
    ys = [GROWTH_BY_SCALE[x] for x in xs]
    if growth <= ys[0]:
        return xs[0] * growth / ys[0]
    if growth >= ys[-1]:
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        return xs[-1] + (growth - ys[-1]) / slope
    return float(np.interp(growth, ys, xs))


@dataclass(frozen=True)
class Session:
    """One drawn session: its seed and the preset overrides that give it its shape."""

    index: int
    seed: int
    calls: int
    turnovers: int
    growth: float          # tokens per call drawn (the window's tokens)
    calls_per_turn: float
    tool_mix: dict[str, float] = field(default_factory=dict)
    scale: float = 1.0

    def overrides(self, base) -> list[str]:
        """``--set`` overrides of the preset ``base`` (a SynthConfig) that give this shape."""
        sets = [f"calls={self.calls}", f"calls_per_turn.median={self.calls_per_turn:.3f}",
                f"calls_per_turn.p90={self.calls_per_turn * base.calls_per_turn.p90 / base.calls_per_turn.median:.3f}"]
        sets += [f"tool_mix.{k}={v:.5f}" for k, v in sorted(self.tool_mix.items())]
        m = self.scale
        for name in ("result_chars", "input_chars"):
            for k, ln in getattr(base, name).items():
                sets += [f"{name}.{k}.median={ln.median * m:.1f}", f"{name}.{k}.p90={ln.p90 * m:.1f}"]
                if ln.hi is not None:
                    sets.append(f"{name}.{k}.hi={ln.hi * max(m, 1.0):.1f}")
        t = base.text_chars
        sets += [f"text_chars.median={t.median * m:.1f}", f"text_chars.p90={t.p90 * m:.1f}"]
        if t.hi is not None:
            sets.append(f"text_chars.hi={t.hi * max(m, 1.0):.1f}")
        return sets


def draw(n: int, seed: int, window: int, shape: Shape = FITTED, min_turnovers: int | None = None) -> list[Session]:
    """``n`` session shapes for a ``window``: at a 1M window (or any above 200k) every session turns
    the window over at least twice (``min_turnovers``, default 2 there and 1 below), at most
    :data:`MAX_TURNOVERS_1M` times."""
    if n < 1:
        raise ValueError(f"a population needs at least one session, not {n}")
    big = window > 200_000
    lo = min_turnovers if min_turnovers is not None else (2 if big else 1)
    ks = {k: c for k, c in shape.turnovers.items() if k >= lo and (not big or k <= MAX_TURNOVERS_1M)}
    if not ks:
        ks = {lo: 1}
    names, p = zip(*sorted(ks.items()), strict=True)
    probs = np.array(p, float) / sum(p)
    kinds = sorted(shape.tool_mix)
    alpha = np.array([shape.tool_mix[k] for k in kinds]) * shape.concentration
    line = window - RESERVE
    out = []
    for i in range(n):
        s = seed + i
        rng = np.random.default_rng([SALT, s])
        k = int(rng.choice(names, p=probs))
        g = float(shape.growth.sample(rng))
        cpt = float(shape.calls_per_turn.sample(rng))
        mix = rng.dirichlet(np.maximum(alpha, 1e-3))
        u = float(rng.uniform(0.1, 0.9))   # how far into the next cycle the session goes on
        tokens = (line - START_TOKENS) + (k - 1 + u) * max(line - shape.post_turnover, 1.0)
        calls = int(min(MAX_CALLS, math.ceil(tokens / g)))
        out.append(Session(i, s, calls, k, g, cpt, {kk: float(x) for kk, x in zip(kinds, mix, strict=True)},
                           scale_for(g)))
    return out


DEFAULT_WINDOW = 200_000


def file_name(preset: str, s: Session) -> str:
    return f"{Path(preset).stem}-s{s.seed}.jsonl"


def _write_one(args: tuple[str, Session, str, int, tuple[str, ...]]) -> str:
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.synth import generate, load_preset

    preset, s, folder, window, overrides = args
    base = load_preset(preset, list(overrides))
    t = generate(load_preset(preset, [*overrides, *s.overrides(base)]), s.seed)
    t.header.meta["population"] = {"preset": base.name, "window": window, "session": s.index, "seed": s.seed,
                                   "turnovers": s.turnovers, "growth_per_call": round(s.growth, 1),
                                   "calls_per_turn": round(s.calls_per_turn, 2), "scale": round(s.scale, 3)}
    dest = Path(folder) / file_name(preset, s)
    tr.write(t, dest)
    return str(dest)


def write_sessions(preset: str, sessions: Sequence[Session], folder: str | Path, window: int,
                   overrides: Sequence[str] = (), workers: int = 1) -> list[Path]:
    """Generate and write ``sessions`` (``folder/<preset>-s<seed>.jsonl``) on ``workers`` processes."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    jobs = [(preset, s, str(folder), window, tuple(overrides)) for s in sessions]
    if workers <= 1 or len(jobs) <= 1:
        return [Path(_write_one(j)) for j in jobs]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    order = sorted(range(len(jobs)), key=lambda i: -jobs[i][1].calls)   # the longest first
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as ex:
        done = dict(zip(order, ex.map(_write_one, [jobs[i] for i in order]), strict=True))
    return [Path(done[i]) for i in range(len(jobs))]


def generate_population(preset: str, n: int, seed: int, out_dir: str | Path, window: int | None = None,
                        overrides: Sequence[str] = (), workers: int = 1) -> list[tuple[Path, Session]]:
    """Write ``n`` sessions of ``preset`` drawn for ``window`` into ``out_dir`` (an existing file of
    the same name is reused: generation is deterministic)."""
    w = window or DEFAULT_WINDOW
    out = Path(out_dir)
    sessions = draw(n, seed, w)
    missing = [s for s in sessions if not (out / file_name(preset, s)).exists()]
    write_sessions(preset, missing, out, w, overrides, workers)
    return [(out / file_name(preset, s), s) for s in sessions]


# --- the fit ------------------------------------------------------------------------------------------

def _kind(name: str) -> str:
    from ctxsim.harness.synth.fit import CLAUDE_KIND

    k = CLAUDE_KIND.get(name, "bash")
    return k if k in FITTED.tool_mix else "bash"   # todo and other tools fold into bash, as the presets do


@dataclass
class SessionFigures:
    calls: int
    growth: float
    calls_per_turn: float
    turnovers: int
    post: list[float]
    mix: Counter


def figures(trace) -> SessionFigures | None:
    """One imported session's shape (main conversation only; None without recorded usage)."""
    from ctxsim.harness.model import trace as tr

    ctx: list[int] = []
    per_turn: list[int] = []
    turns_calls = 0
    after: set[int] = set()
    post: list[float] = []
    mix: Counter = Counter()
    for e in trace.events:
        if (getattr(e, "meta", None) or {}).get("subagent"):
            continue
        if isinstance(e, tr.UserEvent):
            if turns_calls:
                per_turn.append(turns_calls)
            turns_calls = 0
        elif isinstance(e, tr.AssistantEvent):
            if e.usage is None:
                return None
            if len(ctx) in after:
                post.append(e.usage.context_tokens)
            ctx.append(e.usage.context_tokens)
            turns_calls += 1
            mix.update(_kind(b.name) for b in e.content if b.type == "tool_use")
        elif isinstance(e, tr.CompactEvent):
            after.add(len(ctx))
    if turns_calls:
        per_turn.append(turns_calls)
    if len(ctx) < 2:
        return None
    grow = sum(b - a for i, (a, b) in enumerate(zip(ctx, ctx[1:])) if i + 1 not in after and b >= a)
    return SessionFigures(len(ctx), grow / len(ctx), float(np.median(per_turn)) if per_turn else float(len(ctx)),
                          len(after), post, mix)


def _lognormal(xs: Sequence[float], lo: float = 0.0, hi: float | None = None) -> LogNormal:
    a = np.asarray(xs, float)
    return LogNormal(median=float(np.median(a)), p90=float(np.quantile(a, 0.9)), lo=lo, hi=hi)


def fit(folder: str | Path, window: int = 200_000) -> Shape:
    """:class:`Shape` from a folder of imported traces: the sessions recorded at ``window`` that
    compacted at least once."""
    from ctxsim.harness.model import trace as tr

    got = []
    for f in sorted(Path(folder).rglob("*.jsonl")):
        t = tr.load(f)
        rec = t.header.recorded
        if rec is None or rec.window != window:
            continue
        fig = figures(t)
        if fig is not None and fig.turnovers >= 1:
            got.append(fig)
    if not got:
        raise ValueError(f"{folder}: no imported session compacted at a {window:,}-token window")
    mixes = []
    for g in got:
        n = sum(g.mix.values())
        if n >= 30:   # enough tool calls that a session's own mix is not mostly sampling noise
            mixes.append(np.array([g.mix[k] / n for k in sorted(FITTED.tool_mix)]))
    total = sum((g.mix for g in got), Counter())
    mean = {k: total[k] / max(1, sum(total.values())) for k in sorted(FITTED.tool_mix)}
    m = np.array([mean[k] for k in sorted(mean)])
    conc = FITTED.concentration
    if len(mixes) >= 5:
        var = np.var(np.vstack(mixes), axis=0, ddof=1)
        ok = (var > 0) & (m > 0.02)
        conc = float(np.median(m[ok] * (1 - m[ok]) / var[ok] - 1)) if ok.any() else conc
    posts = [p for g in got for p in g.post]
    return Shape(growth=_lognormal([g.growth for g in got], 300.0, 12_000.0),
                 calls_per_turn=_lognormal([g.calls_per_turn for g in got], 1.0, 60.0),
                 turnovers=dict(sorted(Counter(g.turnovers for g in got).items())), tool_mix=mean,
                 concentration=round(conc, 1), post_turnover=float(np.median(posts)) if posts else FITTED.post_turnover,
                 sessions=len(got), source=f"{len(got)} sessions of {folder} compacted at {window:,}",
                 calls=_lognormal([g.calls for g in got]))


def main(argv: list[str] | None = None) -> int:
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "fit":
        print("usage: python -m ctxsim.harness.synth.population fit FOLDER_OF_IMPORTED_TRACES", file=sys.stderr)
        return 2
    s = fit(args[1])
    for name in ("growth", "calls_per_turn", "calls"):
        ln = getattr(s, name)
        print(f"{name}: median {ln.median:.1f}, p90 {ln.p90:.1f}")
    print(f"turnovers: {s.turnovers}")
    print(f"tool_mix: {', '.join(f'{k} {v:.3f}' for k, v in s.tool_mix.items())}; concentration {s.concentration}")
    print(f"post_turnover: {s.post_turnover:.0f}; sessions: {s.sessions}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

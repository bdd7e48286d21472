"""How far back what a call uses entered the session, and when it was last seen: one measure for real
and synthetic traces, so the synthetic ones can be fitted to the real ones.

A *use* is a model call and an item it needs. For each use, :func:`distances` finds the item's
occurrences in the session's main context before that call (user messages, assistant calls, tool
results; sub-agent spans that ran in their own context are left out) and measures, in true tokens
(cl100k, the engine's tokenizer) and in model calls:

* **first entered**: from the end of the event where the item first occurred to the start of the
  using call;
* **last seen**: from the end of the last event before the use that holds it;
* calls: how many model calls see the occurrence before the use, the using call included (1: it
  occurred in the result the using call is the first to see).

Uses come from two sources:

* :func:`item_uses` (real traces): at each model call, the distinctive items in its text and tool
  inputs (paths, identifiers with an underscore or an inner capital, ticket ids like ``ABC-123``,
  hex ids of 7+ digits; at least :data:`MIN_ITEM_CHARS` characters) whose first occurrence in the
  session is in a user message or a tool result (what the agent took from outside, not what it
  made up);
* :func:`probe_uses` (traces with probes, e.g. synthetic ones): each probe's needed facts at the
  call the probe precedes, the item being the fact's text.

**At risk** (issue 26; the same definition as the retention headline's): a use is at risk at a
window when a *turnover point* lies between where its item was last seen and the using call. The
turnover points are the recorded compactions of an imported log, each new session (not a resume),
and each point where the context accumulated since the previous turnover point (the fixed prefix,
a compaction's summary, then each main-context event's tokens, scaled by the log's recorded
``token_scale``) passes the window's compaction threshold ``window − RESERVE_TOKENS``
(:func:`turnovers`). :func:`risk_table` gives, per last-seen distance bucket, the share of uses in
the bucket and the at-risk share within it, for a 200k and a 1M window: what the synthetic presets
are fitted to.

``python -m ctxsim.harness.synth.recurrence [REAL_DIR] [PRESET ...]`` prints the figures of the long
Claude Code logs in ``../shared/traces/real`` (each, and pooled) and of the presets' probes (seed 0):
the table in ``traces/README.md``; then the at-risk table, real against each preset. The generator's ``probe_age`` is the pooled real first-entered
log-normal (median and p90) this prints.
"""

from __future__ import annotations

import bisect
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth.reneed import RENEED_DATA, Reneed, load_reneed  # noqa: F401 (the fitted distances, measured here)

MIN_ITEM_CHARS = 6
ITEM = re.compile(r"(?:[\w.\-]+/)+[\w.\-]+"                                     # paths
                  r"|[A-Za-z_][A-Za-z0-9_]*(?:_[A-Za-z0-9]+|[a-z][A-Z])[A-Za-z0-9_]*"  # snake_case / camelCase
                  r"|\b[A-Z][A-Z0-9]+-\d+\b"                                   # ticket ids
                  r"|\b[0-9a-f]{7,40}\b")                                      # hashes
_KEY = re.compile(r'"[\w\-]+":')
MIN_CALLS = 30   # real logs shorter than this say little about distances (the bundled short ones: 1, 4, 12 calls)
FAR_TOKENS = (40_000, 100_000)
# What main() prints for the real logs, pooled (4 Claude Code sessions of 47-217 calls; tests check
# these against the logs when they are present). The generator's probe_age and probe_age_unseen are
# the first-entered and last-seen log-normals through these medians and 90th percentiles.
# (n 2014 -> 2169 when the importer put back codemie 624a4a58's @-mentioned design document, a file
# the prompt sent whole that the log keeps only as a path)
REAL_REFERENCE = {"n": 2169,
                  "first_tokens": {"median": 30_864.0, "p90": 99_603.0},
                  "last_tokens": {"median": 1_595.0, "p90": 15_082.200000000013},
                  "first_calls": {"median": 22.0, "p90": 88.0}, "last_calls": {"median": 3.0, "p90": 15.0}}


@dataclass(frozen=True)
class Stream:
    """The main-context content of a trace: per event its kind, text, token span and call index."""

    kinds: list[str]        # "user" | "assistant" | "result"
    texts: list[str]
    start: list[int]        # tokens before the event
    end: list[int]          # tokens up to the end of the event
    calls: list[int]        # index of the first model call that sees the event
    index: dict[int, int]   # trace event index -> stream index (content events of the main context)


def stream(trace: tr.Trace, count=None) -> Stream:
    if count is None:
        from ctxsim.harness.provider.tokenizer import get_tokenizer

        count = get_tokenizer().count
    kinds, texts, start, end, calls, index = [], [], [], [], [], {}
    pos = call = depth = 0
    for i, e in enumerate(trace.events):
        if isinstance(e, tr.SubtaskStart):
            depth += bool(e.isolated or depth)
            continue
        if isinstance(e, tr.SubtaskEnd):
            depth = max(0, depth - 1)
            continue
        if depth or not isinstance(e, tr.CONTENT_EVENTS):
            continue
        text = tr.content_text(e)
        n = count(text)
        index[i] = len(kinds)
        kinds.append("assistant" if isinstance(e, tr.AssistantEvent) else "user" if isinstance(e, tr.UserEvent) else "result")
        texts.append(text)
        start.append(pos)
        pos += n
        end.append(pos)
        calls.append(call)
        call += isinstance(e, tr.AssistantEvent)
    return Stream(kinds, texts, start, end, calls, index)


RESERVE_TOKENS = 33_000  # window − 20,000 − 13,000: Claude Code auto-compact (reported, peers.md); N-COMP-1/2
WINDOWS = (200_000, 1_000_000)   # the two windows the presets are built for (long-200k, long-1m)
RISK_BINS = (2_000, 10_000, 50_000, 100_000)   # last-seen distance buckets, tokens (assumed: round numbers
                                               # around the real median 1.6k and p90 15k)


@dataclass(frozen=True)
class Distance:
    item: str
    category: str
    first_tokens: int
    last_tokens: int
    first_calls: int
    last_calls: int
    use_start: int = 0   # stream tokens before the using call (where the use is, for turnovers)


class _Finder:
    """Occurrences of items in the stream (event indices), by one scan per distinct item."""

    def __init__(self, s: Stream) -> None:
        self.blob = "\x00".join(s.texts)
        self.offsets = []
        off = 0
        for t in s.texts:
            self.offsets.append(off)
            off += len(t) + 1
        self.cache: dict[str, list[int]] = {}

    def events_with(self, item: str) -> list[int]:
        got = self.cache.get(item)
        if got is None:
            got = []
            i = self.blob.find(item)
            while i >= 0:
                ev = bisect.bisect_right(self.offsets, i) - 1
                if not got or got[-1] != ev:
                    got.append(ev)
                nxt = self.offsets[ev + 1] if ev + 1 < len(self.offsets) else len(self.blob)
                i = self.blob.find(item, nxt)
            self.cache[item] = got
        return got


def distances(s: Stream, uses: list[tuple[int, str, str]], first_from: tuple[str, ...] | None = None) -> list[Distance]:
    """One :class:`Distance` per use ``(stream index of the using call, item, category)`` whose
    item occurred before it; with ``first_from``, only items whose first occurrence is in an event
    of those kinds (uses of anything else are skipped)."""
    find = _Finder(s)
    out = []
    for at, item, cat in uses:
        evs = find.events_with(item)
        k = bisect.bisect_left(evs, at)
        if k == 0:
            continue
        first, last = evs[0], evs[k - 1]
        if first_from is not None and s.kinds[first] not in first_from:
            continue
        c = s.calls[at]
        out.append(Distance(item, cat, s.start[at] - s.end[first], s.start[at] - s.end[last],
                            c - _seen(s, first) + 1, c - _seen(s, last) + 1, s.start[at]))
    return out


def _seen(s: Stream, ev: int) -> int:
    """The first call that sees event ``ev``: the call itself for an assistant event's successor."""
    return s.calls[ev] + (1 if s.kinds[ev] == "assistant" else 0)


def item_uses(s: Stream) -> list[tuple[int, str, str]]:
    """The distinctive items each model call uses (see the module docstring)."""
    out = []
    for i, k in enumerate(s.kinds):
        if k != "assistant":
            continue
        text = _KEY.sub(" ", s.texts[i])   # tool input keys ("file_path":) are the tool's, not items
        for it in sorted({m.group(0) for m in ITEM.finditer(text) if len(m.group(0)) >= MIN_ITEM_CHARS}):
            out.append((i, it, "item"))
    return out


def probe_uses(trace: tr.Trace, s: Stream) -> list[tuple[int, str, str]]:
    """Each probe's needed facts, used at the model call the probe precedes."""
    facts = trace.facts()
    out = []
    pending: list[tr.ProbeEvent] = []
    for i, e in enumerate(trace.events):
        if isinstance(e, tr.ProbeEvent):
            pending.append(e)
        elif isinstance(e, tr.AssistantEvent) and pending:
            at = s.index.get(i)
            if at is not None:
                for p in pending:
                    out += [(at, facts[f].text, facts[f].category) for f in p.needs]
            pending = []
    return out


def turnovers(trace: tr.Trace, s: Stream, window: int, count=None, reserve: int = RESERVE_TOKENS) -> list[int]:
    """Stream token positions where the window turns over (see the module docstring), in order."""
    if count is None:
        from ctxsim.harness.provider.tokenizer import get_tokenizer

        count = get_tokenizer().count
    h = trace.header
    scale = h.recorded.token_scale if h.recorded is not None and h.recorded.token_scale else 1.0
    tools = "\n".join(f"{t.name}\n{t.description}\n{json.dumps(t.input_schema)}" for t in h.tools)
    prefix = h.prefix_tokens + (count(h.system) + (count(tools) if tools else 0)) * scale
    threshold = max(1, window - reserve)
    out: list[int] = []
    acc, pos, depth = prefix, 0, 0
    for i, e in enumerate(trace.events):
        if isinstance(e, tr.SubtaskStart):
            depth += bool(e.isolated or depth)
            continue
        if isinstance(e, tr.SubtaskEnd):
            depth = max(0, depth - 1)
            continue
        if depth:
            continue
        if isinstance(e, tr.CompactEvent) or (isinstance(e, tr.SessionStart) and not e.resume and pos):
            if not out or out[-1] != pos:   # a compaction right where the count turned over: one point
                out.append(pos)
            acc = prefix + (count(e.summary) * scale if isinstance(e, tr.CompactEvent) and e.summary else 0)
            continue
        k = s.index.get(i)
        if k is None:
            continue
        pos = s.end[k]
        acc += (s.end[k] - s.start[k]) * scale
        if acc > threshold:
            out.append(pos)
            acc = prefix
    return out


def at_risk(d: Distance, points: list[int]) -> bool:
    """A turnover point between where ``d``'s item was last seen and its use."""
    last = d.use_start - d.last_tokens
    k = bisect.bisect_left(points, last)
    return k < len(points) and points[k] <= d.use_start


def across(d: Distance, points: list[int]) -> bool:
    """``d``'s item entered before the latest turnover point preceding its use: a need that reaches
    back across the window's turnover, whether or not it was looked at again since."""
    k = bisect.bisect_right(points, d.use_start) - 1
    return k >= 0 and d.use_start - d.first_tokens <= points[k]


def across_row(ds: list[tuple[Distance, bool, list[int]]]) -> dict:
    """Of the uses after at least one turnover (:func:`with_risk` rows): how many reach back across
    it, how many are at risk."""
    after = [(d, r, pts) for d, r, pts in ds if pts and pts[0] <= d.use_start]
    n = len(after)
    k = sum(across(d, pts) for d, _, pts in after)
    risk = sum(r for _, r, _ in after)
    return {"after": n, "across": k, "across_share": k / n if n else 0.0, "at_risk": risk,
            "risk_share": risk / n if n else 0.0}


def risk_rows(ds: list[tuple[Distance, bool, list[int]]], bins: tuple[int, ...] = RISK_BINS) -> list[dict]:
    """Per last-seen distance bucket: uses ``n``, their share of all, and how many are at risk."""
    edges = (0, *bins)
    total = len(ds)
    rows = []
    for b, lo in enumerate(edges):
        hi = edges[b + 1] if b + 1 < len(edges) else None
        inside = [r for d, r, *_ in ds if d.last_tokens >= lo and (hi is None or d.last_tokens < hi)]
        rows.append({"lo": lo, "hi": hi, "n": len(inside), "share": len(inside) / total if total else 0.0,
                     "at_risk": sum(inside), "risk_share": sum(inside) / len(inside) if inside else 0.0})
    k = sum(r for _, r, *_ in ds)
    rows.append({"lo": 0, "hi": None, "n": total, "share": 1.0, "at_risk": k, "risk_share": k / total if total else 0.0})
    return rows


def with_risk(trace: tr.Trace, s: Stream, ds: list[Distance], window: int) -> list[tuple[Distance, bool, list[int]]]:
    """Each use, whether it is at risk at ``window``, and the trace's turnover points."""
    points = turnovers(trace, s, window)
    return [(d, at_risk(d, points), points) for d in ds]


def summary(ds: list[Distance]) -> dict:
    """Median, p90 and far shares of the two distances (tokens and calls)."""
    if not ds:
        return {"n": 0}
    ft = np.array([d.first_tokens for d in ds], dtype=float)
    lt = np.array([d.last_tokens for d in ds], dtype=float)
    fc = np.array([d.first_calls for d in ds], dtype=float)
    lc = np.array([d.last_calls for d in ds], dtype=float)
    q = lambda a, p: float(np.quantile(a, p))  # noqa: E731
    return {
        "n": len(ds),
        "first_tokens": {"median": q(ft, 0.5), "p90": q(ft, 0.9), "over_40k": float((ft > FAR_TOKENS[0]).mean())},
        "last_tokens": {"median": q(lt, 0.5), "p90": q(lt, 0.9), "over_40k": float((lt > FAR_TOKENS[0]).mean()),
                        "over_100k": float((lt > FAR_TOKENS[1]).mean())},
        "first_calls": {"median": q(fc, 0.5), "p90": q(fc, 0.9)},
        "last_calls": {"median": q(lc, 0.5), "p90": q(lc, 0.9)},
    }


def real_logs(real_dir: Path) -> list[Path]:
    return sorted(p for p in (Path(real_dir) / "claude-code").glob("*/*.jsonl"))


def real_distances(real_dir: Path, windows: tuple[int, ...] = ()) -> dict[str, list[Distance]]:
    """Item distances of each real Claude Code log with at least :data:`MIN_CALLS` model calls;
    with ``windows``, each log's uses with their at-risk flags per window in :data:`REAL_RISK`."""
    from ctxsim.harness.importers import import_file

    out = {}
    for p in real_logs(real_dir):
        t = import_file("claude-code", p).trace
        if t.calls < MIN_CALLS:
            continue
        s = stream(t)
        out[p.stem] = distances(s, item_uses(s), first_from=("user", "result"))
        for w in windows:
            REAL_RISK.setdefault(w, []).extend(with_risk(t, s, out[p.stem], w))
    return out


REAL_RISK: dict[int, list[tuple[Distance, bool, list[int]]]] = {}   # filled by real_distances(windows=...)


def _bucket(r: dict) -> str:
    if r["hi"] is None and r["lo"] == 0:
        return "all"
    return f"{r['lo'] // 1000}k–{r['hi'] // 1000}k" if r["hi"] is not None else f"≥ {r['lo'] // 1000}k"


def risk_table(real: dict[int, list], synth: dict[str, dict[int, list]]) -> list[str]:
    """Markdown: per window and last-seen bucket, real vs each synthetic preset: share of uses in the
    bucket, and at-risk share within it (k/n)."""
    lines = []
    for w in sorted(real):
        names = ["real, pooled", *synth]
        lines.append(f"\nAt risk at a {w // 1000:,}k window (turnover: recorded compactions, sessions, and every "
                     f"{(w - RESERVE_TOKENS) // 1000:,}k tokens of context)\n")
        lines.append("| last seen | " + " | ".join(f"{n}: share of uses | at risk" for n in names) + " |")
        lines.append("|---|" + "---|---|" * len(names))
        tables = [risk_rows(real[w])] + [risk_rows(synth[n].get(w, [])) for n in synth]
        for b in range(len(tables[0])):
            cells = []
            for t in tables:
                r = t[b]
                cells.append(f"{r['share']:.1%} (n {r['n']}) | {r['risk_share']:.1%} ({r['at_risk']}/{r['n']})")
            lines.append(f"| {_bucket(tables[0][b])} | " + " | ".join(cells) + " |")
    return lines


def synthetic_distances(trace: tr.Trace) -> list[Distance]:
    s = stream(trace)
    return distances(s, probe_uses(trace, s))


def _row(name: str, sm: dict) -> str:
    if not sm.get("n"):
        return f"| {name} | 0 | | | | | | | | |"
    f, la, fc, lc = sm["first_tokens"], sm["last_tokens"], sm["first_calls"], sm["last_calls"]
    return (f"| {name} | {sm['n']} | {f['median']:,.0f} | {f['p90']:,.0f} | {f['over_40k']:.0%} | {fc['median']:.0f} | "
            f"{la['median']:,.0f} | {la['p90']:,.0f} | {la['over_40k']:.1%} | {lc['median']:.0f} |")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from ctxsim.harness.synth.fit import default_real_dir

    real = Path(argv[0]) if argv and not argv[0].isidentifier() and "/" in argv[0] else default_real_dir()
    presets = [a for a in argv if a != str(real) and "/" not in a] or ["long-200k"]
    print("| trace | uses | first entered: median tokens | p90 | > 40k | median calls | last seen: median tokens | "
          "p90 | > 40k | median calls |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    pooled: list[Distance] = []
    REAL_RISK.clear()
    for name, ds in real_distances(real, WINDOWS).items():
        pooled += ds
        print(_row(f"real {name}", summary(ds)))
    print(_row("real, pooled", summary(pooled)))
    from ctxsim.harness.synth import generate, load_preset

    synth_risk: dict[str, dict[int, list[tuple[Distance, bool, list[int]]]]] = {}
    for p in presets:
        t = generate(load_preset(p), 0)
        s = stream(t)
        ds = distances(s, probe_uses(t, s))
        print(_row(f"synth {p} (probes)", summary(ds)))
        print(_row(f"synth {p} (items)", summary(distances(s, item_uses(s), first_from=("user", "result")))))
        synth_risk[p] = {w: with_risk(t, s, ds, w) for w in WINDOWS}
    print("\n".join(risk_table(dict(REAL_RISK), synth_risk)))
    print("\nUses after a turnover: reaching back across it (the item entered before it) and at risk\n")
    print("| window | trace | uses after a turnover | reach back across it | at risk |\n|---|---|---|---|---|")
    for w in WINDOWS:
        for label, rows in (("real, pooled", REAL_RISK.get(w, [])),
                            *((f"synth {p}", synth_risk[p][w]) for p in presets)):
            r = across_row(rows)
            print(f"| {w // 1000:,}k | {label} | {r['after']} | {r['across_share']:.1%} ({r['across']}) | "
                  f"{r['risk_share']:.1%} ({r['at_risk']}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

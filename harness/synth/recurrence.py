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

``python -m harness.synth.recurrence [REAL_DIR] [PRESET ...]`` prints the figures of the long
Claude Code logs in ``../shared/traces/real`` (each, and pooled) and of the presets' probes (seed 0):
the table in ``traces/README.md``. The generator's ``probe_age`` is the pooled real first-entered
log-normal (median and p90) this prints.
"""

from __future__ import annotations

import bisect
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness import trace as tr

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
        from harness.provider.tokenizer import get_tokenizer

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
        text = tr._content_text(e)
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


@dataclass(frozen=True)
class Distance:
    item: str
    category: str
    first_tokens: int
    last_tokens: int
    first_calls: int
    last_calls: int


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
                            c - _seen(s, first) + 1, c - _seen(s, last) + 1))
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


def real_distances(real_dir: Path) -> dict[str, list[Distance]]:
    """Item distances of each real Claude Code log with at least :data:`MIN_CALLS` model calls."""
    from harness.importers import import_file

    out = {}
    for p in real_logs(real_dir):
        t = import_file("claude-code", p).trace
        if t.calls < MIN_CALLS:
            continue
        s = stream(t)
        out[p.stem] = distances(s, item_uses(s), first_from=("user", "result"))
    return out


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
    from harness.synth.fit import default_real_dir

    real = Path(argv[0]) if argv and not argv[0].isidentifier() and "/" in argv[0] else default_real_dir()
    presets = [a for a in argv if a != str(real) and "/" not in a] or ["long-200k"]
    print("| trace | uses | first entered: median tokens | p90 | > 40k | median calls | last seen: median tokens | "
          "p90 | > 40k | median calls |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    pooled: list[Distance] = []
    for name, ds in real_distances(real).items():
        pooled += ds
        print(_row(f"real {name}", summary(ds)))
    print(_row("real, pooled", summary(pooled)))
    from harness.synth import generate, load_preset

    for p in presets:
        t = generate(load_preset(p), 0)
        print(_row(f"synth {p} (probes)", summary(synthetic_distances(t))))
        s = stream(t)
        print(_row(f"synth {p} (items)", summary(distances(s, item_uses(s), first_from=("user", "result")))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The figures of a trace that ``traces/README.md``'s preset table shows, measured on the trace.

``python -m ctxsim.harness.synth.shape [PRESET ...]`` prints the table for the presets (seed 0): calls,
true tokens of all content (cl100k), facts, probes, gaps over 300 s between consecutive user and
assistant events, results over 50,000 characters (N-SPILL-1), calls whose results add up to over
200,000 characters (N-SPILL-2), sessions, subtask spans, duration; then the content checks (Read of
.py parses, Grep contains its pattern) and the probes' distances (median / p90 tokens, first
entered and last seen; :mod:`ctxsim.harness.synth.recurrence`).
"""

from __future__ import annotations

import sys

import numpy as np
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import checks
from ctxsim.harness.synth import recurrence as R


def shape(t: tr.Trace) -> dict:
    from ctxsim.harness.provider.tokenizer import get_tokenizer

    count = get_tokenizer().count
    ev = t.events
    content = [tr.content_text(e) for e in ev if isinstance(e, tr.CONTENT_EVENTS)]
    ts = [e.t for e in ev if isinstance(e, tr.AssistantEvent | tr.UserEvent)]
    big_calls = group = 0
    for e in ev:
        if isinstance(e, tr.AssistantEvent):
            big_calls += group > 200_000
            group = 0
        elif isinstance(e, tr.ToolResultEvent):
            group += len(e.content)
    big_calls += group > 200_000
    sm = R.summary(R.synthetic_distances(t))
    return {
        "calls": t.calls,
        "tokens": sum(count(x) for x in content),
        "facts": sum(isinstance(e, tr.FactEvent) for e in ev),
        "probes": sum(isinstance(e, tr.ProbeEvent) for e in ev),
        "gaps_over_300s": int((np.diff(ts) > 300).sum()) if len(ts) > 1 else 0,
        "results_over_50k": sum(isinstance(e, tr.ToolResultEvent) and len(e.content) > 50_000 for e in ev),
        "calls_over_200k": big_calls,
        "sessions": sum(isinstance(e, tr.SessionStart) for e in ev),
        "spans": sum(isinstance(e, tr.SubtaskStart) for e in ev),
        "hours": (ev[-1].t if ev else 0.0) / 3600,
        "read_parses": checks.read_parse_share(t),
        "grep_contains": checks.grep_contains_share(t),
        "distances": sm,
    }


def main(argv: list[str] | None = None) -> int:
    from ctxsim.harness.synth import generate, load_preset, preset_names

    names = (sys.argv[1:] if argv is None else argv) or preset_names()
    print("| preset | calls | tokens (cl100k, all content) | facts | probes | gaps > 300 s | results > 50k chars | "
          "calls with results > 200k chars | sessions | subtask spans | hours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for n in names:
        s = shape(generate(load_preset(n), 0))
        rows.append((n, s))
        print(f"| `{n}` | {s['calls']:,} | {s['tokens']:,} | {s['facts']} | {s['probes']} | {s['gaps_over_300s']} | "
              f"{s['results_over_50k']} | {s['calls_over_200k']} | {s['sessions'] or '–'} | {s['spans']} | {s['hours']:.1f} |")
    print("\n| preset | Read of .py parses | Grep contains its pattern | first entered: median / p90 tokens | "
          "last seen: median / p90 tokens |")
    print("|---|---|---|---|---|")
    for n, s in rows:
        (ro, rn), (go, gn), d = s["read_parses"], s["grep_contains"], s["distances"]
        dist = (f"{d['first_tokens']['median']:,.0f} / {d['first_tokens']['p90']:,.0f} | "
                f"{d['last_tokens']['median']:,.0f} / {d['last_tokens']['p90']:,.0f}") if d.get("n") else "– | –"
        print(f"| `{n}` | {ro}/{rn} | {go}/{gn} | {dist} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

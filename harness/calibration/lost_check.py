"""Lost, checked against what the real agent did (issue 43, item 5).

After a real compaction the recorded agent re-acquires some of what the compaction took: it reads a
file again, runs a command again. If the simulated peer of that agent (``claude_code``) says what a
compaction loses, the facts it marks lost should be those the real agent had to fetch again.

Per recorded compaction of a log (a copy of a conversation counted once, harness/calibration/logs.py):

* the **facts**: each derived fact (harness/retention/probes.py) last seen in the main context before
  the compaction and needed (a probe) in the calls after it, up to ``WINDOW_CALLS`` or the next compaction;
* **re-acquired** (the truth): the recorded agent repeated, after the compaction and before the fact's
  first use there, the acquisition whose result last held the fact before it — a read of the same file,
  the same command or search (``ctxsim.harness.retention.recovery.key_of``; an edit's file read again).
  Facts whose last holder was no tool result (what the user said) are left out;
* **marked lost** (the prediction): the ``claude_code`` replay of the log (its recorded setting, seed
  0), at the first main request after its own compaction nearest the recorded one (within
  ``MATCH_CALLS`` calls; otherwise the compaction is not scored), holds the fact nowhere (``lost``) or
  only behind a pointer (``pointer``: a path the request names, as the transcript path, whose file holds
  it) — against ``verbatim`` in the window or in the ``summary``.

Figures: precision (re-acquired among marked lost), recall (marked lost among re-acquired) and the
AUC of the ordinal score verbatim 0 < summary 1 < pointer 2 < lost 3 (ties counted half), per Claude
Code version (major.minor) and pooled; and leave-one-session-out: each session's facts scored with the
re-acquisition rate of their (state, kind) on the other sessions (add-one smoothed), its AUC, and
precision and recall of "that rate ≥ the other sessions' base rate".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxsim.harness.calibration.recovery_fit import WINDOW_CALLS  # noqa: F401  (the calls after a compaction its recovery is looked for in)

MATCH_CALLS = 10     # the peer's compaction is matched to the recorded one within this many calls (assumed)
ORDER = {"verbatim": 0, "summary": 1, "pointer": 2, "lost": 3}
WHERE = {"window": "verbatim", "summary": "summary", "recoverable": "pointer", "unfollowed": "pointer", "lost": "lost"}


@dataclass(frozen=True)
class Item:
    session: str
    version: str
    compaction: int
    kind: str
    state: str          # verbatim | summary | pointer | lost (the peer's request after its compaction)
    reacquired: bool    # the recorded agent fetched it again before using it


def version_of(trace) -> str:
    v = str((trace.header.source or {}).get("version") or "unknown")
    return ".".join(v.split(".")[:2])


def recorded_side(trace, window: int = WINDOW_CALLS, only: set[int] | None = None
                  ) -> list[tuple[int, int, dict[str, bool]]]:
    """Per recorded compaction (its index, main calls before it): fact id -> re-acquired, for the
    facts held before it and needed after it within its window (see the module docstring)."""
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.model.textmatch import matcher
    from ctxsim.harness.retention.probes import _main_context
    from ctxsim.harness.retention.recovery import key_of, sources

    facts = trace.facts()
    if not facts:
        return []
    match = matcher({fid: f.text for fid, f in facts.items()})
    srcs = sources(trace)
    ev = trace.events
    main = _main_context(ev)
    comps: list[tuple[int, int]] = []   # (event index, calls before)
    call = 0
    for i, e in enumerate(ev):
        if main[i] and tr.is_call(e):
            call += 1
        elif main[i] and isinstance(e, tr.CompactEvent):
            comps.append((i, call))
    out = []
    for j, (ci, at) in enumerate(comps):
        if only is not None and j not in only:
            continue
        end = min(at + window, comps[j + 1][1]) if j + 1 < len(comps) else at + window
        holder: dict[str, Any] = {}   # fact -> key of the acquisition whose result last held it before
        for i in range(ci):
            if main[i] and isinstance(ev[i], tr.ToolResultEvent) and ev[i].tool_use_id in srcs:
                k = key_of(*srcs[ev[i].tool_use_id].step())
                for fid in match.present(ev[i].content):
                    holder[fid] = k
        seen_before = {f for f, k in holder.items() if k is not None}
        fetched: set[Any] = set()
        got: dict[str, bool] = {}
        pending: list[tr.ProbeEvent] = []
        c = at
        for i in range(ci + 1, len(ev)):
            e = ev[i]
            if not main[i]:
                continue
            if isinstance(e, tr.CompactEvent) or c >= end:
                break
            if isinstance(e, tr.ProbeEvent):
                pending.append(e)
            elif tr.is_call(e):
                for p in pending:
                    for fid in p.needs:
                        if fid in seen_before and fid not in got and facts[fid].category != "goal":
                            got[fid] = holder[fid] in fetched
                pending = []
                c += 1
                for u in e.tool_uses():   # what this call fetches is there for the calls after it
                    if u.id in srcs:
                        fetched.add(key_of(*srcs[u.id].step()))
        if got:
            out.append((j, at, got))
    return out


def peer_states(trace, fact_ids: set[str], strategy: str = "claude_code", seed: int = 0,
                models_file: str | None = None) -> list[tuple[int, dict[str, str]]]:
    """The peer's replay: per compaction of its own, (main calls before its next request, fact id ->
    state in that request) for ``fact_ids``."""
    import numpy as np
    from ctxsim.harness.llm.services import SUMMARY
    from ctxsim.harness.model.trace import ProbeEvent
    from ctxsim.harness.replay.engine import RunConfig, replay
    from ctxsim.harness.retention.scoring import RetentionModel, RetentionParams

    facts = {k: v for k, v in trace.facts().items() if k in fact_ids}
    if not facts:
        return []
    probe = ProbeEvent(t=0.0, id="lost-check", needs=sorted(facts))
    state = {"mains": 0, "after_summary": False}
    out: list[tuple[int, dict[str, str]]] = []
    model_box: dict[str, Any] = {}

    def observe(req, info) -> None:
        if info.get("rejected"):
            return
        if req.kind == SUMMARY:
            state["after_summary"] = True
            return
        if req.kind != "main":
            return
        if state["after_summary"]:
            state["after_summary"] = False
            m = model_box.get("m")
            if m is None:   # pointers limited to nothing: any absolute path named whose file holds the fact
                m = model_box["m"] = RetentionModel(facts, RetentionParams(recover_probability=1.0),
                                                    np.random.default_rng(0))
            got = m.score(probe, req, lambda i: 0, 1)
            out.append((state["mains"], {s.fact_id: WHERE.get(s.where, "lost") for s in got}))
        state["mains"] += 1

    replay(trace, strategy, None, RunConfig(seed=seed, observer=observe, models_file=models_file,
                                            recovery={"enabled": False}))
    return out


def items_of(trace, session: str, only: set[int] | None, models_file: str | None = None,
             window: int = WINDOW_CALLS) -> list[Item]:
    """The lost-check items of a log's ``trace``, its facts derived as `ctxsim import` derives them
    (``probes.apply``, done once by the caller)."""
    rec = recorded_side(trace, window, only)
    if not rec:
        return []
    peer = peer_states(trace, {f for _, _, got in rec for f in got}, models_file=models_file)
    facts = trace.facts()
    v = version_of(trace)
    out = []
    for j, at, got in rec:
        near = min(peer, key=lambda x: abs(x[0] - at), default=None)
        if near is None or abs(near[0] - at) > MATCH_CALLS:
            continue
        for fid, y in got.items():
            out.append(Item(session, v, j, facts[fid].category, near[1].get(fid, "lost"), y))
    return out


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Mann–Whitney AUC (ties half); None without both classes."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    import numpy as np

    a, b = np.array(pos, dtype=float), np.array(neg, dtype=float)
    gt = (a[:, None] > b[None, :]).sum() + 0.5 * (a[:, None] == b[None, :]).sum()
    return float(gt / (len(a) * len(b)))


def figures(items: Sequence[Item]) -> dict[str, Any]:
    """precision, recall, AUC of "marked lost (or pointer-only)" against "re-acquired"."""
    lost = [it.state in ("lost", "pointer") for it in items]
    y = [it.reacquired for it in items]
    tp = sum(a and b for a, b in zip(lost, y, strict=True))
    return {"facts": len(items), "reacquired": sum(y), "marked_lost": sum(lost),
            "sessions": len({it.session for it in items}), "compactions": len({(it.session, it.compaction) for it in items}),
            "precision": round(tp / sum(lost), 4) if sum(lost) else None,
            "recall": round(tp / sum(y), 4) if sum(y) else None,
            "auc": _r(auc([ORDER[it.state] for it in items], y)),
            "by_state": {s: {"facts": sum(it.state == s for it in items),
                             "reacquired": sum(it.state == s and it.reacquired for it in items)} for s in ORDER}}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def leave_one_session_out(items: Sequence[Item]) -> dict[str, Any]:
    """Each session's facts scored with the re-acquisition rate of their (state, kind) on the other
    sessions (add-one smoothed, falling back to the state's rate): AUC, and precision and recall of
    "rate ≥ the other sessions' base rate"."""
    sessions = sorted({it.session for it in items})
    scores: list[float] = []
    labels: list[bool] = []
    flags: list[bool] = []
    for s in sessions:
        rest = [it for it in items if it.session != s]
        if not rest:
            continue
        base = (sum(it.reacquired for it in rest) + 1) / (len(rest) + 2)
        cell: dict[tuple[str, str], list[int]] = {}
        by_state: dict[str, list[int]] = {}
        for it in rest:
            for d, k in ((cell, (it.state, it.kind)), (by_state, it.state)):
                c = d.setdefault(k, [0, 0])
                c[0] += it.reacquired
                c[1] += 1
        for it in (x for x in items if x.session == s):
            c = cell.get((it.state, it.kind)) or by_state.get(it.state) or [0, 0]
            p = (c[0] + 1) / (c[1] + 2)
            scores.append(p)
            labels.append(it.reacquired)
            flags.append(p >= base)
    tp = sum(a and b for a, b in zip(flags, labels, strict=True))
    return {"auc": _r(auc(scores, labels)), "precision": round(tp / sum(flags), 4) if sum(flags) else None,
            "recall": round(tp / sum(labels), 4) if sum(labels) else None, "sessions": len(sessions)}


def report(items: Sequence[Item]) -> dict[str, Any]:
    versions = sorted({it.version for it in items})
    return {"pooled": figures(items), "leave_one_session_out": leave_one_session_out(items),
            "by_version": {v: {**figures([it for it in items if it.version == v]),
                               "leave_one_session_out": leave_one_session_out([it for it in items if it.version == v])}
                           for v in versions},
            "definition": "harness/calibration/lost_check.py: facts held before a recorded compaction and needed in "
                          "the calls after it; re-acquired = a tool result after it holds the fact before its use; "
                          "marked lost = the claude_code replay's request after its own nearest compaction holds it "
                          "nowhere or only behind a pointer"}


def lines(rep: dict[str, Any]) -> list[str]:
    def row(name: str, f: dict[str, Any], loso: dict[str, Any]) -> str:
        def x(v: Any) -> str:
            return "–" if v is None else f"{v:.3f}"
        return (f"{name:<10}{f['sessions']:>9}{f['compactions']:>12}{f['facts']:>7}{f['reacquired']:>12}"
                f"{f['marked_lost']:>8}{x(f['precision']):>11}{x(f['recall']):>8}{x(f['auc']):>7}"
                f"{x(loso['auc']):>10}{x(loso['precision']):>11}{x(loso['recall']):>9}")

    out = ["Lost, checked against the recorded agent: claude_code marks a fact lost (or pointer-only) after its "
           "compaction; did the real agent re-acquire it before using it?",
           f"{'version':<10}{'sessions':>9}{'compactions':>12}{'facts':>7}{'reacquired':>12}{'lost':>8}"
           f"{'precision':>11}{'recall':>8}{'AUC':>7}{'LOSO AUC':>10}{'LOSO prec':>11}{'LOSO rec':>9}"]
    for v, f in rep["by_version"].items():
        out.append(row(v, f, f["leave_one_session_out"]))
    out.append(row("all", rep["pooled"], rep["leave_one_session_out"]))
    bs = rep["pooled"]["by_state"]
    out.append("re-acquired by state: " + ", ".join(f"{s} {c['reacquired']}/{c['facts']}" for s, c in bs.items()))
    return out

"""Multi-session scenarios through the engine: NovaCode's three memory layers across launches
(issue 10: N-INST-3, N-MEM-*, N-TRANS-4/5/6), on the `multi-session` preset and on hand-built traces."""

from __future__ import annotations

import numpy as np
import pytest
from ctxsim.harness.llm.simulated import DEFAULT_EXTRACT, SimParams, SimulatedLLM
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.synth import generate, load_preset
from ctxsim.strategies.registry import names

MEMORY_KINDS = ("memory_extract", "memory_select", "memory_consolidate")
CROSS = ("preference", "feedback")


def session_of(trace: tr.Trace) -> dict[str, str | None]:
    """fact/probe id -> the session it belongs to."""
    out, cur = {}, None
    for ev in trace.events:
        if isinstance(ev, tr.SessionStart):
            cur = ev.session
        elif isinstance(ev, tr.FactEvent | tr.ProbeEvent):
            out[ev.id] = cur
    return out


def cross_session(result, trace):
    """Probe scores of preference/feedback facts needed in a later session than they were said in."""
    sess = session_of(trace)
    p = result.probes
    later = np.array([sess[f] != sess[q] for f, q in zip(p["fact"], p["probe"], strict=True)], dtype=bool)
    return p[later & p["category"].isin(CROSS).to_numpy()]


@pytest.fixture(scope="module")
def ms_trace() -> tr.Trace:
    # the preset at a third of its length (6 sessions of 20 calls): same shape, a faster test
    return generate(load_preset("multi-session", ["calls=120"]), 0)


@pytest.fixture(scope="module")
def with_memory(ms_trace):
    return replay(ms_trace, "novacode", {"memory": True, "instructions": True}, RunConfig(seed=0))


# families that keep their own state across sessions (issue 6): state files, a retrieval index
MEMORY_FAMILIES = ("structured_state", "rag_memory")


def test_multi_session_memory_retains_preferences_and_feedback(ms_trace, with_memory):
    """Issue 10: preference/feedback facts said in one session and needed in a later one are found
    (in the window, or through a memory file the index points to) with memory; NovaCode without
    memory loses every one of them, and most of those memory keeps are lost by every peer strategy
    without a cross-session store of its own; the two families that have one (state files, a core
    memory and a retrieval store) keep at most as many as memory does."""
    mine = cross_session(with_memory, ms_trace)
    assert len(mine) >= 5  # the trace really asks for them (11 on this seed)
    kept = {(p, f) for p, f, w in zip(mine["probe"], mine["fact"], mine["where"], strict=True) if w != "lost"}
    assert len(kept) >= 0.8 * len(mine) and mine["score"].mean() > 0.4
    plain = cross_session(replay(ms_trace, "novacode", {"memory": False}, RunConfig(seed=0, recovery={"restate": False})),
                          ms_trace)  # what it keeps on its own: no user restating a preference
    assert (plain["where"] == "lost").all() and plain["score"].sum() == 0.0
    kept_by_a_peer: set[tuple[str, str]] = set()
    for name in names():
        if name in ("novacode", "recorded"):
            continue  # recorded re-enacts a recorded log's own compactions: needs a recorded trace
        theirs = cross_session(replay(ms_trace, name, None, RunConfig(seed=0, recovery={"restate": False})), ms_trace)
        kept_theirs = {(p, f) for p, f, w in zip(theirs["probe"], theirs["fact"], theirs["where"], strict=True)
                       if w != "lost"}
        if name in MEMORY_FAMILIES:
            assert len(kept_theirs) <= len(kept), name  # memory keeps at least as many as either family
        else:
            kept_by_a_peer |= kept_theirs
    only_memory = kept - kept_by_a_peer
    assert len(only_memory) >= 0.5 * len(kept)


def test_multi_session_memory_side_calls_billed_separately(with_memory):
    """N-MEM-4/5/7: the side calls are real calls, each row carrying its kind and cost; the metrics
    break cost down by kind, so memory's price is visible apart from the main calls."""
    calls = with_memory.calls
    kinds = set(calls["kind"])
    assert {"memory_extract", "memory_select"} <= kinds
    mem = calls[calls["kind"].isin(MEMORY_KINDS)]
    assert (mem["cost_usd"] > 0).all()
    assert not mem["blocking"].any()  # N-MEM-6: background work never blocks the session
    by_kind = with_memory.metrics["by_kind"]
    total = sum(v["cost_usd"] for v in by_kind.values())
    assert total == pytest.approx(with_memory.metrics["cost_usd"])
    assert by_kind["memory_select"]["calls"] == int((calls["kind"] == "memory_select").sum())


def test_multi_session_without_memory_makes_no_memory_calls(ms_trace):
    r = replay(ms_trace, "novacode", {"memory": False}, RunConfig(seed=0))
    assert not set(r.calls["kind"]) & set(MEMORY_KINDS)


def test_n_mem_6_late_selection_never_delays(ms_trace, monkeypatch):
    """N-MEM-6 in the engine: with a 0.01 s timeout every selection is late and dropped, and the main
    calls happen at exactly the same simulated times as with the 8 s timeout (never delayed)."""
    from ctxsim.strategies.novacode import memory_layer

    r_ok = replay(ms_trace, "novacode", {"memory": True}, RunConfig(seed=0))
    monkeypatch.setattr(memory_layer.MemoryParams, "from_config",
                        classmethod(lambda cls, config: cls(recall_timeout_s=0.01)))
    r_late = replay(ms_trace, "novacode", {"memory": True}, RunConfig(seed=0))
    sel = r_late.calls[r_late.calls["kind"] == "memory_select"]
    assert len(sel) > 0 and (sel["error"] == "late: dropped").all()
    ok_sel = r_ok.calls[r_ok.calls["kind"] == "memory_select"]
    assert (ok_sel["error"] == "").all() and (ok_sel["duration_s"] < 8.0).all()
    t_ok = r_ok.calls[r_ok.calls["kind"] == "main"]["t"].to_numpy()
    t_late = r_late.calls[r_late.calls["kind"] == "main"]["t"].to_numpy()
    assert np.array_equal(t_ok, t_late)


def _header(files: dict[str, str]) -> tr.Header:
    return tr.Header(name="hand", system="You are a coding agent.",
                     tools=[tr.ToolSpec(name="Read"), tr.ToolSpec(name="Bash")], meta={"files": files})


def test_n_inst_3_instruction_files_resident_in_every_request():
    """N-INST-1/2/3 in the engine: the trace seeds a home and a git project with an include; every
    main request starts with the same instruction block (paid and cached every call)."""
    files = {"home/.novacode/NOVACODE.md": "USER-RULE-7",
             "project/.git/HEAD": "ref: refs/heads/main\n",
             "project/NOVACODE.md": "PROJECT-RULE-3\n@./docs/style.md\n```\n@./docs/secret.md\n```",
             "project/docs/style.md": "STYLE-RULE-5",
             "project/docs/secret.md": "NEVER-INCLUDED"}
    evs = []
    t = 0.0
    for i in range(4):
        evs.append(tr.UserEvent(t=t, text=f"question {i}"))
        evs.append(tr.AssistantEvent(t=t + 5, content=[tr.TextContent(text=f"answer {i}")]))
        t += 30
    trace = tr.validate_events(_header(files), evs)
    seen = []
    replay(trace, "novacode", {"instructions": True}, RunConfig(seed=0, observer=lambda req, info: seen.append(req)))
    mains = [r for r in seen if r.kind == "main"]
    assert len(mains) == 4
    first = mains[0].messages[0]
    assert first.meta["origin"] == "instructions"
    for k in ("USER-RULE-7", "PROJECT-RULE-3", "STYLE-RULE-5"):
        assert k in first.text
    assert "NEVER-INCLUDED" not in first.text
    assert all(r.messages[0].digest == first.digest for r in mains)  # byte-stable resident prefix


def test_n_trans_5_resume_after_crash_mid_tool_call():
    """N-TRANS-5 in the engine: session one dies after the model called a tool (no result recorded);
    session two resumes it. The dangling call gets a synthetic result before the first request, so
    no request is rejected for pairing, and the first session's content is back in the window."""
    evs = [
        tr.SessionStart(t=0, session="s1"),
        tr.UserEvent(t=1, text="Refactor the parser; the ticket is PARSE-4242."),
        tr.FactEvent(t=1, id="f1", category="goal", text="the ticket is PARSE-4242"),
        tr.AssistantEvent(t=2, content=[tr.ToolUseContent(id="tu1", name="Read", input={"file_path": "/p/a.py"})]),
        tr.ToolResultEvent(t=3, tool_use_id="tu1", content="def parse(): ..."),
        tr.AssistantEvent(t=4, content=[tr.ToolUseContent(id="tu2", name="Bash", input={"command": "pytest"})]),
        tr.SessionEnd(t=5, session="s1"),                     # crash: tu2 never answered
        tr.SessionStart(t=600, session="s2", resume=True),
        tr.UserEvent(t=601, text="continue where you stopped"),
        tr.ProbeEvent(t=601, id="p1", needs=["f1"]),
        tr.AssistantEvent(t=605, content=[tr.TextContent(text="Resuming: re-running pytest.")]),
        tr.SessionEnd(t=606, session="s2"),
    ]
    trace = tr.validate_events(_header({}), evs)
    seen = []
    r = replay(trace, "novacode", {"memory": True}, RunConfig(seed=0, observer=lambda req, info: seen.append(req)))
    assert int(r.calls["pairing_violation"].sum()) == 0 and int(r.calls["rejected"].sum()) == 0
    last = [q for q in seen if q.kind == "main"][-1]
    results = [b for m in last.messages for b in m.blocks if b.type == "tool_result" and b.id == "tu2"]
    assert len(results) == 1 and results[0].is_error
    assert r.probes["where"].tolist() == ["window"]  # resume replays the first session (N-TRANS-6)


def test_n_trans_6_each_layer_injected_its_own_way():
    """N-TRANS-6: in a second, fresh (not resumed) session the instruction file is resident in the
    first request, the earlier conversation is not loaded (transcripts load only on resume), and the
    preference said in session one comes back only as a recalled memory (origin "memory")."""
    pref = "Preference: name new cache helpers with the prefix `kv42_` and keep each under 30 lines."
    evs = [
        tr.SessionStart(t=0, session="s1"),
        tr.UserEvent(t=1, text=f"{pref}\n\nAdd a cache for sessions. SESSION-ONE-MARKER"),
        tr.FactEvent(t=1, id="f1", category="preference", text=pref),
        tr.AssistantEvent(t=9, content=[tr.TextContent(text="Added kv42_session_cache.")]),
        tr.SessionEnd(t=10, session="s1"),
        tr.SessionStart(t=7200, session="s2"),
        tr.UserEvent(t=7201, text="Now add a cache helper for tokens."),
        tr.AssistantEvent(t=7215, content=[tr.TextContent(text="Working on it.")]),
        tr.UserEvent(t=7300, text="And one for users, following my conventions."),
        tr.ProbeEvent(t=7300, id="p1", needs=["f1"]),
        tr.AssistantEvent(t=7315, content=[tr.TextContent(text="Done.")]),
        tr.SessionEnd(t=7316, session="s2"),
    ]
    trace = tr.validate_events(_header({"project/NOVACODE.md": "PROJECT-RULE-9"}), evs)
    seen = []
    # the simulated extractor keeps a preference with probability 0.9; here it always does, so the
    # test is about where each layer puts things, not about that draw
    backend = SimulatedLLM(trace.facts(), lambda s: max(1, len(s) // 4), 0,
                           SimParams(extract={**DEFAULT_EXTRACT, "preference": 1.0}))
    r = replay(trace, "novacode", {"memory": True, "instructions": True},
               RunConfig(seed=0, backend=backend, observer=lambda req, info: seen.append(req)))
    s2 = [q for q in seen if q.kind == "main"][1:]
    first = s2[0]
    assert first.messages[0].meta.get("origin") == "instructions" and "PROJECT-RULE-9" in first.messages[0].text
    assert not any("SESSION-ONE-MARKER" in m.text for q in s2 for m in q.messages)
    recalled = [m for m in s2[-1].messages if m.meta.get("origin") == "memory"]
    assert len(recalled) == 1 and pref in recalled[0].text
    assert r.probes["where"].tolist() == ["window"]
    assert {"memory_extract", "memory_select"} <= set(r.calls["kind"])


def test_issue_17_default_novacode_keeps_later_session_preferences_above_append_only():
    """Issue 17's check, on the whole multi-session preset: NovaCode with no --set (every layer on)
    keeps the preference and feedback facts a later session needs and does not restate at least 0.2
    better than append_only, which starts every session empty. The generator places needs by their
    re-need distance (issue 43), so a later session often says a fact again: those needs are in any
    strategy's window and say nothing of memory. The ones left are those append_only cannot see
    (``lost``: it scores 0 on them); on seed 1 they are 12, NovaCode keeps them at 0.60 (seeds 1-4:
    0.45-0.60)."""
    t = generate(load_preset("multi-session"), 1)
    sess = session_of(t)
    probes = {name: replay(t, name, None, RunConfig(seed=0)).probes for name in ("novacode", "append_only")}
    base = probes["append_only"]
    later = np.array([sess[f] != sess[q] for f, q in zip(base["fact"], base["probe"], strict=True)], dtype=bool)
    unsaid = base[later & (base["where"] == "lost").to_numpy() & base["category"].isin(["preference", "feedback"]).to_numpy()]
    needs = set(zip(unsaid["probe"], unsaid["fact"], strict=True))
    assert len(needs) >= 5 and float(unsaid["score"].mean()) == 0.0
    nova = probes["novacode"]
    kept = nova[[k in needs for k in zip(nova["probe"], nova["fact"], strict=True)]]
    assert len(kept) == len(needs) and float(kept["score"].mean()) >= 0.2

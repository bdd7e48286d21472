"""issue 27: a 1-call warm-up sidechain (Claude Code 2.0.x writes a "Warmup" sidechain with no main
call). Every strategy sends the 16,965-token prefix the log measured for the span (not only
``recorded``); the header names the model the log ran on; every strategy writes the TTL the log
wrote (5 minutes here, not ``claude_code``'s 1-hour default)."""

from __future__ import annotations

import pytest
from ctxsim.harness.importers import import_file
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay

from tests.helpers_claude_code import asst, text, user, write

MODEL = "claude-sonnet-4-5-20250929"


@pytest.fixture(scope="module")
def warmup(tmp_path_factory):
    f = write(tmp_path_factory.mktemp("w") / "w.jsonl", [
        user(0, "Warmup", isSidechain=True, version="2.0.76"),
        asst(2, "r1", text("ready"), out=12, w5m=16_965, inp=3, model=MODEL, isSidechain=True, version="2.0.76")])
    return import_file("claude-code", f).trace


def test_the_header_names_the_sidechains_model_and_ttl(warmup):
    h = warmup.header
    assert h.model == MODEL and h.recorded.cache_ttl == "5m"
    assert h.prefix_tokens == 0 and list(h.recorded.subagent_prefix_tokens.values()) == [16_953]  # 16,968 − 15 visible


@pytest.mark.parametrize("strategy", ["recorded", "novacode", "append_only", "claude_code", "codex"])
def test_every_strategy_keeps_the_sidechains_prefix(warmup, strategy):
    """Recorded: 3 + 16,965 written + 12 out on Sonnet 4.5 = (3·3 + 16,965·3.75 + 12·15)/1e6 =
    $0.0638. Every strategy sends at least the 16,953-token prefix (was 14 tokens and $0.0001
    outside ``recorded``) and pays within 25% of the bill (append_only sets no breakpoint: all
    uncached at $3/M, $0.051)."""
    res = replay(warmup, strategy, {}, RunConfig())
    m = res.metrics
    assert m["peak_context_tokens"] >= 16_953
    assert 0.75 * 0.0638 <= m["cost_usd"] <= 1.25 * 0.0638
    assert res.calls["model"].tolist() == [MODEL]
    assert int(res.calls["cache_write_1h"].sum()) == 0   # the log wrote 5-minute entries


# --- issue 41: Warmup sidechains attached to their parent --------------------------------------

def _session_with_warmup(root, layout: str):
    """A session (s1) whose start-up warmed a sub-agent: a Warmup file no Task result refers to,
    written two seconds before the session's first record, in the session's subagents/ folder
    (2.1.x) or beside the sessions (``agent-<id>.jsonl``, older layouts)."""
    from tests.helpers_claude_code import asst, text, user, write

    main = write(root / "s1.jsonl", [user(10, "fix it", session="s1"),
                                     asst(11, "r1", text("done"), w5m=20_000, session="s1")])
    where = root / "s1" / "subagents" if layout == "subagents" else root
    write(where / "agent-a1b2.jsonl", [
        user(8, "Warmup", isSidechain=True, session="s1", agentId="a1b2"),
        asst(9, "w1", text("ready"), w5m=16_000, out=12, model=MODEL, isSidechain=True, session="s1", agentId="a1b2")])
    return main


@pytest.mark.parametrize("layout", ["subagents", "project"])
def test_a_warmup_is_a_span_of_its_session_at_its_time(tmp_path, layout):
    """Was: 'referenced by no Task result: not imported' (its billed call lost) or, beside the
    sessions, a session of its own. Now an isolated span before the first main record, its call
    billed with the session's: 3 + 16,000 written at 3.75 + 12 out at 15 on Sonnet 4.5, $0.060189."""
    from ctxsim.harness.fidelity.recorded import billed_calls, recorded_cost
    from ctxsim.harness.importers.folders import discover

    f = _session_with_warmup(tmp_path, layout)
    found, _ = discover("claude-code", tmp_path)
    assert [s.path.name for s in found] == ["s1.jsonl"]
    t = import_file("claude-code", f).trace
    kinds = [type(e).__name__ for e in t.events]
    assert kinds == ["SubtaskStart", "UserEvent", "AssistantEvent", "SubtaskEnd", "UserEvent", "AssistantEvent"]
    assert t.events[0].id == "warmup-a1b2" and t.events[0].isolated and t.events[2].model == MODEL
    assert billed_calls(t) == 2
    warm = (3 * 3 + 16_000 * 3.75 + 12 * 15) / 1e6
    main = (3 * 5 + 20_000 * 6.25 + 5 * 25) / 1e6   # Opus 4.6, 5-minute writes
    assert recorded_cost(t) == pytest.approx(warm + main)
    assert any("Warmup sub-agent(s)" in n for n in t.header.notes)


def test_a_warmup_whose_session_is_not_in_the_folder_stays_a_session(tmp_path):
    from ctxsim.harness.importers.folders import discover

    _session_with_warmup(tmp_path, "project")
    (tmp_path / "s1.jsonl").unlink()
    found, _ = discover("claude-code", tmp_path)
    assert [s.path.name for s in found] == ["agent-a1b2.jsonl"]
    assert import_file("claude-code", found[0].path).trace.calls == 1


def test_a_warmup_that_runs_first_leaves_the_main_contexts_warm_head_to_the_main_context(tmp_path):
    """A 2.0.x session whose first main call read 18,000 of its system prompt from the cache (an earlier
    session wrote it: warm_prefix_tokens), after its Warmup sidechain ran. The Warmup's call is the trace's
    first: it took the pending warm-up, on its own head, and the main call wrote its whole prompt cold, ten
    times its bill (400 sessions of an app driving Claude Code 2.0.76 outside the population were a median
    +285% for it). Now the main context's first call finds its head cached and the Warmup writes its own,
    as the log shows both."""
    main = write(tmp_path / "s1.jsonl", [user(10, "status", session="s1", version="2.0.76"),
                                         asst(11, "r1", text("clean"), inp=3, w5m=0, read=18_000, session="s1",
                                              model=MODEL, version="2.0.76")])
    write(tmp_path / "s1" / "subagents" / "agent-a1b2.jsonl", [
        user(8, "Warmup", isSidechain=True, session="s1", agentId="a1b2", version="2.0.76"),
        asst(9, "w1", text("ready"), w5m=16_000, out=12, model="claude-haiku-4-5-20251001", isSidechain=True,
             session="s1", agentId="a1b2", version="2.0.76")])
    t = import_file("claude-code", main).trace
    head = t.header.recorded.warm_prefix_tokens
    assert 17_900 <= head <= 18_000 and type(t.events[0]).__name__ == "SubtaskStart"
    c = replay(t, "recorded", {}, RunConfig()).calls
    first = c[c["kind"] == "main"].iloc[0]
    assert first["cache_read"] == head and first["cache_write_5m"] < 100
    warm = c[c["kind"] == "subagent"].iloc[0]
    assert warm["cache_read"] == 0 and warm["cache_write_5m"] > 15_000


def test_a_background_workflows_agents_are_isolated_spans_placed_at_their_last_record(tmp_path):
    """Claude Code 2.1.x's Workflow tool runs agents in the background and writes their transcripts under
    ``subagents/workflows/<run>/``. No Task result refers to them, and the importer looked only at
    ``subagents/agent-*.jsonl``: 42 such files with 215 billed calls went unsaid in a real session, then were
    named as left out. Each is now an isolated span placed at its last record's time, as a background Task
    agent is: in the trace, billed, replayed."""
    main = write(tmp_path / "s1.jsonl", [user(10, "run the checks", session="s1"),
                                         asst(11, "r1", text("started"), w5m=20_000, session="s1"),
                                         user(30, "and now?", session="s1"),
                                         asst(31, "r2", text("all done"), w5m=100, read=20_000, session="s1")])
    write(tmp_path / "s1" / "subagents" / "workflows" / "wf_1" / "agent-b1.jsonl", [
        user(12, "check one", isSidechain=True, session="s1", agentId="b1"),
        asst(13, "b1a", text("checking"), w5m=9_000, model=MODEL, isSidechain=True, session="s1", agentId="b1"),
        user(14, "go on", isSidechain=True, session="s1", agentId="b1"),
        asst(15, "b1b", text("done"), w5m=100, read=9_000, model=MODEL, isSidechain=True, session="s1", agentId="b1")])
    res = import_file("claude-code", main)
    assert res.warnings == [] and res.trace.calls == 4 and res.summary["subagent_calls"] == 2
    kinds = [(type(e).__name__, e.t) for e in res.trace.events if not isinstance(e, (tr.FactEvent, tr.ProbeEvent))]
    assert kinds == [("UserEvent", 0.0), ("AssistantEvent", 1.0), ("SubtaskStart", 2.0), ("UserEvent", 2.0),
                     ("AssistantEvent", 3.0), ("UserEvent", 4.0), ("AssistantEvent", 5.0), ("SubtaskEnd", 5.0),
                     ("UserEvent", 20.0), ("AssistantEvent", 21.0)]
    start = next(e for e in res.trace.events if isinstance(e, tr.SubtaskStart))
    assert start.isolated and start.id == "wf_1-b1" and start.description == "check one"
    assert "placed as isolated spans at their last record's time: 1" in "\n".join(res.trace.header.notes)

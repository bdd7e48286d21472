"""Whether a Claude Code log's requests kept the previous turns' thinking (harness/fidelity/kept_thinking.py).

Each session is written here with the structure the logs show (a turn of two calls, the first
thinking before a tool use, the second answering; then a new user turn), never a copy of one. On
Sonnet 4.5 the API drops the earlier turns' thinking by default; Claude Code can ask it to keep
them. The log tells which: at the new turn the cache reads the whole previous context (kept) or
only up to the turn's first answer that thought (dropped).
"""

from __future__ import annotations

from ctxsim.harness.fidelity.compare import run_fidelity
from ctxsim.harness.fidelity.kept_thinking import new_turn_reads, previous_thinking_kept
from ctxsim.harness.fidelity.recorded import recorded_calls
from ctxsim.harness.importers import import_file
from ctxsim.harness.replay.engine import RunConfig, replay

from tests.helpers_claude_code import asst, result, text, user, write

SONNET45 = "claude-sonnet-4-5-20250929"
THINK = {"type": "thinking", "thinking": "let me look at the file first", "signature": "sig"}
FIRST, STEP = 10_000, 400   # the first call's context, and what each call adds (recorded tokens)


def _session(tmp_path, kept: bool, turns: int = 6, version: str = "2.1.39", model: str = SONNET45, thinking=True,
             think_from: int = 0):
    """``turns`` user turns of two calls each: a thinking call that reads a file, then an answer.
    Call k's context is FIRST + k·STEP; each call reads its predecessor's whole context but a new
    turn's first call where the thinking was dropped, which reads only up to where the previous turn
    began (its first call's context)."""
    recs, ctx, k, t = [], [], 0, 0.0

    def call(rid, blocks, read):
        nonlocal k
        c = FIRST + k * STEP
        ctx.append(c)
        k += 1
        return [asst(t, rid, b, w5m=c - 3 - read, read=read, model=model, version=version) for b in blocks]

    for turn in range(turns):
        t = turn * 60.0
        recs.append(user(t, f"step {turn}: fix the parser", version=version))
        start = len(ctx)
        read = 0 if not ctx else ctx[-1] - 3 if kept or turn == 0 else ctx[start - 2] - 3
        t += 1
        first = [THINK] if thinking and turn >= think_from else []
        recs += call(f"r{turn}a", first + [{"type": "tool_use", "id": f"t{turn}", "name": "Read",
                                            "input": {"file_path": "/w/p.py"}}], read)
        t += 1
        recs.append(result(t, f"t{turn}", "def parse():\n    return 1\n" * 20, version=version))
        t += 1
        recs += call(f"r{turn}b", [text(f"fixed step {turn}")], ctx[-1] - 3)
    return import_file("claude-code", write(tmp_path / "s.jsonl", recs)).trace


def test_new_turn_reads_count_the_new_turns_after_a_turn_whose_earlier_answers_thought(tmp_path):
    """Six turns, five new turns after the first: each follows a turn whose first answer thought
    (in the prefix the cache holds). Kept: the five read whole; dropped: the five read short. The
    first turn's call has no turn before it and is not counted."""
    calls = recorded_calls(_session(tmp_path / "k", kept=True))
    assert [c.thought_in_prefix for c in calls if c.new_turn] == [False, True, True, True, True, True]
    assert new_turn_reads(calls, len(calls)) == (5, 0)
    assert new_turn_reads(recorded_calls(_session(tmp_path / "d", kept=False)), 12) == (0, 5)
    # only the first part is judged: calls 0-3 hold one such new turn (call 2)
    assert new_turn_reads(calls, 4) == (1, 0)


def test_a_new_turn_served_by_another_route_says_nothing_of_the_thinking(tmp_path):
    """A router sent each new turn's first call to Vertex, the rest to Anthropic's API: those calls read
    another cache, so their short reads are the route's, not the thinking dropped. Of the five new
    turns none is counted (0, 0), where one route throughout counts five short."""
    from dataclasses import replace

    calls = recorded_calls(_session(tmp_path / "d", kept=False))
    routed = [replace(c, route="vertex" if c.new_turn else "anthropic") for c in calls]
    assert new_turn_reads(calls, 12) == (0, 5) and new_turn_reads(routed, 12) == (0, 0)


def test_a_log_whose_new_turns_read_whole_keeps_the_thinking_and_its_replay_reads_whole_too(tmp_path):
    """Import judges it on the first 30% of the calls (4 of 12: one new turn, read whole): kept.
    The replay then keeps the earlier turns' thinking, and its new turns read the previous call's
    whole context as the log did; with the API's default (dropped) forced, they fall back."""
    t = _session(tmp_path, kept=True)
    rec = t.header.recorded
    assert rec.previous_thinking_kept is True
    assert "1 read the whole cached context and 0 read short" in rec.previous_thinking_evidence
    kept = replay(t, "recorded", {}, RunConfig())
    assert "turns whose earlier thinking was dropped" not in kept.metrics["strategy_counters"]
    dropped = replay(t, "recorded", {"strip_previous_thinking": "auto"}, RunConfig())
    assert dropped.metrics["strategy_counters"]["turns whose earlier thinking was dropped"] == 5
    rows = [i for i, c in enumerate(recorded_calls(t)) if c.new_turn][1:]
    main_k = kept.calls[kept.calls["kind"] == "main"].reset_index(drop=True)
    main_d = dropped.calls[dropped.calls["kind"] == "main"].reset_index(drop=True)
    for i in rows:
        whole = main_k.loc[i - 1, "context_tokens"]
        assert main_k.loc[i, "cache_read"] >= 0.99 * whole        # read whole, as the log did
        assert main_d.loc[i, "cache_read"] < 0.97 * whole         # fell back to where the thinking began
    # the bill $0.0946; kept $0.0999 (its context sizes run a few per cent over the log's: the scale),
    # dropped $0.1091: each of the five new turns writes again what the log read
    cost = run_fidelity(t).report["cost_usd"]
    assert cost["simulated"] == round(kept.calls["cost_usd"].sum(), 4)
    assert abs(kept.calls["cost_usd"].sum() - cost["recorded"]) < 0.4 * abs(dropped.calls["cost_usd"].sum() - cost["recorded"])


def test_a_log_whose_new_turns_read_short_drops_it_and_one_with_no_evidence_follows_its_version(tmp_path):
    """Read short at the new turn of the first part: dropped (False). A first part with no such new
    turn (thinking from the third turn on; the first part is calls 0-3): the whole log decides, in
    sample and said so (3 new turns read whole). No turn that thought before its last answer at
    all: Claude Code 2.1.72 and later keep it; an earlier version leaves the API's default (None).
    A log on a model whose API keeps thinking anyway is not judged."""
    assert _session(tmp_path / "d", kept=False).header.recorded.previous_thinking_kept is False
    late = _session(tmp_path / "l", kept=True, think_from=2).header.recorded
    assert late.previous_thinking_kept is True and "previous_thinking_kept" in late.in_sample
    assert "0 read the whole cached context and 0 read short; in sample, over all 12 calls: 3 whole, 0 short" \
        in late.previous_thinking_evidence
    quiet = _session(tmp_path / "q1", kept=True, version="2.1.72", thinking=False).header.recorded
    assert quiet.previous_thinking_kept is True and "Claude Code 2.1.72 keeps it" in quiet.previous_thinking_evidence
    old = _session(tmp_path / "q2", kept=True, version="2.1.15", thinking=False).header.recorded
    assert old.previous_thinking_kept is None and old.previous_thinking_evidence.endswith("the API's default")
    calls = recorded_calls(_session(tmp_path / "o", kept=True, model="claude-opus-4-6"))
    assert previous_thinking_kept(calls, len(calls), "2.1.72") == (
        None, "no call on a model whose API drops the previous turns' thinking by default", False)


def test_the_version_default_is_claude_codes_only(tmp_path):
    """A log with no evidence either way and version 2.1.72: kept when Claude Code wrote it; the
    same log under another agent's format takes no default from a number that is not Claude Code's."""
    from ctxsim.harness.fidelity.compare import decide_thinking
    from ctxsim.harness.model.trace import with_header

    t = _session(tmp_path, kept=True, version="2.1.72", thinking=False)
    blank = t.header.recorded.model_copy(update={"previous_thinking_kept": None, "previous_thinking_evidence": ""})
    t = with_header(t, t.header.model_copy(update={"recorded": blank}))
    assert decide_thinking(t, recorded_calls(t)).header.recorded.previous_thinking_kept is True
    other = with_header(t, t.header.model_copy(update={"source": {**t.header.source, "format": "codex"}}))
    assert decide_thinking(other, recorded_calls(other)).header.recorded.previous_thinking_kept is None

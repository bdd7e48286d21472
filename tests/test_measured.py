"""Sizes the log measured (harness/fidelity/measured.py): each clean growth step sizes the text that came in
(a factor on the scale), or the content the log has no text for (hidden tokens); the events carry
it into every strategy's request. Hand-worked numbers on a three-call trace."""

from __future__ import annotations

import pytest
from ctxsim.harness.fidelity import measured
from ctxsim.harness.fidelity.recorded import RecordedCall, recorded_calls
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Block, Message
from ctxsim.harness.provider import Provider
from ctxsim.harness.provider.tokenizer import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, get_tokenizer
from ctxsim.harness.replay.events import result_block, user_message

MODEL = "claude-opus-4-6"
TEXT_600 = "hello" + " hello" * 599   # 600 cl100k tokens
TEXT_30 = "x" + " x" * 29             # 30 cl100k tokens


def _call(t, ctx, tool_id):
    return tr.AssistantEvent(t=t, model=MODEL, usage=tr.RecordedUsage(input=ctx),
                             content=[tr.ToolUseContent(id=tool_id, name="Bash", input={"command": "ls"})])


def three_calls() -> tr.Trace:
    """Calls of 10,000, 10,950 and 12,113 recorded tokens, a 600-token result after the first and
    a 30-token one after the second."""
    evs = [tr.UserEvent(t=0, text="task"), _call(1, 10_000, "a"),
           tr.ToolResultEvent(t=2, tool_use_id="a", content=TEXT_600), _call(3, 10_950, "b"),
           tr.ToolResultEvent(t=4, tool_use_id="b", content=TEXT_30), _call(5, 12_113, "c"),
           tr.ToolResultEvent(t=6, tool_use_id="c", content="ok")]
    return tr.validate_events(tr.Header(name="t", model=MODEL), evs)


# cl100k contexts of the replay: each step adds its result's text and 100 tokens of the rest
# (the previous call's blocks, framing)
BASE = {0: 8_000, 1: 8_700, 2: 8_830}
SCALE = 1.25


def test_a_large_step_sizes_its_text_and_a_small_one_its_hidden_content():
    """Step 0→1: residual 950 − 1.25·700 = 75, so the 600 tokens of text are (75 + 750) / 750 =
    1.1 times what the scale makes of them. Step 1→2: 30 tokens of text is under the 500 a step
    needs to size text; its residual 1,163 − 1.25·130 = 1,000.5 is above the 200-token floor:
    round(1,000.5 / 1.25) = 800 cl100k tokens of content the log has no text for."""
    t = three_calls()
    calls = recorded_calls(t)
    assert calls[1].added == (2,) and calls[2].added == (4,)
    got = measured.steps(t, calls, BASE, SCALE, get_tokenizer())
    assert [(s.call, s.payload, s.residual, s.factor, s.hidden) for s in got] == [
        (1, 600, 75, 1.1, 0), (2, 30, 1000, None, 800)]
    assert "under 500" in got[1].reason


def test_after_a_hooked_tool_use_a_smaller_excess_is_hidden_content():
    """Step 1→2 grown by 1.25·130 + 100 = 262.5 (263): a residual of 100.5, under the 200-token floor,
    is noise; when the log shows a PostToolUse hook ran for the tool use (``meta.post_hook``) the
    floor is 50, and round(100.5 / 1.25) = 80 tokens of the hook's output are put back."""
    t = three_calls()
    calls = recorded_calls(t)
    calls = [calls[0], calls[1], _with_ctx(calls[2], 10_950 + 263)]
    assert measured.steps(t, calls, BASE, SCALE, get_tokenizer())[1].hidden == 0
    ev = t.events[4]
    hooked = tr.validate_events(t.header, [*t.events[:4], ev.model_copy(update={"meta": {"post_hook": "PostToolUse:Edit"}}),
                                           *t.events[5:]])
    assert measured.steps(hooked, calls, BASE, SCALE, get_tokenizer())[1].hidden == 80


def test_a_factor_out_of_range_is_not_a_size_and_small_residuals_are_noise():
    """A 600-token step that grew 3,000: factor (3,000 − 125) / 750 = 3.83 > 2, so the text keeps the
    scale and the residual 3,000 − 875 = 2,125 is hidden content (1,700 at 1.25). A step whose
    residual is under the floor (150 < 200) measures nothing."""
    t = three_calls()
    calls = recorded_calls(t)
    grown = [calls[0], _with_ctx(calls[1], 13_000), _with_ctx(calls[2], 13_000 + 313)]
    a, b = measured.steps(t, grown, BASE, SCALE, get_tokenizer())
    assert a.factor is None and "3.83 outside" in a.reason and a.hidden == 1700
    assert b.factor is None and b.hidden == 0   # 313 − 162.5 = 150.5 under the 200-token floor


def _with_ctx(c: RecordedCall, ctx: int) -> RecordedCall:
    from dataclasses import replace

    return replace(c, usage=tr.RecordedUsage(input=ctx))


def test_apply_puts_the_sizes_on_the_events_and_apply_nothing_removes_them():
    t = three_calls()
    steps = measured.steps(t, recorded_calls(t), BASE, SCALE, get_tokenizer())
    m = measured.apply(t, steps)
    assert m.events[2].meta == {"token_factor": 1.1} and m.events[4].meta == {"hidden_tokens": 800}
    assert t.events[2].meta == {}   # the input trace is not changed
    assert measured.apply(m, []).events[2].meta == {} and measured.apply(t, []) is t
    assert "1 of 2 growth steps sized by the log" in measured.evidence(steps)


def test_every_strategy_receives_the_measured_size():
    """The engine's block for a sized result counts round(600 × 1.1) = 660 + its framing; the hidden
    tokens count as opaque tokens of the block; text a strategy writes itself is at the scale."""
    t = measured.apply(three_calls(), measured.steps(three_calls(), recorded_calls(three_calls()), BASE, SCALE,
                                                     get_tokenizer()))
    tok = get_tokenizer()
    assert tok.block(result_block(t.events[2])) == 660 + BLOCK_OVERHEAD["tool_result"]
    assert tok.block(result_block(t.events[4])) == 30 + 800 + BLOCK_OVERHEAD["tool_result"]
    assert tok.block(Block.tool_result("a", TEXT_600)) == 600 + BLOCK_OVERHEAD["tool_result"]
    p = Provider(MODEL, token_scale=SCALE)
    # on a Claude model the result's framing is 6 + 25 (tokenizer.XML_BLOCK_OVERHEAD): (660 + 31 + 4) × 1.25
    assert p.message_tokens(Message("user", (result_block(t.events[2]),))) == round((660 + 31 + MESSAGE_OVERHEAD) * 1.25) == 869
    # the same bytes: the same cache identity as the unsized block
    assert result_block(t.events[2]).digest == Block.tool_result("a", TEXT_600).digest
    u = tr.UserEvent(t=0, text=TEXT_600, meta={"token_factor": 0.5, "read_file": "a.md"})
    m = user_message(u)
    assert m.meta == {"read_file": "a.md"} and tok.message(m) == 300 + MESSAGE_OVERHEAD


def test_resent_startup_is_what_the_first_call_after_a_compaction_holds_beyond_the_replay():
    """Prefix 25,000 (+8 framing) with 4,000 of startup content; after the compaction the call holds
    27,000 and the replay's messages are 3,000 cl100k tokens (3,750 at 1.25): residual
    27,000 − 25,008 − 3,750 = −1,758, so 4,000 − 1,758 = 2,242 came back. Clamped to [0, 4,000]."""
    c = RecordedCall(5, 5.0, MODEL, tr.RecordedUsage(input=27_000), "main", True, 0, 4)
    n, ev = measured.resent_startup([c], {5: 3_000}, 1.25, 4_000, lambda _: 25_008)
    assert n == 2_242 and "2,242 of the 4,000" in ev
    big = RecordedCall(5, 5.0, MODEL, tr.RecordedUsage(input=40_000), "main", True, 0, 4)
    assert measured.resent_startup([big], {5: 3_000}, 1.25, 4_000, lambda _: 25_008)[0] == 4_000
    assert measured.resent_startup([c], {5: 3_000}, 1.25, 0, lambda _: 25_008) == (None, "")


def test_calibrate_sizes_the_steps_and_the_replay_follows_the_record():
    """On a trace whose step 0→1 grows 1.1 times what the fitted scale makes of its text, the
    calibrated replay lands on the recorded context of call 1 within the framing's rounding."""
    from ctxsim.harness.fidelity.compare import calibrate
    from ctxsim.harness.replay.engine import RunConfig, replay
    from ctxsim.strategies.recorded import Recorded

    t = calibrate(three_calls())
    assert t.events[2].meta.get("token_factor") is not None
    assert "sized by the log" in t.header.recorded.measured_sizes_evidence
    res = replay(t, Recorded, {}, RunConfig())
    ctx = list(res.calls["context_tokens"])
    assert ctx[1] == pytest.approx(10_950, abs=3)


REAL = __import__("pathlib").Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "real"
CLAUDE_LOGS = ["codemie/session-624a4a58.jsonl", "codemie/session-196820da.jsonl",
               "spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl", "spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
               "spotter/short.jsonl", "spotter/subagent.jsonl", "spotter/tool_heavy.jsonl"]


# what the miss model fitted on the first 30% of calls cannot foresee in the other 70% (issue 41: the
# model is scored out of sample): spotter 258c7280's second fall-back (its first 47 calls hold one, no
# pattern: no model, 10.9% under, 0.3% without the two misses' premium); codemie 624a4a58, whose first 11
# eligible calls fall back 5 times and the whole log 14 of 55 (the share caps at 0.45: 11.1%)
UNFORESEEN = {"spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl": 12.0, "codemie/session-624a4a58.jsonl": 12.0}


@pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")
@pytest.mark.parametrize("log", CLAUDE_LOGS)
def test_every_bundled_claude_code_log_replays_within_5pct_of_its_bill(log):
    """Issue 27's check, as `ctxsim import` + `ctxsim fidelity` (= `run -s recorded`, no flags), with
    the miss model fitted on the first 30% of calls only: 196820da 4.8%, ae4a77f8 +2.6%, short 0.1%,
    subagent −0.8%, tool_heavy +1.2%; the two of UNFORESEEN within their bound (in sample, fitted on
    the calls it was scored on, they were +4.4% and +0.3%)."""
    from ctxsim.harness.fidelity.compare import run_fidelity
    from ctxsim.harness.importers import import_file

    r = run_fidelity(import_file("claude-code", REAL / "claude-code" / log).trace).report
    assert r["cost_usd"]["abs_pct_error"] <= UNFORESEEN.get(log, 5.0)


@pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")
def test_the_import_marks_the_tool_results_a_posttooluse_hook_ran_for():
    """spotter 258c7280 records 245 hook_progress entries for PostToolUse:Edit over its 35 Edits (several
    hook commands each; Bash, Read, Write ... too): each tool result whose tool use they name
    carries the hook's name; 7 of its 188 results had none."""
    from collections import Counter

    from ctxsim.harness.importers import import_file

    t = import_file("claude-code", REAL / "claude-code" / "spotter" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl").trace
    hooks = Counter(e.meta.get("post_hook") for e in t.events if isinstance(e, tr.ToolResultEvent))
    assert hooks["PostToolUse:Edit"] == 35 and hooks["PostToolUse:Bash"] == 74 and hooks[None] == 7


@pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")
def test_the_bundled_codex_rollout_is_scored_out_of_sample_and_says_why_it_is_over():
    """Fitted on the whole log (in sample) the rollout replayed at −1.0%. Out of sample its first 20
    calls fall back on 9 of 18 eligible calls and the whole log on 19 of 64: the share fitted on the
    first (0.344) overstates the rest and the replay is ~54% over its bill. The model's source says
    where it was fitted; the overflow routing it stands for is OpenAI's (a burst, not a rate)."""
    from ctxsim.harness.fidelity.compare import run_fidelity
    from ctxsim.harness.importers import import_file

    (log,) = sorted((REAL / "codex").glob("rollout-*.jsonl"))
    t = import_file("codex", log).trace
    m = t.header.recorded.cache_miss_model
    assert (m.strays, m.eligible) == (9, 18) and "for the first 20 of the log's 66 calls (the rest held out)" in m.source
    r = run_fidelity(t).report
    assert 45.0 < r["cost_usd"]["abs_pct_error"] < 60.0


@pytest.mark.parametrize("meta,what", [({"token_factor": "big"}, "token_factor"), ({"token_factor": 0}, "token_factor"),
                                       ({"token_factor": True}, "token_factor"), ({"hidden_tokens": -5}, "hidden_tokens"),
                                       ({"hidden_tokens": 1.5}, "hidden_tokens")])
def test_a_damaged_size_in_a_trace_file_is_bad_input_with_its_line(tmp_path, meta, what):
    import json

    lines = [{"type": "header", "name": "x", "model": MODEL}, {"type": "user", "t": 0, "text": "hi"},
             {"type": "assistant", "t": 1, "content": [{"type": "tool_use", "id": "a", "name": "Bash", "input": {}}]},
             {"type": "tool_result", "t": 2, "tool_use_id": "a", "content": "ok", "meta": meta}]
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(tr.TraceError, match=rf"t\.jsonl:4: .*meta\.{what}"):
        tr.load(p)
    lines[3]["meta"] = {"token_factor": 1.1, "hidden_tokens": 800}
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert tr.load(p).events[2].meta == {"token_factor": 1.1, "hidden_tokens": 800}

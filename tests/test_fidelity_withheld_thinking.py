"""Thinking the log withheld (issue 41): Claude Code 2.1.x writes Opus 4.6/4.7 and Sonnet 4.6 thinking
blocks with no text, but the API kept them in the context, so the recorded context grows by them. The
development population shows it: steps after such an answer grow 0.86 recorded tokens per visible
character on Opus 4.7 against 0.56 after the others (0.64 against 0.43 on Opus 4.6). Fitted into one
token scale they inflated every text (2.9 on one Opus 4.7 session, 1.85 once left out); now the scale
leaves those steps out and their growth sizes the thinking, on the answer that held it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ctxsim.harness.fidelity.compare import calibrate, fit_token_scale
from ctxsim.harness.fidelity.recorded import RecordedCall, recorded_calls
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.replay.events import HIDDEN_TOKENS, TOKEN_FACTOR
from ctxsim.strategies.recorded import Recorded

MODEL = "claude-opus-4-7"


def call(i, ctx, withheld=False):
    return RecordedCall(i, float(i), MODEL, tr.RecordedUsage(input=ctx), "main", False, 0, i - 1 if i else None,
                        withheld_thinking=withheld)


def test_the_scale_leaves_out_the_steps_after_withheld_thinking():
    # recorded 1,000 → 1,300 → 2,300 → 2,600; cl100k 500 → 700 → 1,200 → 1,400. Call 1's answer held
    # withheld thinking, so the step 1→2 grew by it: (300 + 300) / (200 + 200) = 1.5, not
    # (300 + 1,000 + 300) / (200 + 500 + 200) = 1.78
    calls = [call(0, 1000), call(1, 1300, withheld=True), call(2, 2300), call(3, 2600)]
    base = {0: 500, 1: 700, 2: 1200, 3: 1400}
    assert fit_token_scale(calls, base, {0, 1, 2, 3}) == pytest.approx(1.5)
    # when every step follows withheld thinking there is nothing else to fit on: all of them count
    every = [replace(c, withheld_thinking=True) for c in calls]
    assert fit_token_scale(every, base, {0, 1, 2, 3}) == pytest.approx(1600 / 900)


def _trace(extra: int = 1_500):
    """Four calls of a tool loop; the second answer thought (text withheld) and the next call's context
    grew ``extra`` recorded tokens more than its visible content at the scale: that thinking."""
    body = "def f(x):\n    return x + 1\n" * 60
    evs, ctx = [tr.UserEvent(t=0, text="fix it")], 20_000
    grow = []
    for i in range(4):
        content = ([tr.ThinkingContent(thinking="")] if i == 1 else []) + [
            tr.ToolUseContent(id=f"t{i}", name="Read", input={"file_path": f"/w/{i}.py"})]
        evs.append(tr.AssistantEvent(t=1 + 2 * i, content=content, model=MODEL,
                                     usage=tr.RecordedUsage(input=3, cache_write_1h=ctx - 3)))
        evs.append(tr.ToolResultEvent(t=2 + 2 * i, tool_use_id=f"t{i}", content=body))
        grow.append(ctx)
        ctx += 1_000 + (extra if i == 1 else 0)
    return tr.validate_events(tr.Header(name="w", model=MODEL, prefix_tokens=5_000, usage="per_call"), evs), grow


def test_the_growth_after_withheld_thinking_sizes_it_on_its_answer():
    """The steps 0→1 and 2→3 fix the scale (the same 1,000 recorded tokens for the same text); the
    step 1→2 grew 1,500 more, which goes on answer 1 as its thinking's size (in cl100k tokens: 1,500 /
    the scale). The replay then sends call 2 with the recorded context: before, it fell 1,500 short."""
    t, recorded = _trace()
    cal = calibrate(t, fit_fraction=1.0)
    scale = cal.header.recorded.token_scale
    answers = [e for e in cal.events if isinstance(e, tr.AssistantEvent)]
    # 1,500 / scale, less the empty block's own framing the replay counted already (2 cl100k tokens)
    assert answers[1].meta[HIDDEN_TOKENS] == pytest.approx(1_500 / scale - 2, abs=1)
    assert all(HIDDEN_TOKENS not in a.meta for a in (answers[0], answers[2], answers[3]))
    assert "1 steps after an answer whose thinking the log withheld" in cal.header.recorded.measured_sizes_evidence
    ctx = list(replay(cal, Recorded, {}, RunConfig()).calls["context_tokens"])
    assert ctx[2] - recorded[2] == pytest.approx(0, abs=3)
    assert ctx[3] - recorded[3] == pytest.approx(0, abs=3)
    # calibrating again finds the same sizes (the earlier measure is taken off before counting)
    again = calibrate(cal, fit_fraction=1.0)
    assert [e.meta.get(HIDDEN_TOKENS) for e in again.events if isinstance(e, tr.AssistantEvent)] == \
        [a.meta.get(HIDDEN_TOKENS) for a in answers]
    assert recorded_calls(cal)[1].withheld_thinking and not recorded_calls(cal)[2].withheld_thinking


def test_a_step_that_grew_less_than_its_text_kept_no_thinking():
    """A Codex rollout's reasoning is withheld too, yet the steps after it grow less than their visible
    text (the reasoning did not stay in the context): nothing is put on the answer, and the step's text
    is sized as any step's. Here the step after answer 1 grows 800 where the others grow 1,000."""
    t, recorded = _trace(extra=-200)
    assert [b - a for a, b in zip(recorded, recorded[1:])] == [1_000, 800, 1_000]
    cal = calibrate(t, fit_fraction=1.0)
    assert all(HIDDEN_TOKENS not in e.meta for e in cal.events if isinstance(e, tr.AssistantEvent))
    results = [e for e in cal.events if isinstance(e, tr.ToolResultEvent)]
    assert results[1].meta[TOKEN_FACTOR] < 0.9   # the result answer 1 called for: sized by its step, 800 for ~1,000

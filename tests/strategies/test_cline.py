"""cline: the Cline SDK's auto-compaction (0.9 × the usable input, the request estimated from its JSON
characters / 3, the newest tokens up to min(20,000, target) kept, a 4,096-token summary from a
separate call) and the basic compaction plus one retry on a rejected request.

Read at: cline/cline v4.1.12 (the SDK's compaction.ts).
The files read are named in the strategy's docstring."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Message
from ctxsim.strategies.base import CallInfo

from tests.strategies.peer_env import FakeServices, make, reject, step


def test_usable_input_and_trigger():
    s = make("cline", window=200_000)
    assert s.usable() == 180_000 and s.trigger() == 162_000  # 0.9 × the window, then 0.9 of that
    t = make("cline", {"max_input_tokens": 150_000}, window=200_000)
    assert t.usable() == 150_000 and t.trigger() == 135_000


def _six_steps(s):
    s.on_user(Message.user("task"))
    for i in range(6):
        step(s, i, "r" * 1_200)


def test_estimate_counts_characters_not_the_last_usage():
    s = make("cline", {"max_input_tokens": 3_000})
    _six_steps(s)
    # system + tools 181 chars, "task" 63 (its JSON), 6 · (assistant 114 + result 1,311): 8,794 / 3
    assert s.estimate() == 2_932 and s.should_compact(CallInfo(6, 6.0))  # ≥ 0.9 · 3,000 = 2,700


def test_agentic_compaction_keeps_the_newest_tokens_up_to_the_target():
    services = FakeServices("NOTE")
    s = make("cline", {"max_input_tokens": 3_000}, services=services)
    _six_steps(s)
    assert s.build_request(CallInfo(6, 6.0)).rewrite
    # target: 0.7 · 2,700 = 1,889 − 61 (system + tools) = 1,828 tokens kept from the end: r5 437, a5 38,
    # r4, a4, r3, a3, r2 → 1,862 ≥ 1,828 at r2, a result: back to a2; u0 a0 r0 a1 r1 are summarised
    h = list(s.history)
    assert h[0].text == "Context summary:\n\nNOTE" and h[1].blocks[0].id == "tu_2" and len(h) == 9
    (req, spec), = services.calls
    assert req.system.text.startswith("Summarize the provided coding session") and not req.tools.tools
    assert spec.max_output_tokens == 4_096
    # tool results cut to 2,000 characters in the summariser's input (these are 1,200: whole)
    assert "r" * 1_200 in req.messages[0].text


def test_the_latest_typed_prompt_is_never_summarised():
    s = make("cline", {"max_input_tokens": 3_000}, services=FakeServices("NOTE"))
    _six_steps(s)
    s.on_user(Message.user("now the tests"))
    step(s, 6, "r" * 1_200)  # the step's own request compacts: the cut stays at or before "now the tests"
    assert any(m.text == "now the tests" for m in s.history)


def test_a_rejected_request_runs_the_basic_compaction_and_one_retry():
    services = FakeServices()
    s = make("cline", {"max_input_tokens": 3_000}, services=services)
    _six_steps(s)
    assert reject(s, call=6)
    h = list(s.history)
    # no LLM call; the target is half the messages' 2,871 tokens (task 21, each step 38 + 437) = 1,435:
    # the typed prompt (21) and, from the end, r5 a5 r4 a4 r3 (1,408) fit, a3 does not; the kept tail
    # starts on an assistant message: a4. The notice counts the 4 dropped tool calls
    assert not services.calls and h[0].text == "task" and "Bash ×4" in h[1].text and h[2].blocks[0].id == "tu_4"
    assert len(h) == 6
    assert s.counters.extra["basic_compactions"] == 1
    assert not reject(s, call=6, attempt=2)

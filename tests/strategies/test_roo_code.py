"""roo_code: allowed = 0.9 × window − 8,192; condense to a summary-only fresh start; the
sliding-window truncation when condensing fails; a rejected request handled at 75%, 3 retries.

Read at: RooCodeInc/Roo-Code v3.52.1.
The files read are named in the strategy's docstring."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Message, Usage
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.roo_code import hidden_count

from tests.strategies.peer_env import FakeServices, fail, make, reject, step


def _session(s, total, steps=5):
    s.on_user(Message.user("task"))
    for i in range(steps):
        step(s, i, f"out {i}", usage=Usage(input_uncached=total - 1, output=1) if i == steps - 1 else None)


def test_allowed_and_the_trigger():
    s = make("roo_code", window=200_000)
    assert s.allowed() == 200_000 * 0.9 - 8_192 == 171_808
    _session(s, 171_806)  # + the newest message, "out 4" (5 chars → 2 tokens) = 171,808: not over
    assert not s.should_compact(CallInfo(5, 5.0))
    t = make("roo_code", window=200_000)
    _session(t, 171_807)  # 171,809 > 171,808
    assert t.should_compact(CallInfo(5, 5.0))


def test_condense_is_a_fresh_start_from_the_summary_alone():
    services = FakeServices("the state")
    s = make("roo_code", services=services, window=200_000)
    _session(s, 180_000)
    assert s.build_request(CallInfo(5, 5.0)).rewrite
    assert [m.text for m in s.history] == ["## Conversation Summary\nthe state"]
    (req, spec), = services.calls
    assert req.system.text.startswith("You are a helpful AI assistant tasked with summarizing") and not req.tools.tools
    assert "[assistant tool call]: Bash" in req.messages[0].text and spec.instructions


def test_failed_condense_hides_half_the_messages_behind_a_marker():
    s = make("roo_code", services=FakeServices(fail()), window=200_000)
    _session(s, 180_000)  # u0 a0 r0 … a4 r4: 11 messages
    assert hidden_count(11) == 4  # floor(10 · 0.5) = 5, rounded down to even
    s.build_request(CallInfo(5, 5.0))
    h = list(s.history)
    assert h[0].text == "task" and h[1].text == "[Sliding window truncation: 4 messages hidden to reduce context]"
    assert h[2].blocks[0].id == "tu_2" and len(h) == 2 + 6
    assert s.counters.compactions_succeeded == 1 and s.counters.extra["truncations"] == 1


def test_a_rejected_request_condenses_at_75_percent_three_times_at_most():
    services = FakeServices("S")
    s = make("roo_code", services=services, window=200_000)
    _session(s, 160_000)  # 80%: under the 100% and the allowed size, over the forced 75%
    assert not s.should_compact(CallInfo(5, 5.0))
    assert reject(s, call=5)
    assert s.history[0].text == "## Conversation Summary\nS"
    assert not reject(s, call=5, attempt=4)  # MAX_CONTEXT_WINDOW_RETRIES = 3


def test_the_estimate_after_a_truncation_keeps_the_density_the_usage_measured():
    """Issue #45 (found by the property kit: +73% after a truncation of dense output): the hidden
    messages were taken away at 4 characters per token from a usage that counted them at their true
    density. Now the anchored estimate is scaled by the new request's share of the old one, both from
    characters (as openhands' and context_editing's). Anchored 180,000 + r4 4,000/4 = 181,000; from
    characters the old request is 181 (system and tools) + 4 + 5 · 22 + 5 · 4,000 = 20,295 → 5,074
    tokens, the new one (a0 r0 a1 r1 hidden behind a 64-character marker) 181 + 4 + 64 + 3 · 22 +
    3 · 4,000 = 12,315 → 3,079: 181,000 · 3,079 / 5,074 = 109,834.1 → 109,834 (the old rule:
    181,000 − 2,011 + 16 = 179,005, though 40% of the results were gone)."""
    s = make("roo_code", services=FakeServices(fail()), window=200_000)
    s.on_user(Message.user("task"))
    for i in range(5):
        step(s, i, "r" * 4_000, usage=Usage(input_uncached=179_999, output=1) if i == 4 else None)
    assert s.estimate() == 181_000
    req = s.build_request(CallInfo(5, 5.0))
    assert s.counters.extra["truncations"] == 1 and req.rewrite
    assert req.estimated_tokens == 109_834


def test_the_condense_trigger_the_kit_holds_it_to():
    """manageContext condenses at autoCondenseContextPercent of the window or past the allowed size, the smaller:
    at 32,000 with max tokens 8,192, 0.9 x 32,000 - 8,192 = 20,608 (100% of the window is later); at 50%, 16,000;
    with condensing off, no summary trigger (it only truncates)."""
    from ctxsim.strategies.registry import make_config
    from ctxsim.strategies.roo_code import RooCode

    def at(**kw):
        return RooCode.compacts_above(make_config(RooCode, kw), 32_000, 8_192)

    assert at() == 20_608 and at(auto_condense_percent=50) == 16_000 and at(auto_condense=False) is None

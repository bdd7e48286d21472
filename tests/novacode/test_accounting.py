"""Token accounting: real-usage anchor + 3.5 chars/token estimate (N-COMP-5)."""

from __future__ import annotations

import pytest
from ctxsim.harness.model.conversation import Block, History, Message, SystemPrompt, ToolDef, ToolSet, Usage
from ctxsim.strategies.novacode.accounting import (
    CHARS_PER_TOKEN,
    TokenLedger,
    chars_to_tokens,
    message_tokens,
)

SYSTEM = SystemPrompt.of("s" * 70)            # 70 chars
TOOLS = ToolSet((ToolDef("Read", "r"),))      # payload length computed below


def tools_chars() -> int:
    return len(TOOLS.tools[0].payload)


def test_n_comp_5_default_is_3_5_chars_per_token():
    assert CHARS_PER_TOKEN == 3.5
    assert chars_to_tokens(7) == 2 and chars_to_tokens(8) == 3  # 8 / 3.5 = 2.29 → 3 (rounded up)
    assert chars_to_tokens(0) == 0
    with pytest.raises(ValueError):
        chars_to_tokens(1, 0)


def test_n_comp_5_no_anchor_estimates_everything_from_characters():
    """system 70 + tools + one 35-char message, at 3.5 chars/token, rounded up once."""
    h = History([Message.user("u" * 35)])
    led = TokenLedger()
    expected = chars_to_tokens(70 + tools_chars() + 35)
    assert led.estimate(h, system=SYSTEM, tools=TOOLS) == expected


def test_n_comp_5_anchor_plus_estimate_of_new_messages():
    """The API reported 1,000 uncached + 500 cache write + 8,000 read + 200 output for the call the
    assistant message answered: anchor = 9,700. Then a 700-char tool result: 700 / 3.5 = 200.
    Usage = 9,700 + 200 = 9,900; system and tools are inside the anchor."""
    h = History([Message.user("u" * 35), Message("assistant", (Block.text_block("a" * 10),))])
    led = TokenLedger()
    led.record(Usage(input_uncached=1_000, cache_write_5m=500, cache_read=8_000, output=200), len(h))
    assert led.anchor == 9_700 and led.anchor_len == 2
    assert led.estimate(h, system=SYSTEM, tools=TOOLS) == 9_700
    h = h.append(Message("user", (Block.tool_result("t", "x" * 700),)))
    assert led.estimate(h, system=SYSTEM, tools=TOOLS) == 9_900


def test_n_comp_5_only_messages_after_the_anchor_are_counted():
    """The estimate reads only history[anchor_len:], never the whole history: a history whose old
    messages are huge costs nothing extra once anchored."""
    big = [Message.user("z" * 1_000_000) for _ in range(3)]
    h = History([*big, Message("assistant", (Block.text_block("ok"),))])
    led = TokenLedger()
    led.record(Usage(input_uncached=5, output=1), len(h))
    h = h.append(Message.user("q" * 14))  # 14 / 3.5 = 4
    assert led.estimate(h, system=SYSTEM, tools=TOOLS) == 6 + 4


def test_n_comp_5_rejected_call_keeps_the_previous_anchor():
    h = History([Message.user("u"), Message("assistant", (Block.text_block("a"),))])
    led = TokenLedger()
    led.record(Usage(input_uncached=100, output=10), 2)
    h = h.append(Message.user("x" * 35)).append(Message("assistant", (Block.text_block("b" * 7),)))
    led.record(None, len(h))  # the API rejected that call
    assert led.anchor == 110 and led.anchor_len == 2
    assert led.estimate(h, system=SYSTEM, tools=TOOLS) == 110 + chars_to_tokens(35 + 7)


def test_n_comp_12_clear_drops_the_anchor():
    h = History([Message.user("u" * 35)])
    led = TokenLedger()
    led.record(Usage(input_uncached=999_999), 1)
    led.clear()
    assert led.anchor is None
    assert led.estimate(h, system=SYSTEM, tools=TOOLS) == chars_to_tokens(70 + tools_chars() + 35)


def test_estimate_with_resident_prefix_opaque_system_and_other_rate():
    """No anchor, chars_per_token 2: system 70 + tools + resident 10 + history 20 chars, plus the
    system prompt's opaque tokens (text the trace does not hold) as they are."""
    sysp = SystemPrompt.of("s" * 70, opaque_tokens=1_000)
    led = TokenLedger(chars_per_token=2.0)
    h = History([Message.user("h" * 20)])
    got = led.estimate(h, system=sysp, tools=TOOLS, prefix=[Message.user("r" * 10)])
    assert got == 1_000 + chars_to_tokens(70 + tools_chars() + 10 + 20, 2.0)


def test_anchor_older_than_a_rewritten_history_is_ignored():
    """If history shrank under the anchor (a rewrite the ledger was not told of), the estimate falls
    back to characters rather than reading a negative slice."""
    led = TokenLedger()
    led.record(Usage(input_uncached=50), 5)
    h = History([Message.user("u" * 35)])
    assert led.estimate(h, system=SYSTEM, tools=TOOLS) == chars_to_tokens(70 + tools_chars() + 35)


def test_message_tokens():
    m = Message("assistant", (Block.text_block("a" * 7), Block.tool_use("t", "Read", {"p": 1})))
    assert message_tokens(m) == chars_to_tokens(7 + len('Read {"p": 1}'))


# --- calibrated unanchored estimates (not in the seed: calibrate_unanchored) -------------------------

def test_n_comp_5_a_usage_measures_the_conversations_chars_per_token():
    """A request of 7,000 characters (answer included) the API counted as 2,800 tokens (input 2,700
    + output 100): 2.5 characters per token. With 1,000 opaque tokens (text the trace does not hold)
    the figure is over the 1,800 tokens that have text: 7,000 / 1,800."""
    led = TokenLedger()
    led.record(Usage(input_uncached=2_700, output=100), 2, chars=7_000)
    assert led.observed_cpt == pytest.approx(2.5) and led.anchor_chars == 7_000
    led2 = TokenLedger()
    led2.record(Usage(input_uncached=2_700, output=100), 2, chars=7_000, opaque_tokens=1_000)
    assert led2.observed_cpt == pytest.approx(7_000 / 1_800)
    led3 = TokenLedger()
    led3.record(Usage(input_uncached=2_700, output=100), 2)  # no characters given: nothing measured
    assert led3.observed_cpt is None


def test_n_comp_5_unanchored_estimate_uses_the_measured_rate_never_above_the_seeds():
    """After a clear (a compaction, N-COMP-12) the anchor is gone but the measured 2.5 stays: the
    35 + 70 + tools characters are estimated at 2.5, not 3.5. Anchored estimates keep the seed's
    rate for the new messages. A measured rate above 3.5 (prose) never lowers the estimate; with
    calibration off the seed's rate is used."""
    h = History([Message.user("u" * 35)])
    chars = 70 + tools_chars() + 35
    led = TokenLedger()
    led.record(Usage(input_uncached=2_800), 1, chars=7_000)
    led.clear()
    assert led.observed_cpt == pytest.approx(2.5)
    assert led.estimate(h, system=SYSTEM, tools=TOOLS) == chars_to_tokens(chars, 2.5)
    led.record(Usage(input_uncached=500), 1, chars=1_000)  # anchored again: 2.0 measured
    h2 = h.append(Message.user("q" * 35))
    assert led.estimate(h2, system=SYSTEM, tools=TOOLS) == 500 + 10  # the new message at 3.5
    prose = TokenLedger()
    prose.record(Usage(input_uncached=1_000), 1, chars=5_000)  # 5 chars per token
    prose.clear()
    assert prose.estimate(h, system=SYSTEM, tools=TOOLS) == chars_to_tokens(chars)
    off = TokenLedger(calibrate=False)
    off.record(Usage(input_uncached=2_800), 1, chars=7_000)
    off.clear()
    assert off.estimate(h, system=SYSTEM, tools=TOOLS) == chars_to_tokens(chars)


def test_request_chars_is_incremental_once_anchored():
    """The anchored request's characters plus those of the messages since: the old huge messages
    are not read again."""
    big = [Message.user("z" * 1_000_000) for _ in range(2)]
    h = History([*big, Message("assistant", (Block.text_block("ok"),))])
    led = TokenLedger()
    assert led.request_chars(h, system=SYSTEM, tools=TOOLS) == 70 + tools_chars() + 2_000_002
    led.record(Usage(input_uncached=700_000), len(h), chars=123)
    h = h.append(Message.user("q" * 14))
    assert led.request_chars(h, system=SYSTEM, tools=TOOLS) == 123 + 14

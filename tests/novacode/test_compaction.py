"""Layer 2, the pure part: triggers and the tail choice (N-COMP-1…3, 6…8)."""

from __future__ import annotations

import pytest
from ctxsim.strategies.novacode.compaction import (
    HARD_MARGIN_TOKENS,
    MIN_COMPRESSIBLE_TOKENS,
    SOFT_MARGIN_TOKENS,
    SUMMARY_RESERVE_TOKENS,
    TAIL_MAX_TOKENS,
    TAIL_MIN_MESSAGES,
    TAIL_MIN_TOKENS,
    TailChoice,
    fit_summary_input,
    select_tail,
    thresholds,
    trigger,
    worth_compacting,
)
from hypothesis import given, settings
from hypothesis import strategies as st


def test_constants_are_the_seed_values():
    assert (SUMMARY_RESERVE_TOKENS, SOFT_MARGIN_TOKENS, HARD_MARGIN_TOKENS) == (20_000, 13_000, 3_000)
    assert (TAIL_MIN_TOKENS, TAIL_MIN_MESSAGES, TAIL_MAX_TOKENS) == (10_000, 5, 40_000)
    assert MIN_COMPRESSIBLE_TOKENS == 2_000


# --- N-COMP-1…3 ----------------------------------------------------------------------------------

def test_n_comp_1_effective_window_is_window_minus_20k():
    assert thresholds(200_000).effective == 180_000
    assert thresholds(1_000_000).effective == 980_000


def test_n_comp_2_soft_line_200k_and_1m():
    """200,000 − 20,000 − 13,000 = 167,000; 1,000,000 − 20,000 − 13,000 = 967,000."""
    assert thresholds(200_000).soft == 167_000
    assert thresholds(1_000_000).soft == 967_000


def test_n_comp_3_hard_line_200k_and_1m():
    """200,000 − 20,000 − 3,000 = 177,000; 1,000,000 − 20,000 − 3,000 = 977,000."""
    assert thresholds(200_000).hard == 177_000
    assert thresholds(1_000_000).hard == 977_000


def test_n_comp_2_3_trigger_boundaries_are_inclusive():
    th = thresholds(200_000)
    assert trigger(166_999, th) == "none"
    assert trigger(167_000, th) == "soft"
    assert trigger(176_999, th) == "soft"
    assert trigger(177_000, th) == "hard"


def test_thresholds_follow_the_parameters():
    th = thresholds(200_000, reserve=20_000, soft_margin=30_000, hard_margin=3_000)
    assert (th.soft, th.hard) == (150_000, 177_000)
    with pytest.raises(ValueError):
        thresholds(0)


# --- N-COMP-6 ------------------------------------------------------------------------------------

def test_n_comp_6_both_minimums_walk_until_10k_and_5_messages():
    """Ten messages of 3,000 tokens, no tool results. Walking back: after 4 messages 12,000 ≥ 10,000
    but only 4 messages; the 5th makes 15,000 and 5 messages: boundary 5, tail 15,000, prefix 15,000."""
    c = select_tail([3_000] * 10, [False] * 10)
    assert c == TailChoice(5, 15_000, 15_000)


def test_n_comp_6_either_reading_stops_at_first_minimum():
    """Same history, rule 'either': 4 messages already hold 12,000 ≥ 10,000: boundary 6."""
    c = select_tail([3_000] * 10, [False] * 10, rule="either")
    assert (c.boundary, c.tail_tokens) == (6, 12_000)


def test_n_comp_6_many_small_messages_need_the_token_minimum():
    """Forty messages of 500 tokens: 5 messages give only 2,500; it takes 20 messages for 10,000."""
    c = select_tail([500] * 40, [False] * 40)
    assert (c.boundary, c.tail_tokens, c.prefix_tokens) == (20, 10_000, 10_000)


def test_n_comp_6_cap_wins_over_minimums():
    """Tokens 30,000, 30,000, 8,000, 8,000 (newest last): 8,000 + 8,000 = 16,000 with 2 messages;
    adding a 30,000 would make 46,000 > 40,000: the walk stops below the minimum message count."""
    c = select_tail([30_000, 30_000, 8_000, 8_000], [False] * 4)
    assert (c.boundary, c.tail_tokens, c.prefix_tokens) == (2, 16_000, 60_000)


def test_n_comp_6_a_single_huge_newest_message_is_not_kept():
    """One 50,000-token newest message cannot enter a tail capped at 40,000: the tail is empty and
    everything is summarised (the cap wins: one huge message cannot blow up the tail)."""
    c = select_tail([1_000, 50_000], [False, False])
    assert (c.boundary, c.tail_tokens, c.prefix_tokens) == (2, 0, 51_000)


# --- N-COMP-7 ------------------------------------------------------------------------------------

def test_n_comp_7_boundary_on_tool_result_moves_back_one():
    """Nine messages of 2,500 tokens; message 4 carries a tool_result (its tool_use is in 3).
    Walking back, 5 messages (8..4) hold 12,500 ≥ 10,000: the boundary falls on 4, a result, so it
    moves back one more: boundary 3, tail 6 messages = 15,000 (still under the 40,000 cap)."""
    results = [False, False, False, False, True, False, False, False, False]
    c = select_tail([2_500] * 9, results)
    assert (c.boundary, c.tail_tokens, c.moved) == (3, 15_000, "back")
    # the same history without the result keeps boundary 4
    assert select_tail([2_500] * 9, [False] * 9).boundary == 4


def test_n_comp_7_moves_forward_when_moving_back_breaks_the_cap():
    """Tokens [20,000, 20,000(tool_use), 15,000(tool_result), 5,000, 5,000, 5,000, 5,000]: walking back
    from the newest, 4 × 5,000 = 20,000 with 4 messages; the 15,000 result makes 35,000 and 5
    messages: boundary 2 on a tool_result. Moving back adds 20,000 → 55,000 > 40,000, so the boundary
    moves forward past the result instead: boundary 3, tail 20,000."""
    tokens = [20_000, 20_000, 15_000, 5_000, 5_000, 5_000, 5_000]
    res = [False, False, True, False, False, False, False]
    c = select_tail(tokens, res)
    assert (c.boundary, c.tail_tokens, c.prefix_tokens, c.moved) == (3, 20_000, 55_000, "forward")


# --- N-COMP-8 ------------------------------------------------------------------------------------

def test_n_comp_8_give_up_under_2000_compressible_tokens():
    """Six messages of 2,100: the tail takes 5 (10,500); the prefix is one message of 2,100 ≥ 2,000:
    worth it. With 1,999-token first message, it is not."""
    assert worth_compacting(select_tail([2_100] * 6, [False] * 6))
    c = select_tail([1_999] + [2_100] * 5, [False] * 6)
    assert c.prefix_tokens == 1_999 and not worth_compacting(c)
    assert worth_compacting(c, min_compressible=1_999)


def test_select_tail_rejects_bad_input():
    with pytest.raises(ValueError):
        select_tail([1, 2], [False])
    with pytest.raises(ValueError):
        select_tail([1], [False], rule="some")  # type: ignore[arg-type]


# --- properties ---------------------------------------------------------------------------------

@st.composite
def histories(draw):
    """Well-formed histories: a user message, then turns of assistant (with or without tool uses)
    followed, when it used tools, by a user message of results; sometimes a plain user message."""
    n_turns = draw(st.integers(0, 25))
    tokens = [draw(st.integers(1, 30_000))]
    result = [False]
    pair_of = {}  # result index -> tool_use index
    for _ in range(n_turns):
        uses_tools = draw(st.booleans())
        tokens.append(draw(st.integers(1, 20_000)))
        result.append(False)
        if uses_tools:
            tokens.append(draw(st.integers(1, 60_000)))
            result.append(True)
            pair_of[len(tokens) - 1] = len(tokens) - 2
        elif draw(st.booleans()):
            tokens.append(draw(st.integers(1, 5_000)))
            result.append(False)
    return tokens, result, pair_of


@settings(max_examples=400, deadline=None)
@given(h=histories(), min_tok=st.integers(0, 30_000), min_msgs=st.integers(0, 8),
       cap=st.integers(0, 60_000), rule=st.sampled_from(["both", "either"]))
def test_n_comp_6_7_property_never_splits_a_pair_never_over_cap(h, min_tok, min_msgs, cap, rule):
    tokens, result, pair_of = h
    c = select_tail(tokens, result, min_tok, min_msgs, cap, rule)
    n = len(tokens)
    assert 0 <= c.boundary <= n
    assert c.tail_tokens == sum(tokens[c.boundary:])
    assert c.prefix_tokens == sum(tokens[:c.boundary])
    # N-COMP-7: no tool_result in the tail whose tool_use is in the summarised prefix
    for r, u in pair_of.items():
        assert (r >= c.boundary) == (u >= c.boundary), (r, u, c)
    # N-COMP-6: the cap always holds
    assert c.tail_tokens <= cap
    # the walk stops no later than the minimums require (up to the one-message pair adjustment)
    if c.moved == "none" and c.boundary > 0:
        kept = n - c.boundary
        met = (c.tail_tokens >= min_tok and kept >= min_msgs) if rule == "both" else (
            c.tail_tokens >= min_tok or kept >= min_msgs)
        over_cap = c.tail_tokens + tokens[c.boundary - 1] > cap
        assert met or over_cap
    if c.moved == "none" and c.boundary < n:  # ... and no earlier: one message less was not enough
        kept = n - c.boundary - 1
        less = c.tail_tokens - tokens[c.boundary]
        met_less = (less >= min_tok and kept >= min_msgs) if rule == "both" else (
            less >= min_tok or kept >= min_msgs)
        assert not met_less


# --- the summary request must fit (not a seed rule: see fit_summary_input) --------------------------

def test_fit_summary_input_newest_first_until_the_excess_is_freed():
    """tokens 5,000, 100, 3,000, 50 | 2,000 (boundary 4: the last message is the tail), stub 60.
    Excess 2,500: index 3 (50 ≤ 60) is not worth a stub; index 2 frees 3,000 − 60 = 2,940 ≥ 2,500.
    Excess 4,000: then index 1 (+40 = 2,980) and index 0 (+4,940 = 7,920)."""
    tokens = [5_000, 100, 3_000, 50, 2_000]
    assert fit_summary_input(tokens, 4, 2_500) == [2]
    assert fit_summary_input(tokens, 4, 4_000) == [2, 1, 0]
    assert fit_summary_input(tokens, 4, 0) == []
    assert fit_summary_input(tokens, 4, 10**6) == [2, 1, 0]  # all candidates, never the tail

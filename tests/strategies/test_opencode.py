"""opencode: usable = window − min(output limit, 32,000); prune past the newest 40,000 tool-output
tokens (the last 2 user turns spared, only if more than 20,000 can go); compaction by a separate
agent keeping the last 2 turns within min(8,000, max(2,000, usable/4)); a rejected request compacted.

Read at: anomalyco/opencode (sst/opencode) at commits 001aa6cc and 08f74b9b (2026).
The files read are named in the strategy's docstring."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Message, Usage
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.opencode import COMPACTION_ASK, CONTINUE, PRUNED, tail_budget

from tests.strategies.peer_env import FakeServices, make, reject, step


def test_usable_context_and_the_overflow_check():
    s = make("opencode", window=200_000)
    assert s.usable() == 200_000 - 32_000  # max output 64,000, capped at 32,000
    assert make("opencode", {"reserved_tokens": 20_000}, window=200_000).usable() == 180_000
    s.on_user(Message.user("task"))
    step(s, 0, "x", usage=Usage(input_uncached=100_000, cache_read=67_998, output=1))
    assert not s.should_compact(CallInfo(1, 1.0))  # 167,999
    step(s, 1, "x", usage=Usage(input_uncached=100_000, cache_read=67_999, output=1))
    assert s.should_compact(CallInfo(2, 2.0))  # 168,000
    assert tail_budget(168_000) == 8_000 and tail_budget(4_000) == 2_000


def _turn(s, text, results, start):
    s.on_user(Message.user(text))
    for k, r in enumerate(results):
        step(s, start + k, r)


def test_prune_spares_the_last_two_turns_and_the_newest_protected_output():
    s = make("opencode", {"prune_protect_tokens": 1_000, "prune_minimum_tokens": 500})
    _turn(s, "one", ["a" * 2_000] * 4, 0)  # 500 tokens each
    _turn(s, "two", ["b" * 2_000], 4)
    _turn(s, "three", ["c" * 2_000], 5)
    s.on_user(Message.user("four"))  # turn "three" ended: prune
    out = [b.text for m in s.history for b in m.blocks if b.type == "tool_result"]
    # turns "three" and "two" are the last 2: spared; in turn "one", newest first: 500, 1,000 (kept,
    # not over 1,000), 1,500 and 2,000 over it: 1,000 tokens > 500 → the two oldest pruned
    assert out == [PRUNED, PRUNED, "a" * 2_000, "a" * 2_000, "b" * 2_000, "c" * 2_000]
    assert s.counters.extra["pruned_tool_outputs"] == 2
    t = make("opencode", {"prune_protect_tokens": 1_000, "prune_minimum_tokens": 1_000})
    _turn(t, "one", ["a" * 2_000] * 4, 0)
    _turn(t, "two", ["b" * 2_000], 4)
    _turn(t, "three", ["c" * 2_000], 5)
    t.on_user(Message.user("four"))
    assert PRUNED not in [b.text for m in t.history for b in m.blocks]  # 1,000 is not more than 1,000


def test_compaction_keeps_the_last_turns_that_fit_and_asks_to_continue():
    services = FakeServices("## Goal\nship it")
    s = make("opencode", services=services, window=200_000)
    _turn(s, "one", ["a" * 40_000], 0)  # 10,000 tokens: with it the last 2 turns exceed 8,000
    _turn(s, "two", ["b" * 400], 1)
    step(s, 2, "c", usage=Usage(input_uncached=168_000))
    assert s.build_request(CallInfo(3, 3.0)).rewrite
    texts = [m.text for m in s.history]
    assert texts[:2] == [COMPACTION_ASK, "## Goal\nship it"] and texts[2] == "two" and texts[-1] == CONTINUE
    (req, spec), = services.calls
    # the compaction agent: no system prompt, no tools; tool output cut to 2,000 characters
    assert not req.system.blocks and not req.tools.tools and "a" * 2_000 + "\n...[truncated 38000 chars]" in req.messages[0].text
    assert "b" * 400 not in req.messages[0].text  # the kept turn is not summarised


def test_a_rejected_request_is_compacted_and_sent_again():
    s = make("opencode", services=FakeServices("S"))
    _turn(s, "task", ["x" * 100], 0)
    assert reject(s, call=1)
    assert s.history[1].text == "S"


def test_tool_output_over_50kb_is_cut_to_its_head_and_saved(tmp_path):
    from pathlib import Path

    s = make("opencode", session_dir=tmp_path)
    s.on_user(Message.user("task"))
    text = "\n".join("x" * 99 for _ in range(600))  # 600 lines, 60,000 bytes > 51,200
    step(s, 0, text)
    out = s.history[-1].blocks[0]
    # each line is 100 bytes with its newline: 512 lines fit in 51,200 bytes
    assert out.text.startswith("\n".join(["x" * 99] * 512) + "\n\n...output truncated: 8,800 more characters")
    assert Path(out.meta["saved"]).read_text() == text and s.counters.spills == 1
    step(s, 1, "\n".join(["y"] * 2_000))  # 2,000 lines, 3,999 bytes: within both limits
    assert s.history[-1].blocks[0].text == "\n".join(["y"] * 2_000)


def test_a_read_of_the_saved_output_is_not_cut_again(tmp_path):
    from pathlib import Path

    from ctxsim.harness.model.conversation import Block

    s = make("opencode", session_dir=tmp_path)
    s.on_user(Message.user("task"))
    text = "\n".join("x" * 99 for _ in range(600))  # 60,000 bytes: cut to 512 lines and saved
    step(s, 0, text)
    saved = s.history[-1].blocks[0].meta["saved"]
    rel = "/".join(Path(saved).parts[-2:])  # tool-output/tu_0.txt, as the model may name it
    for i, inp in ((1, {"filePath": saved}), (2, {"filePath": rel}), (3, {"command": f"cat {rel}"})):
        s.build_request(CallInfo(i, float(i)))
        s.on_response(Message("assistant", (Block.tool_use(f"tu_{i}", "Read", inp),)), None)
        s.on_tool_results(Message("user", (Block.tool_result(f"tu_{i}", text),)))
        assert s.history[-1].blocks[0].text == text  # the 60,000 bytes whole, not cut and saved again
    assert s.counters.spills == 1 and s.counters.extra["readback_exempt"] == 3
    step(s, 4, text)  # another output that size, not a read-back: cut and saved as before
    assert s.history[-1].blocks[0].text.endswith(f"the full output is in {tmp_path / 'tool-output' / 'tu_4.txt'}")
    assert s.counters.spills == 2

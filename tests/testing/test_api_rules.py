"""The Messages API's rules beyond pairing and size (the ``api`` invariant), on hand-built requests."""

from __future__ import annotations

from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolDef,
    ToolSet,
)
from ctxsim.harness.provider import protocol
from ctxsim.harness.testing.api_rules import api_errors, breakpoint_error, first_message_error, thinking_error

SYSTEM = SystemPrompt.of("You are a coding agent.")
TOOLS = ToolSet((ToolDef("Read"),))


def req(msgs, bps=(), system=SYSTEM, tools=TOOLS) -> Request:
    return Request(system, tools, History(msgs), tuple(bps))


def call(*ids: str, thinking: str | None = None) -> Message:
    blocks = ([Block("thinking", thinking)] if thinking else []) + [Block.tool_use(i, "Read", {}) for i in ids]
    return Message("assistant", tuple(blocks))


def results(*ids: str) -> Message:
    return Message("user", tuple(Block.tool_result(i, "ok") for i in ids))


GOAL = Message.user("fix the tests")


def test_at_most_four_cache_breakpoints():
    four = [Breakpoint("tools"), Breakpoint("system"), Breakpoint(0), Breakpoint(2)]
    msgs = [GOAL, call("a"), results("a")]
    assert breakpoint_error(req(msgs, four)) == ""
    assert breakpoint_error(req(msgs, [*four, Breakpoint(1)])) == "5 cache breakpoints (the API allows 4)"


def test_each_breakpoint_on_a_block_that_exists():
    msgs = [GOAL, call("a"), results("a")]
    assert breakpoint_error(req(msgs, [Breakpoint(3)])) == \
        "a cache breakpoint on message 3 of a 3-message request (no such block)"
    assert "message -1" in breakpoint_error(req(msgs, [Breakpoint(-1)]))
    assert breakpoint_error(req(msgs, [Breakpoint("tools")], tools=ToolSet())) == \
        "a cache breakpoint on the tools array, which is empty"
    assert breakpoint_error(req(msgs, [Breakpoint("system")], system=SystemPrompt())) == \
        "a cache breakpoint on the system prompt, which is empty"
    # a system prompt the trace has no text for (opaque tokens) is there: it can be marked
    assert breakpoint_error(req(msgs, [Breakpoint("system")], system=SystemPrompt((), opaque_tokens=500))) == ""


def test_no_empty_or_whitespace_text_block():
    empty = Message("user", (Block.tool_result("a", "ok"), Block.text_block("")))
    spaces = Message("user", (Block.tool_result("a", "ok"), Block.text_block(" \n")))
    assert protocol.content_error(req([GOAL, call("a"), empty])) == "message 2 (user) holds an empty text block"
    assert protocol.content_error(req([GOAL, call("a"), spaces])) == "message 2 (user) holds a text block of whitespace only"
    # an empty tool result is fine: the API takes a tool_result with no content
    assert protocol.content_error(req([GOAL, call("a"), Message("user", (Block.tool_result("a", ""),))])) == ""
    assert protocol.content_error(req([GOAL, Message("assistant", ())])) == "message 1 (assistant) has no content"
    assert protocol.content_error(req([GOAL, Message("assistant", (Block("thinking", ""), Block.text_block("x")))])) == \
        "message 1 (assistant) holds an empty thinking block"
    assert "system prompt holds a text block of whitespace only" in \
        api_errors(req([GOAL], system=SystemPrompt((Block.text_block("  "),))))[0]


def test_tool_results_come_first_in_their_user_turn():
    """platform.claude.com, handle-tool-calls: "the tool_result blocks must come FIRST in the
    content array. Any text must come AFTER all tool results"."""
    after = Message("user", (Block.tool_result("a", "ok"), Block.tool_result("b", "ok"), Block.text_block("note")))
    before = Message("user", (Block.text_block("note"), Block.tool_result("a", "ok"), Block.tool_result("b", "ok")))
    between = Message("user", (Block.tool_result("a", "ok"), Block.text_block("note"), Block.tool_result("b", "ok")))
    assert protocol.content_error(req([GOAL, call("a", "b"), after])) == ""
    assert protocol.content_error(req([GOAL, call("a", "b"), before])) == \
        "tool_result for a is not first in the user turn (message 2: it follows a text block)"
    assert "tool_result for b is not first" in protocol.content_error(req([GOAL, call("a", "b"), between]))
    # consecutive user messages are one turn (the API merges them): a text message, then the results
    split = [GOAL, call("a"), Message.user("[sub-agent finished]"), results("a")]
    assert protocol.content_error(req(split)) == \
        "tool_result for a is not first in the user turn (message 3: it follows a text block)"
    # a new user turn after the model's answer starts afresh
    assert protocol.content_error(req([GOAL, call("a"), results("a"), call("b"), results("b")])) == ""


def test_tool_use_ids_are_unique_in_a_request():
    """The API's 400 "messages.5.content.1: `tool_use` ids must be unique" (anthropics/claude-code
    #20700, #21083): an id reused by a later call, or twice in one call, is refused; distinct ids pass.
    A strategy that numbers its own calls afresh at each launch reuses the ids its resumed history holds."""
    ok = [GOAL, call("a"), results("a"), call("b"), results("b")]
    assert protocol.content_error(req(ok)) == ""
    again = [GOAL, call("a"), results("a"), call("a"), results("a")]
    assert protocol.content_error(req(again)) == "message 3 (assistant) holds tool_use id a again: tool_use ids must be unique"
    twice = Message("assistant", (Block.tool_use("c", "Read", {}), Block.tool_use("c", "Read", {})))
    assert "tool_use id c again" in protocol.content_error(req([GOAL, twice, results("c")]))
    assert any("must be unique" in e for e in api_errors(req(again)))


def test_first_message_is_the_users():
    assert first_message_error(req([GOAL, call("a"), results("a")])) == ""
    summary_first = Message("assistant", (Block.text_block("Summary of the work so far"),))
    assert first_message_error(req([summary_first, GOAL])).startswith("the first message is the assistant's")


def test_the_open_tool_loop_keeps_its_thinking():
    thinking = {"a": "let me read it", "b": "let me read it"}
    with_it = [GOAL, call("a", thinking="let me read it"), results("a")]
    without = [GOAL, call("a"), results("a")]
    changed = [GOAL, call("a", thinking="let me read it, edited"), results("a")]
    assert thinking_error(req(with_it), thinking) == ""
    assert thinking_error(req(without), thinking) == ("thinking stripped from the open tool loop: the assistant turn "
                                                       "of a must start with its thinking block (it starts with a "
                                                       "tool_use block)")
    assert "changed" in thinking_error(req(changed), thinking)
    # a closed loop (the model answered, the user spoke) asks for nothing
    closed = [GOAL, call("a"), results("a"), Message("assistant", (Block.text_block("done"),)), Message.user("thanks")]
    assert thinking_error(req(closed), thinking) == ""
    # a call whose recorded answer had no thinking asks for none
    assert thinking_error(req([GOAL, call("c"), results("c")]), thinking) == ""
    # text after the results (a reminder) keeps the loop open
    reminder = [GOAL, call("a"), results("a"), Message.user("<system-reminder>x</system-reminder>")]
    assert thinking_error(req(reminder), thinking).startswith("thinking stripped")


# --- mixed TTLs (platform.claude.com/docs/en/build-with-claude/prompt-caching, "Mixing different TTLs") ---

def test_a_one_hour_marker_may_not_follow_a_five_minute_one():
    msgs = [GOAL, call("a"), results("a")]
    bad = req(msgs, [Breakpoint("tools", "5m"), Breakpoint("system", "5m"), Breakpoint(2, "1h")])
    assert protocol.ttl_order_error(bad) == ("a 1h cache_control on message 2 after a 5m one on the tools: a longer "
                                             "TTL must come before a shorter one")
    assert protocol.ttl_order_error(bad) in api_errors(bad)
    assert [r.reason for r in protocol.validate(bad, 1_000, 10)] == ["breakpoints"]  # the engine refuses it too


def test_one_hour_first_and_unspecified_ttls_are_accepted():
    msgs = [GOAL, call("a"), results("a")]
    assert protocol.ttl_order_error(req(msgs, [Breakpoint("tools", "1h"), Breakpoint("system", "1h"),
                                               Breakpoint(2, "5m")])) == ""
    # order is prompt order, not the order the markers are listed in
    assert protocol.ttl_order_error(req(msgs, [Breakpoint(2, "5m"), Breakpoint("system", "1h")])) == ""
    assert "on the system after a 5m one on the tools" in protocol.ttl_order_error(
        req(msgs, [Breakpoint("system", "1h"), Breakpoint("tools", "5m")]))
    # None is the run's TTL, whatever it is: not judged
    assert protocol.ttl_order_error(req(msgs, [Breakpoint("system"), Breakpoint(2, "1h")])) == ""


def test_a_main_request_with_tool_blocks_defines_tools():
    from ctxsim.harness.testing.api_rules import tools_error

    msgs = [GOAL, call("a"), results("a")]
    assert tools_error(req(msgs)) == ""
    assert tools_error(req([GOAL], tools=ToolSet())) == ""   # no tool block: no tools needed
    assert tools_error(req(msgs, tools=ToolSet())).startswith("message 1 holds a tool_use block and the request defines no tools")
    # held on the agent's own loop (thinking_of given); a side call (Codex compacts with no tools) is not
    assert any("defines no tools" in e for e in api_errors(req(msgs, tools=ToolSet()), {}))
    assert api_errors(req(msgs, tools=ToolSet())) == []

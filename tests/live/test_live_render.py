"""Request -> Messages API params (harness/llm/render.py)."""

from __future__ import annotations

import pytest
from ctxsim.harness.llm.render import RenderError, breakpoints_in, count_tokens_params, to_anthropic_params
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
from hypothesis import given, settings
from hypothesis import strategies as st
from loopback import assert_sdk_typed

TOOLS = ToolSet((ToolDef("Read", "read a file", {"type": "object", "properties": {"path": {"type": "string"}}}),
                 ToolDef("Bash", "run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}})))
SYSTEM = SystemPrompt.of("You are a coding agent.", "Project rules: be brief.")


def conversation() -> History:
    return History([
        Message.user("fix the failing test"),
        Message("assistant", (Block("thinking", "let me look"), Block.text_block("Reading it."),
                              Block.tool_use("tu_1", "Read", {"path": "/src/a.py"}))),
        Message("user", (Block.tool_result("tu_1", "def f(): return 1"),)),
        Message("assistant", (Block.text_block("Found it."),)),
    ])


def req(history: History | None = None, bps=(), system=SYSTEM, tools=TOOLS) -> Request:
    return Request(system, tools, history if history is not None else conversation(), tuple(bps))




def test_breakpoints_tools_system_and_message_with_ttl():
    """Breakpoint("tools") on the last tool, ("system") on the last system block, (i) on the last
    content block of message i (N-CACHE-1 positions), ttl carried."""
    p = to_anthropic_params(req(bps=[Breakpoint("tools", "1h"), Breakpoint("system"), Breakpoint(2)]),
                            "claude-sonnet-4-6", 1000)
    assert p["model"] == "claude-sonnet-4-6" and p["max_tokens"] == 1000
    assert "cache_control" not in p["tools"][0]
    assert p["tools"][1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in p["system"][0]
    assert p["system"][1] == {"type": "text", "text": "Project rules: be brief.",
                              "cache_control": {"type": "ephemeral", "ttl": "5m"}}
    # message 2 is the tool_result turn (index 2 of the rendered turns too: nothing merged here)
    assert p["messages"][2]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert breakpoints_in(p) == 3
    assert_sdk_typed(p)


def test_n_cache_2_tools_shallow_copied_shared_schemas_untouched():
    """N-CACHE-2: marking the last tool never mutates the shared tool definitions."""
    schema = TOOLS.tools[1].input_schema
    before = dict(schema)
    p1 = to_anthropic_params(req(bps=[Breakpoint("tools")]), "m", 10)
    p2 = to_anthropic_params(req(bps=[]), "m", 10)
    assert "cache_control" in p1["tools"][1] and "cache_control" not in p2["tools"][1]
    assert dict(schema) == before and "cache_control" not in TOOLS.tools[1].to_api()
    p1["tools"][1]["input_schema"]["properties"] = {}  # a caller mutating the rendered copy ...
    assert TOOLS.tools[1].input_schema == before       # ... cannot reach the shared definition


def test_thinking_and_blank_text_are_not_sent():
    """A recorded thinking block has no valid signature, a blank text block is a 400: neither sent."""
    h = History([Message.user("go"),
                 Message("assistant", (Block("thinking", "hmm"), Block.text_block("  "),
                                       Block.tool_use("tu_9", "Bash", {"cmd": "ls"}))),
                 Message("user", (Block.tool_result("tu_9", "a b"),))])
    p = to_anthropic_params(req(h), "m", 10)
    assert [b["type"] for b in p["messages"][1]["content"]] == ["tool_use"]
    assert_sdk_typed(p)


def test_a_turn_with_nothing_sendable_is_dropped_and_neighbours_merge():
    h = History([Message.user("a"), Message("assistant", (Block("thinking", "x"),)), Message.user("b")])
    p = to_anthropic_params(req(h), "m", 10)
    assert p["messages"] == [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                          {"type": "text", "text": "b"}]}]


def test_consecutive_same_role_merged_with_tool_results_first():
    """An injection placed before the tool results would be a 400 (text before tool_result): the
    merged user turn carries the results first, and the breakpoint travels with its block."""
    h = History([Message.user("go"),
                 Message("assistant", (Block.tool_use("tu_1", "Read", {"path": "x"}),)),
                 Message.user("<memory>prefers tabs</memory>"),
                 Message("user", (Block.tool_result("tu_1", "content"),))])
    p = to_anthropic_params(req(h, bps=[Breakpoint(2)]), "m", 10)
    assert len(p["messages"]) == 3
    merged = p["messages"][2]["content"]
    assert [b["type"] for b in merged] == ["tool_result", "text"]
    assert merged[1]["cache_control"]["type"] == "ephemeral" and "cache_control" not in merged[0]
    assert_sdk_typed(p)


def test_extra_user_text_joins_the_last_user_turn_or_opens_one():
    p = to_anthropic_params(req(conversation().truncate(3)), "m", 10, "Summarise.")
    assert p["messages"][-1]["content"][-1] == {"type": "text", "text": "Summarise."}
    assert len(p["messages"]) == 3
    p = to_anthropic_params(req(conversation()), "m", 10, "Summarise.")
    assert p["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "Summarise."}]}
    assert len(p["messages"]) == 5


def test_opaque_system_tokens_refused_in_live_mode():
    with pytest.raises(RenderError, match="opaque tokens"):
        to_anthropic_params(req(system=SystemPrompt.of("x", opaque_tokens=5000)), "m", 10)


def test_bad_breakpoints_and_sizes_are_clear_errors():
    with pytest.raises(RenderError, match="message 9, but the request has 4"):
        to_anthropic_params(req(bps=[Breakpoint(9)]), "m", 10)
    with pytest.raises(RenderError, match="max_tokens"):
        to_anthropic_params(req(), "m", 0)
    p = to_anthropic_params(req(bps=[Breakpoint(-1)]), "m", 10)  # -1: the last message
    assert "cache_control" in p["messages"][-1]["content"][-1]


def test_breakpoint_on_missing_tools_or_system_places_nothing():
    p = to_anthropic_params(req(bps=[Breakpoint("tools"), Breakpoint("system")], system=SystemPrompt(),
                                tools=ToolSet()), "m", 10)
    assert "tools" not in p and "system" not in p and breakpoints_in(p) == 0


def test_count_tokens_params_keep_what_the_endpoint_takes():
    p = to_anthropic_params(req(bps=[Breakpoint("system")]), "m", 10)
    assert set(count_tokens_params(p)) == {"model", "system", "tools", "messages"}


# --- property: any well-formed conversation renders to SDK-typed, alternating, paired turns ---------

@st.composite
def conversations(draw):
    msgs = [Message.user(draw(st.text(min_size=1, max_size=20)))]
    n = draw(st.integers(0, 6))
    k = 0
    for _ in range(n):
        uses = draw(st.integers(0, 3))
        blocks = []
        if draw(st.booleans()):
            blocks.append(Block("thinking", "t"))
        if draw(st.booleans()) or uses == 0:
            blocks.append(Block.text_block(draw(st.sampled_from(["ok", " ", "done."]))))
        ids = []
        for _ in range(uses):
            k += 1
            ids.append(f"tu_{k}")
            blocks.append(Block.tool_use(f"tu_{k}", "Read", {"path": f"/f{k}"}))
        msgs.append(Message("assistant", tuple(blocks)))
        if ids:
            if draw(st.booleans()):
                msgs.append(Message.user("injected reminder"))
            msgs.append(Message("user", tuple(Block.tool_result(i, "r") for i in ids)))
        else:
            msgs.append(Message.user(draw(st.text(min_size=1, max_size=10).filter(str.strip))))
    return History(msgs)


@settings(max_examples=60, deadline=None)
@given(conversations(), st.data())
def test_property_rendered_params_are_sdk_typed_and_alternate(h, data):
    n = len(h)
    bps = data.draw(st.lists(st.sampled_from([Breakpoint("tools"), Breakpoint("system"), Breakpoint(n - 1),
                                              Breakpoint(0)]), max_size=3, unique=True))
    p = to_anthropic_params(req(h, bps=bps), "claude-sonnet-4-6", 64, "Summarise.")
    assert_sdk_typed(p)
    roles = [t["role"] for t in p["messages"]]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
    assert breakpoints_in(p) <= len(bps)
    for i, t in enumerate(p["messages"]):
        if t["role"] == "assistant":
            uses = {b["id"] for b in t["content"] if b["type"] == "tool_use"}
            if uses:
                nxt = p["messages"][i + 1]["content"]
                assert {b["tool_use_id"] for b in nxt if b["type"] == "tool_result"} == uses
                types = [b["type"] for b in nxt]
                assert types == sorted(types, key=lambda x: x != "tool_result")

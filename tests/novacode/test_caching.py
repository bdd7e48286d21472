"""Cache breakpoints on the stable prefixes (N-CACHE-1…3)."""

from __future__ import annotations

import copy

from ctxsim.harness.model.conversation import Block, Breakpoint, Message
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.novacode.caching import (
    breakpoints,
    last_user_index,
    mark_last_tool,
    mark_last_user_message,
    mark_system,
)

from tests.helpers_traces import Builder


def convo() -> list[Message]:
    return [Message.user("hi"),
            Message("assistant", (Block.tool_use("t1", "Read", {"file_path": "/a"}),)),
            Message("user", (Block.tool_result("t1", "A"),))]


def test_n_cache_1_three_breakpoints_tools_system_last_user_message():
    bps = breakpoints(convo())
    assert bps == (Breakpoint("tools"), Breakpoint("system"), Breakpoint(2))
    assert len(bps) <= 4  # the Anthropic maximum


def test_n_cache_1_last_user_message_not_last_message():
    msgs = [*convo(), Message("assistant", (Block.text_block("done"),))]
    assert last_user_index(msgs) == 2
    assert breakpoints(msgs, "1h")[-1] == Breakpoint(2, "1h")


def test_n_cache_1_nothing_to_mark():
    assert breakpoints([], tools=False, system=False) == ()
    assert breakpoints(convo(), tools=False) == (Breakpoint("system"), Breakpoint(2))


def test_n_cache_2_tools_array_shallow_copied_registry_never_mutated():
    """The registry's shared schema dicts: after marking, the originals are unchanged (deep-equal to
    a snapshot and without cache_control), the copy's last element is a new dict carrying the
    marker, and the other elements are the very same objects (a shallow copy, not a deep one)."""
    registry = [
        {"name": "Read", "description": "read", "input_schema": {"type": "object", "properties": {}}},
        {"name": "Bash", "description": "run", "input_schema": {"type": "object", "properties": {}}},
    ]
    snapshot = copy.deepcopy(registry)
    ids = [id(t) for t in registry]
    marked = mark_last_tool(registry, "1h")
    assert registry == snapshot and all("cache_control" not in t for t in registry)
    assert [id(t) for t in registry] == ids
    assert marked is not registry
    assert marked[0] is registry[0]
    assert marked[1] is not registry[1]
    assert marked[1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert marked[1]["input_schema"] is registry[1]["input_schema"]  # shallow: nested shared
    # marking again (the next request) starts from clean objects: never two markers
    again = mark_last_tool(registry)
    assert again[1]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert mark_last_tool([]) == []


def test_n_cache_2_system_and_message_marking_also_on_copies():
    system = [{"type": "text", "text": "You are NovaCode."}]
    snap_s = copy.deepcopy(system)
    assert mark_system(system)[0]["cache_control"]["type"] == "ephemeral" and system == snap_s
    msgs = [m.to_api() for m in convo()]
    snap = copy.deepcopy(msgs)
    out = mark_last_user_message(msgs)
    assert msgs == snap
    assert out[2]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert out[0] is msgs[0] and out[1] is msgs[1]
    s = mark_last_user_message([{"role": "user", "content": "plain"}])
    assert s[0]["content"] == [{"type": "text", "text": "plain", "cache_control": {"type": "ephemeral", "ttl": "5m"}}]


def test_n_cache_3_prefix_is_byte_stable_each_call_reads_the_previous_request():
    """Through the engine's provider model: with results final when they enter history and the
    breakpoint on the last user message, call k+1 reads exactly call k's whole input from cache."""
    b = Builder()
    b.user("Fix the bug. " + "w " * 3_000)
    for i in range(6):
        b.call(f"step {i}", results=[f"result {i} " * 500])
    calls = replay(b.build(), "novacode", None, RunConfig(window=200_000)).calls
    main = calls[calls.kind == "main"].reset_index(drop=True)
    assert main.loc[0, "cache_read"] == 0 and main.loc[0, "cache_write_5m"] == main.loc[0, "context_tokens"]
    for k in range(1, len(main)):
        assert main.loc[k, "cache_read"] == main.loc[k - 1, "context_tokens"]
        assert main.loc[k, "cache_write_5m"] == main.loc[k, "context_tokens"] - main.loc[k - 1, "context_tokens"]


def test_n_cache_1_ttl_parameter_reaches_the_bill():
    b = Builder()
    b.user("Fix the bug. " + "w " * 3_000)
    b.call("step", results=["r " * 500])
    b.call("done")
    calls = replay(b.build(), "novacode", {"cache_ttl": "1h"}, RunConfig(window=200_000)).calls
    assert calls.cache_write_1h.sum() > 0 and calls.cache_write_5m.sum() == 0

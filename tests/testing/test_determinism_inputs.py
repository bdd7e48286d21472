"""Same inputs, same requests (``deterministic``); inputs never edited in place (``inputs``); where a
crash happened (``crash_site``)."""

from __future__ import annotations

from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Block, History, Message, Request, SystemPrompt, ToolSet
from ctxsim.harness.testing import conversations as conv
from ctxsim.harness.testing.crash import crash_site
from ctxsim.harness.testing.determinism import Canon, request_difference
from ctxsim.harness.testing.inputs import InputGuard

SYSTEM = SystemPrompt.of("s")


def req(*texts: str) -> Request:
    return Request(SYSTEM, ToolSet(), History([Message.user(t) for t in texts]))


def test_same_requests_in_two_run_directories_are_the_same():
    a = req("go", "saved to /dev/shm/ctxsim-check-000001/tool-results/x.txt")
    b = req("go", "saved to /dev/shm/ctxsim-check-000002/tool-results/x.txt")
    same = Canon(), Canon("/dev/shm/ctxsim-check-000002", "/dev/shm/ctxsim-check-000001")
    assert request_difference(a, b, *same) == ""
    # without the directories mapped, the paths differ
    assert request_difference(a, b, Canon(), Canon()).startswith("message 1 (user) differs:")


def test_a_random_name_is_a_difference():
    a, b = req("go", "saved to tool-results/3f2a9c.txt"), req("go", "saved to tool-results/81bd04.txt")
    assert "message 1 (user) differs: " in request_difference(a, b, Canon(), Canon())
    assert request_difference(req("a"), req("a", "b"), Canon(), Canon()) == "1 messages in the first run, 2 in the second"


def test_input_guard_names_a_tool_input_edited_in_place():
    b = conv.ConversationBuilder()
    evs = b.start_session() + b.user(40) + b.call(conv.Turn(calls=(conv.ToolCall("Read", 10, seed=3),)))
    g = InputGuard(b.header)
    g.add(evs)
    assert g.changes() == []
    use = next(c for e in evs if isinstance(e, tr.AssistantEvent) for c in e.content if isinstance(c, tr.ToolUseContent))
    use.input["file_path"] = "/abs/" + use.input["file_path"]  # what a careless strategy does to the trace
    (line,) = g.changes()
    assert line.startswith(f"the trace's tool_use {use.id} input was changed in place: ")
    assert g.changes() == []  # reported once
    # the failing trace is written as it was generated
    assert g.pristine(evs[2]).content[-1].input == {"file_path": "src/pkg/module_3.py"}


def test_input_guard_names_a_shared_tool_schema_edited_in_place():
    h = conv.default_header()
    g = InputGuard(h)
    h.tools[-1].input_schema["cache_control"] = {"type": "ephemeral"}
    (line,) = g.changes()
    assert line.startswith('the shared tool schema of Skill was changed in place: {"properties": {"command": '
                           '{"type": "string"}}, "type": "object"} -> {"cache_control": {"type": "ephemeral"}, ')
    assert "cache_control" not in conv.default_header().tools[-1].input_schema  # each header has its own copies


def test_crash_site_names_the_line_that_raised_not_the_library():
    def title(text: str) -> str:
        return text.splitlines()[0]

    try:
        title("")
    except IndexError as e:
        site = crash_site(e)
    assert site.startswith("tests/testing/test_determinism_inputs.py:") and site.endswith(" in title")
    try:
        {}["exit_code"]
    except KeyError as e:
        assert crash_site(e).endswith("in test_crash_site_names_the_line_that_raised_not_the_library")


def test_blocks_have_no_state_the_canon_would_miss():
    """The canonical form is the API form: a block's meta (strategy bookkeeping, never sent) is not in it."""
    a = Request(SYSTEM, ToolSet(), History([Message("user", (Block.text_block("x", spilled="/a"),))]))
    b = Request(SYSTEM, ToolSet(), History([Message("user", (Block.text_block("x", spilled="/b"),))]))
    assert request_difference(a, b, Canon(), Canon()) == ""

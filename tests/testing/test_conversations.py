"""The conversation generators: valid traces, shaped like agent sessions."""

from __future__ import annotations

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.testing import conversations as conv
from hypothesis import given, settings
from hypothesis import strategies as st


def test_text_of_has_exactly_the_size_asked_and_is_deterministic():
    assert conv.text_of(0) == ""
    for n in (1, 7, 1_000, 250_000):
        assert len(conv.text_of(n, 3, "label")) == n
    assert conv.text_of(500, 9) == conv.text_of(500, 9)
    assert conv.text_of(500, 9) != conv.text_of(500, 10)
    assert conv.text_of(2_000_000, 1).startswith(conv.text_of(1_000, 1))  # a prefix of the same slice


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(conv.result_sizes(150_000))
def test_result_sizes_stay_in_bounds(n):
    assert 0 <= n <= 150_000


def test_builder_parallel_calls_results_and_errors():
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(100)
    evs = b.call(conv.Turn(calls=(conv.ToolCall("Read", 1_000), conv.ToolCall("Bash", 50, is_error=True)),
                           thinking=200, text=40, interleave=True, shuffle_results=True))
    a = evs[0]
    kinds = [c.type for c in a.content]
    # thinking, text, the first call, a text between the calls, the second call
    assert kinds == ["thinking", "text", "tool_use", "text", "tool_use"]
    results = evs[1:]
    assert [r.tool_use_id for r in results] == ["toolu_0002", "toolu_0001"]  # shuffled: reversed
    assert len(results[1].content) == 1_000 and not results[1].is_error
    assert results[0].is_error
    assert b.phase == "call"
    b.call(conv.Turn(text=30))
    assert b.phase == "user"
    b.end_session()
    t = b.trace()
    assert t.calls == 2


def test_builder_crash_leaves_calls_open_and_resume_is_valid():
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(10)
    b.call(conv.Turn(calls=(conv.ToolCall("Read", 10),)), crash=True)
    assert b.phase == "closed"
    b.start_session(resume=True)
    b.user(10)
    b.call(conv.Turn(text=10))
    t = b.trace()  # valid: the checker lets a crashed session's calls dangle until the resume
    assert [type(e).__name__ for e in t.events][:5] == ["SessionStart", "UserEvent", "AssistantEvent",
                                                       "SessionEnd", "SessionStart"]
    assert t.events[4].resume


def test_builder_isolated_subtask_runs_inside_the_open_task_call():
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(10)
    evs = b.subtask([conv.Turn(calls=(conv.ToolCall("Grep", 100),))], isolated=True)
    names = [type(e).__name__ for e in evs]
    assert names == ["AssistantEvent", "SubtaskStart", "UserEvent", "AssistantEvent", "ToolResultEvent",
                     "AssistantEvent", "SubtaskEnd", "ToolResultEvent"]
    assert evs[-1].tool_use_id == evs[0].content[-1].id  # the Task result answers the Task call
    b.trace()


def test_builder_refuses_steps_out_of_order():
    b = conv.ConversationBuilder()
    with pytest.raises(ValueError, match="phase 'closed'"):
        b.user()
    b.start_session()
    with pytest.raises(ValueError, match="model call"):
        b.call(conv.Turn())


@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(conv.conversations(max_steps=25, max_result_size=100_000))
def test_conversations_are_valid_traces(t):
    # validated when drawn; round-trips through the writer like any trace
    again = tr.validate_events(t.header, t.events)
    assert again.content_hash == t.content_hash
    assert t.calls >= 1
    assert isinstance(t.events[0], tr.SessionStart) and isinstance(t.events[-1], tr.SessionEnd)


@settings(max_examples=10, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_conversations_can_leave_out_crashes_and_restarts(data):
    t = data.draw(conv.conversations(max_steps=15, max_result_size=10_000, restarts=False, crashes=False))
    starts = [e for e in t.events if isinstance(e, tr.SessionStart)]
    assert len(starts) == 1


def test_builder_reads_the_same_files_by_absolute_and_relative_paths_and_activates_skills():
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(10)
    # a dozen files: seeds 3 and 15 name module_3, by a relative path (3 % 3 == 0) and an absolute one
    evs = b.call(conv.Turn(calls=(conv.ToolCall("Read", 10, seed=3), conv.ToolCall("Read", 10, seed=4),
                                  conv.ToolCall("Skill", 30, seed=1), conv.ToolCall("Skill", 30, seed=2))))
    inputs = [c.input for c in evs[0].content if c.type == "tool_use"]
    assert inputs == [{"file_path": "src/pkg/module_3.py"}, {"file_path": "/repo/src/pkg/module_4.py"},
                      {"command": "xlsx"}, {"skill": "frontend-design"}]  # Claude Code has spelt it both ways
    assert evs[3].content.startswith("[skill xlsx: procedure]")


def test_builder_error_results_come_in_every_size_and_may_be_empty():
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(10)
    evs = b.call(conv.Turn(calls=(conv.ToolCall("Bash", 60_000, is_error=True), conv.ToolCall("Bash", 0, is_error=True))))
    big, empty = evs[1:]
    assert big.is_error and len(big.content) == 60_000  # a failing test log is long
    assert empty.is_error and empty.content == ""


def test_builder_parallel_sub_agents_run_one_after_the_other_and_answer_together():
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(10)
    evs = b.subtask([], parallel=[[conv.Turn(calls=(conv.ToolCall("Read", 10),))]])
    tasks = [c.id for c in evs[0].content if c.type == "tool_use"]
    assert len(tasks) == 2
    kinds = [type(e).__name__ for e in evs[1:]]
    assert kinds == ["SubtaskStart", "UserEvent", "AssistantEvent", "SubtaskEnd",
                     "SubtaskStart", "UserEvent", "AssistantEvent", "ToolResultEvent", "AssistantEvent", "SubtaskEnd",
                     "ToolResultEvent", "ToolResultEvent"]
    assert [e.tool_use_id for e in evs[-2:]] == tasks
    b.call(conv.Turn(text=10))
    b.end_session()
    b.trace()  # valid, time never goes back


def test_builder_clock_crosses_midnight_and_nights_pass_between_launches():
    b = conv.ConversationBuilder()
    b.t = conv.DAY_S - 36  # the launch 30 s later, the user 5 s after it, the answer 3 s after that
    b.start_session()
    b.user(10)
    b.call(conv.Turn(text=10))
    b.end_session()
    (start,) = b.start_session(resume=True, pause=8 * 3_600)
    assert b.events[1].t < conv.DAY_S < b.events[2].t  # midnight between the user's message and the answer
    assert start.t > conv.DAY_S + 8 * 3_600 - 100


def test_builder_read_back_by_cat_with_siblings_and_of_a_missing_file():
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(10)
    evs = b.read_back("tool-results/toolu_0001.txt", "0123456789", 2, 5, tool="Bash",
                      siblings=(conv.ToolCall("Grep", 20),))
    uses = [c for c in evs[0].content if c.type == "tool_use"]
    assert uses[0].input == {"command": "cat tool-results/toolu_0001.txt"} and uses[1].name == "Grep"
    assert evs[1].content == "23456" and len(evs[2].content) == 20
    (missing,) = b.read_back("tool-results/gone.txt", None)[1:]
    assert missing.is_error and missing.content == "File does not exist: tool-results/gone.txt"

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


def test_a_new_launch_is_a_new_process_the_second_replay_builds_the_strategy_anew():
    """A strategy that numbers the user's messages in memory (#1, #2, ...) across launches. One instance throughout sends
    #1, #2 (after a resume: the same conversation, the same instance), #3 after a new launch; built anew at that launch
    (fresh_at_launch, as a new process starts) it sends #1 there. Requests 0 and 1 compare equal, request 2 differs, and
    only there is the new launch named (relaunched_note)."""
    from ctxsim.harness.replay.engine import RunConfig
    from ctxsim.harness.testing import record
    from ctxsim.harness.testing.recording import fresh_at_launch, relaunched_note
    from ctxsim.strategies.append_only import AppendOnly

    from tests.helpers_traces import Builder

    class NumbersUsers(AppendOnly):
        name = "numbers_users"

        def __init__(self, config, env) -> None:
            super().__init__(config, env)
            self.seen = 0

        def on_user(self, message: Message) -> None:
            self.seen += 1
            super().on_user(Message.user(f"{message.text} #{self.seen}"))

    b = Builder().event(tr.SessionStart(t=0.5, session="s1")).user("a").call("done")
    b.event(tr.SessionEnd(t=b._tick(1), session="s1")).event(tr.SessionStart(t=b._tick(1), session="s1", resume=True))
    b.user("b").call("done").event(tr.SessionEnd(t=b._tick(1), session="s1"))
    b.event(tr.SessionStart(t=b._tick(60), session="s2")).user("c").call("done")
    cfg = RunConfig(window=50_000)
    one, fresh = record(b.build(), NumbersUsers, None, cfg), record(b.build(), fresh_at_launch(NumbersUsers), None, cfg)
    try:
        ca, cb = Canon(), Canon(str(fresh.session_dir), str(one.session_dir))
        last = [r.request.messages[-1].text for r in (one.requests[2], fresh.requests[2])]
        assert last == ["c #3", "c #1"] and [r.request.messages[-1].text for r in one.requests[:2]] == ["a #1", "b #2"]
        assert [request_difference(x.request, y.request, ca, cb) == "" for x, y in zip(one.requests, fresh.requests)] == [
            True, True, False]
        assert relaunched_note(one.entries, one.requests[1]) == ""
        assert relaunched_note(one.entries, one.requests[2]).startswith(
            " (the second replay built the strategy anew at the new launch before it, as a new process of the agent starts "
            "with only the run's files: state kept in memory across launches")
    finally:
        import shutil

        shutil.rmtree(one.session_dir, ignore_errors=True)
        shutil.rmtree(fresh.session_dir, ignore_errors=True)


def test_a_strategy_that_keeps_state_across_launches_by_design_says_what():
    """ctxsim's gauged designs keep their token gauge from one launch to the next (one long-lived process, assumed),
    rag_memory Letta's memory: the kit replays them as one instance. NovaCode and the peers keep nothing: built anew. A
    declaration that is not words is refused, naming the hook."""
    import pytest
    from ctxsim.harness.testing.declared import declared, fresh_at_launches
    from ctxsim.strategies.novacode.strategy import NovaCode
    from ctxsim.strategies.rag_memory import RagMemory
    from ctxsim.strategies.tiered_budget import TieredBudget

    assert fresh_at_launches(NovaCode, {}) and declared(NovaCode, {}).across_launches is None
    assert not fresh_at_launches(TieredBudget, {})
    assert declared(TieredBudget, {}).across_launches == "its token gauge, calibrated on the usage of every launch so far"
    assert declared(RagMemory, {}).across_launches.startswith("its core and recall memory (Letta's are in its database)")

    class Blank(NovaCode):
        @classmethod
        def keeps_across_launches(cls, config):
            return " "

    with pytest.raises(ValueError, match=r"Blank.keeps_across_launches: what it keeps, in words, or None, got ' '"):
        declared(Blank, {})
    assert fresh_at_launches(Blank, {})   # the checker reports the refusal; the replay is built anew


def test_first_difference_names_the_first_request_that_differs_or_the_counts():
    """Two runs of one session: the first request that differs is named, with how; a run that sent one request more
    is named by the first run's last entry and the counts; alike, nothing."""
    from types import SimpleNamespace

    from ctxsim.harness.testing.determinism import first_difference

    def run(*texts: str) -> list:
        return [SimpleNamespace(request=req("go", t), call=k) for k, t in enumerate(texts)]

    a = run("x", "y")
    assert first_difference(a, run("x", "y"), Canon(), Canon()) is None
    at, said = first_difference(a, run("x", "z"), Canon(), Canon())
    assert at is a[1] and said.startswith("the same session replayed again sent another request: message 1 (user) differs")
    assert first_difference(a, run("x", "y", "w"), Canon(), Canon()) == (
        a[1], "the same session replayed again sent 3 requests where the first run sent 2")
    assert first_difference([], run("x"), Canon(), Canon()) == (
        None, "the same session replayed again sent 1 requests where the first run sent 0")

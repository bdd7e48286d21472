"""A user message between a call and the last of its results (Claude Code writes a todo-list reminder, a skill's text
or a message typed while the tools ran there: 22 of the 209 development sessions) reaches the strategy
after the call's last result, as the API takes it (results first in the user turn). Delivered where it
sat, every strategy that answers a dangling call on a new user message (claude_code, cut_no_summary and
the templates) added a synthetic error result for the second call, then sent its real one: a 400 the
strategy cannot recover from, and the session failed there in a population compare."""

from __future__ import annotations

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.replay.events import between_results
from ctxsim.strategies.registry import names

from tests.helpers_traces import Builder

REMINDER = "<system-reminder>Your todo list has changed.</system-reminder>"


def _session(where: str = "between") -> tr.Trace:
    b = Builder()
    b.user("check both files")
    b.call("Reading both.", ["first: a.py holds parse()", "second: b.py holds lex()"],
           inputs=[{"command": "cat a.py"}, {"command": "cat b.py"}])
    first, second = b.events[-2], b.events[-1]
    reminder = tr.UserEvent(t=first.t, text=REMINDER)
    if where == "before_first":   # typed while the tools ran, written before either result
        b.events[-2:] = [reminder, first, second]
    elif where == "two_before":   # two of them before the first result
        b.events[-2:] = [reminder, tr.UserEvent(t=first.t, text="and lex() too"), first, second]
    elif where == "with_probe":   # a fact of the first result and a probe of it between the two results
        b.events[-1:] = [tr.FactEvent(t=first.t, id="f1", text="parse()", category="identifier"), reminder,
                         tr.ProbeEvent(t=first.t, id="p1", needs=["f1"]), second]
    else:                         # the reminder between the two results
        b.events[-1:] = [reminder, second]
    b.call("Both read.")
    b.user("thanks")
    b.call("done")
    return b.build()


def test_the_user_messages_between_two_results_of_one_call_are_the_held_ones():
    """Indices: 0 user, 1 call, 2 result, 3 user (held: a result follows before the next call), 4 result,
    5 call, 6 user (after the call's results: not held), 7 call. A fact or probe between them changes nothing."""
    t = _session()
    assert [e.type for e in t.events] == ["user", "assistant", "tool_result", "user", "tool_result", "assistant",
                                          "user", "assistant"]
    assert between_results(t.events) == frozenset({3})
    ev = list(t.events)
    ev.insert(3, tr.FactEvent(t=ev[2].t, id="f1", text="parse()", category="identifier"))
    assert between_results(ev) == frozenset({4})
    # a user message after a call's last result, before the next call, waits for nothing
    assert between_results([ev[0], ev[1], ev[2], ev[5], ev[6]]) == frozenset()
    # one between the call and its first result waits too (index 2); after a call with no tool use, nothing
    assert between_results(_session("before_first").events) == frozenset({2})
    assert between_results([ev[0], ev[6], ev[7], ev[8]]) == frozenset()


@pytest.mark.parametrize("where", ["between", "before_first", "two_before", "with_probe"])
@pytest.mark.parametrize("strategy", [s for s in names() if s != "recorded"])
def test_every_strategy_sends_the_results_first_and_the_reminder_after_them(strategy, where):
    seen = []
    res = replay(_session(where), strategy, {}, RunConfig(observer=lambda req, info: seen.append(req)))
    m = res.metrics
    assert m["completed"] and m["pairing_violations"] == 0 and m["rejected_requests"] == 0
    main = [r for r in seen if r.kind == "main"]
    assert len(main) == 3
    turn = [b for msg in list(main[1].messages)[2:] if msg.role == "user" for b in msg.blocks]
    kinds = [(b.type, b.id if b.type == "tool_result" else b.text) for b in turn]
    assert [k for k, _ in kinds[:2]] == ["tool_result", "tool_result"]
    assert not any(b.meta.get("synthetic") for b in turn if b.type == "tool_result")
    assert any(REMINDER in str(x) for k, x in kinds[2:] if k == "text")
    assert m["turns"] == 3 + (where == "two_before")   # each still counts as the user's message, once

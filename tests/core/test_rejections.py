"""A request the API rejects is a failed turn unless the strategy recovers (issue #15).

The trace: one user message, then calls whose tool result is ``"line i " + "x " * 6000``. With the
default header a request at main call k holds 110 + 6,074·k tokens (measured on the 1M replay of
the same trace: 110, 6,184, 12,258 ...). At a 20,000-token window calls 0..3 fit (18,332) and call 4
(24,406) is the first the API rejects.
"""

from __future__ import annotations

import pytest
from ctxsim.harness.llm.services import CallSpec
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import History, Message
from ctxsim.harness.replay.engine import MAX_ATTEMPTS_PER_CALL, RunConfig, replay, user_turns
from ctxsim.strategies.base import Rejection, Strategy

from tests.helpers_traces import Builder

WINDOW = 20_000
STEP = 6_074  # tokens one call adds (its assistant turn, its Bash call in Claude's format, its 6,000-token result and its framing)
FIRST = 110   # tokens of the first request (system, tools, the user message)


def ctx(k: int) -> int:
    return FIRST + STEP * k


def steps(calls: int, probe_at: tuple[int, ...] = ()) -> tr.Trace:
    b = Builder().user("fix the flaky test in the scheduler; ticket SCHED-4242")
    b.event(tr.FactEvent(t=b.t, id="goal", category="goal", text="SCHED-4242"))
    for i in range(calls):
        if i in probe_at:
            b.event(tr.ProbeEvent(t=b.t, id=f"p{i}", needs=["goal"]))
        b.call(f"step {i}", [f"line {i} " + "x " * 6000])
    return b.call("done").build()


class KeepLastStep(Strategy):
    """Reacts to prompt-too-long as a reactive compactor does: one billed summary side call on all but
    the newest step, then the history is the summary and the newest step (a tool_use and its
    result, so nothing is unpaired)."""

    name = ""
    on_rejection = "summarise, keep the newest step, retry (a test strategy)"

    def __init__(self, config, env):
        super().__init__(config, env)
        self.seen: list[Rejection] = []

    def on_rejected(self, rejection, call):
        self.seen.append(rejection)
        if "overflow" not in rejection.reasons:
            return False
        msgs = list(self.history)
        older = self.build_request(call).with_messages(History(msgs[:-2]))
        res = self.env.services.call(older, CallSpec(kind="summary", instructions="Summarise.", max_output_tokens=200))
        self.history = History([Message.user(res.text, origin="summary"), *msgs[-2:]])
        self.rewrote = True
        return True


def test_a_strategy_that_recovers_is_billed_for_its_retry_and_completes():
    t = steps(6)
    r = replay(t, KeepLastStep, None, RunConfig(window=WINDOW))
    m, c = r.metrics, r.calls
    assert m["completed"] is True and m["failed_at_call"] is None and m["turns_failed"] == 0
    # call 4 (24,406 tokens) is rejected once, a summary is made and billed, call 4 is sent again
    at4 = c[c["call"] == 4]
    assert at4["kind"].tolist() == ["main", "summary", "main"]
    rej, summary, retry = at4.iloc[0], at4.iloc[1], at4.iloc[2]
    assert rej["rejected"] and rej["overflow"] and rej["context_tokens"] == ctx(4) == 24_406
    assert rej["cost_usd"] == 0 and rej["duration_s"] == pytest.approx(0.5)  # the 400's round trip (ttft_base_s)
    assert rej["attempt"] == 1 and not rej["session_failed"]
    assert summary["cost_usd"] > 0 and not summary["failed"]
    assert retry["attempt"] == 2 and not retry["rejected"] and retry["cost_usd"] > 0
    assert retry["context_tokens"] < WINDOW
    # the strategy was told what the API said
    first = r_seen(t)[0]
    assert first == Rejection(("overflow",), f"prompt is too long: {ctx(4)} tokens > {WINDOW} maximum", ctx(4),
                              WINDOW, 1)
    # 7 main calls (0..6), one retry, one rejected request; the rejected row costs nothing
    assert m["calls"] == 7 and m["retries"] == 1 and m["rejected_requests"] == 1 and m["overflows"] == 1
    assert m["cost_usd"] == pytest.approx(c["cost_usd"].sum())
    assert m["cost_usd"] == pytest.approx(c[~c["rejected"]]["cost_usd"].sum())


def r_seen(t):
    seen = []

    class Spy(KeepLastStep):
        def on_rejected(self, rejection, call):
            out = super().on_rejected(rejection, call)
            seen.extend(self.seen)
            self.seen.clear()
            return out

    replay(t, Spy, None, RunConfig(window=WINDOW))
    return seen


def test_a_strategy_that_gives_up_fails_at_the_first_rejected_call_and_later_probes_score_0():
    # probes before calls 2 (fits) and 5 (after the failure): the goal is verbatim in the window at
    # call 2, so it scores > 0; the probe at call 5 is never reached and scores 0
    t = steps(8, probe_at=(2, 5))
    r = replay(t, "append_only", None, RunConfig(window=WINDOW))
    m, c = r.metrics, r.calls
    assert m["completed"] is False and m["failed_at_call"] == 4 and m["failure"] == ["overflow"]
    assert m["turns"] == 1 and m["turns_failed"] == 1
    # calls 0..3 answered and billed, call 4 rejected once, nothing after it is sent
    assert c["call"].tolist() == [0, 1, 2, 3, 4] and c["rejected"].tolist() == [False] * 4 + [True]
    assert c["session_failed"].tolist() == [False] * 4 + [True]
    assert c["context_tokens"].tolist() == [ctx(k) for k in range(5)]
    assert m["calls"] == 5 and m["overflows"] == 1 and m["retries"] == 0
    # its cost is its spend until it failed: four uncached calls (append_only places no breakpoint),
    # 4 × 110 + 6,074 × (0 + 1 + 2 + 3) = 36,884 input tokens
    inputs = sum(ctx(k) for k in range(4))
    assert int(c["input_uncached"].sum()) == inputs == 36_884
    assert m["cost_usd"] == pytest.approx(inputs * 3e-6 + c["output"].sum() * 15e-6)  # claude-sonnet-4-6 $3 / $15
    # retention: the probe at call 2 scored in the window, the one at call 5 not reached
    p = r.probes.set_index("probe")
    assert p.loc["p2", "where"] == "window" and p.loc["p2", "score"] > 0
    assert p.loc["p5", "where"] == "not_reached" and p.loc["p5", "score"] == 0
    assert m["retention"]["probes_not_reached"] == 1 and m["retention"]["probes"] == 2
    assert m["retention"]["goal"] == pytest.approx(p.loc["p2", "score"] / 2)


def test_probes_of_the_failing_call_score_0():
    t = steps(8, probe_at=(4,))
    r = replay(t, "append_only", None, RunConfig(window=WINDOW))
    assert r.metrics["failed_at_call"] == 4
    assert r.probes["where"].tolist() == ["not_reached"] and r.metrics["retention"]["score"] == 0


def test_the_engine_stops_retrying_after_max_attempts():
    class Stubborn(Strategy):
        name = ""

        def on_rejected(self, rejection, call):
            return True  # "retry" without changing anything

    r = replay(steps(6), Stubborn, None, RunConfig(window=WINDOW))
    c = r.calls
    assert c[c["call"] == 4]["attempt"].tolist() == list(range(1, MAX_ATTEMPTS_PER_CALL + 1))
    assert c[c["call"] == 4]["rejected"].all() and c["session_failed"].sum() == 1
    assert r.metrics["completed"] is False and r.metrics["failed_at_call"] == 4
    assert r.metrics["rejected_requests"] == MAX_ATTEMPTS_PER_CALL
    # every rejected request cost its round trip: the clock moved by 6 × 0.5 s
    assert c[c["rejected"]]["duration_s"].sum() == pytest.approx(MAX_ATTEMPTS_PER_CALL * 0.5)
    assert replay(steps(6), Stubborn, None, RunConfig(window=WINDOW, max_attempts=2)).metrics["rejected_requests"] == 2


def test_a_completed_run_is_unchanged_by_the_window_it_never_reaches():
    r = replay(steps(6), "append_only", None, RunConfig(window=1_000_000))
    m = r.metrics
    assert m["completed"] is True and m["failed_at_call"] is None and m["failure"] is None
    assert m["turns"] == 1 and m["turns_failed"] == 0 and m["rejected_requests"] == 0 and m["calls"] == 7


def test_turns_failed_counts_the_turn_in_progress_and_every_later_one():
    b = Builder().user("first task")
    b.call("a", ["x " * 6000])
    b.user("second task")
    for i in range(4):
        b.call(f"b{i}", ["x " * 6000])
    b.user("third task").call("c", ["small"])
    r = replay(b.call("done").build(), "append_only", None, RunConfig(window=WINDOW))
    # the request at the 4th call of the second turn holds four 6k results: over 20k
    assert r.metrics["completed"] is False and r.metrics["turns"] == 3 and r.metrics["turns_failed"] == 2


def test_user_turns_leave_out_a_sub_agents_prompt():
    evs = [tr.UserEvent(t=0, text="go"), tr.SubtaskStart(t=1, id="s", isolated=True), tr.UserEvent(t=1, text="sub"),
           tr.SubtaskEnd(t=2, id="s"), tr.UserEvent(t=3, text="next"),
           tr.SubtaskStart(t=4, id="n", isolated=False), tr.UserEvent(t=4, text="inline")]
    assert user_turns(evs) == [0, 4, 6]


def test_the_base_strategy_declares_that_it_gives_up():
    assert Strategy.on_rejection == "the turn errors and the session ends"
    assert Strategy.on_rejected(Strategy.__new__(Strategy), None, None) is False


def test_every_registered_strategy_declares_its_reaction():
    """Not the base class's sentence, and a source or a reason in parentheses for each (listed by
    `ctxsim strategies`)."""
    from ctxsim.strategies.registry import get, names

    for name in names():
        text = get(name).on_rejection
        assert text != Strategy.on_rejection and "(" in text, (name, text)

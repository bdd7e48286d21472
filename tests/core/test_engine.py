"""The replay engine: determinism, overflow accounting, side calls, token counting once."""

import pandas as pd
import pytest
from ctxsim.harness.llm.services import CallSpec, SideCallFailed
from ctxsim.harness.model.conversation import History, Message
from ctxsim.harness.provider.tokenizer import get_tokenizer
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import Strategy

from tests.helpers_traces import Builder


def long_trace(calls=120, size=6_000):
    b = Builder().user("fix the flaky test in the scheduler")
    for i in range(calls):
        b.call(f"step {i}", [f"line {i} " + "x " * size])
    return b.call("done").build()


def test_same_seed_identical_rows():
    t = long_trace(40, 2000)
    a = replay(t, "append_only", {"cache_breakpoints": True}, RunConfig(seed=3))
    b = replay(t, "append_only", {"cache_breakpoints": True}, RunConfig(seed=3))
    pd.testing.assert_frame_equal(a.calls, b.calls)
    assert a.metrics == b.metrics


def test_append_only_fails_at_its_first_overflow_at_200k():
    # call k holds 103 + 6,074·k tokens (the 1M replay below): a step is its result, its framing (6 + 25 on
    # a Claude model, tokenizer.XML_RESULT_FRAMING) and the Bash call, 20 tokens in Claude's
    # function-call format (<invoke name="Bash"><parameter name="command">cmd k…, tokenizer.claude_call;
    # 10 as JSON): 32 → 194,471 fits, 33 → 200,545 does not
    t = long_trace()
    r = replay(t, "append_only", None, RunConfig(window=200_000))
    m = r.metrics
    assert m["completed"] is False and m["failed_at_call"] == 33 and m["overflows"] == 1
    assert m["calls"] == 34  # 33 answered, the 34th rejected; the other 87 never sent
    rejected = r.calls[r.calls["overflow"]]
    assert rejected["context_tokens"].tolist() == [200_545] and (rejected["cost_usd"] == 0).all()
    assert m["peak_context_tokens"] == 200_545 and m["pairing_violations"] == 0
    # the same trace fits a 1M window: every call answered
    full = replay(t, "append_only", None, RunConfig(window=1_000_000))
    assert full.metrics["completed"] is True and full.metrics["overflows"] == 0 and full.metrics["calls"] == 121
    assert full.calls["context_tokens"].tolist()[:3] == [103, 6_177, 12_251]


def test_each_block_is_tokenised_once_per_run():
    t = long_trace(60, 500)
    tok = get_tokenizer()
    before = tok.encode_calls
    replay(t, "append_only", {"cache_breakpoints": True}, RunConfig())
    used = tok.encode_calls - before
    blocks = sum(len(e.content) if hasattr(e, "content") and isinstance(e.content, list) else 1
                 for e in t.events)
    assert used <= blocks + 1 + len(t.header.tools)  # + the system prompt and each tool definition
    before = tok.encode_calls
    replay(t, "append_only", {"cache_breakpoints": True}, RunConfig(window=200_000))
    # a second run of the same parsed trace (another configuration) reuses the trace's blocks:

    assert tok.encode_calls - before == 0


class Summarising(Strategy):
    """Test strategy: asks for one summary every 5 calls; keeps the failures it sees."""

    name = ""

    def __init__(self, config, env):
        super().__init__(config, env)
        self.n = 0
        self.errors = []

    def build_request(self, call):
        self.n += 1
        if self.n % 5 == 0:
            req = super().build_request(call)
            try:
                res = self.env.services.call(req, CallSpec(kind="summary", instructions="Summarise.", max_output_tokens=500))
                self.history = History([Message.user(res.text, origin="summary")])
                self.rewrote = True
            except SideCallFailed as e:
                self.errors.append(e.reason)
        return super().build_request(call)


def test_side_calls_are_billed_timed_and_can_fail():
    t = long_trace(20, 300)
    r = replay(t, Summarising, None, RunConfig())
    side = r.calls[r.calls["kind"] == "summary"]
    assert len(side) == 4  # calls 5, 10, 15, 20
    assert (side["cost_usd"] > 0).all() and (side["output"] > 0).all() and (side["output"] <= 500).all()
    assert r.metrics["latency_s"]["compaction_blocking"] == pytest.approx(side["duration_s"].sum())
    # blocking time moves the clock: the main call after a summary is later than its trace time
    after = r.calls.index[r.calls["kind"] == "summary"][0] + 1
    assert r.calls.loc[after, "t"] > t.events[[i for i, e in enumerate(t.events) if e.type == "assistant"][4]].t
    failed = replay(t, Summarising, None, RunConfig(fail_calls={"summary": (0, 2)}))
    assert failed.calls[failed.calls["kind"] == "summary"]["failed"].tolist() == [True, False, True, False]
    always = replay(t, Summarising, None, RunConfig(failure_rates={"summary": 1.0}))
    assert always.calls[always.calls["kind"] == "summary"]["failed"].all()


def test_side_call_over_the_window_is_a_prompt_too_long_failure():
    t = long_trace(20, 300)  # the main requests stay under 8,000 tokens
    seen = []

    class Big(Strategy):
        name = ""

        def build_request(self, call):
            req = super().build_request(call)
            if call.index == 5:  # a side call carrying 10,000 more tokens than the main request
                padded = req.with_messages(req.messages.append(Message.user("y " * 10_000)))
                try:
                    self.env.services.call(padded, CallSpec(kind="summary", max_output_tokens=500))
                except SideCallFailed as e:
                    seen.append(e.reason)
            return req

    r = replay(t, Big, None, RunConfig(window=8_000))
    assert seen == ["prompt_too_long"] and r.metrics["completed"] is True
    side = r.calls[r.calls["kind"] == "summary"]
    assert side["failed"].tolist() == [True] and side["cost_usd"].tolist() == [0]
    assert side["duration_s"].tolist() == [pytest.approx(0.5)]  # unbilled, but the round trip took time


def test_isolated_subtask_runs_from_a_fresh_history():
    from ctxsim.harness.model import trace as tr

    b = Builder().user("go")
    b.events.append(tr.AssistantEvent(t=2, content=[tr.ToolUseContent(id="task1", name="Task", input={})]))
    b.events.append(tr.SubtaskStart(t=3, id="s1", isolated=True))
    b.events.append(tr.UserEvent(t=3, text="explore the repo"))
    b.events.append(tr.AssistantEvent(t=4, content=[tr.TextContent(text="found it")]))
    b.events.append(tr.SubtaskEnd(t=5, id="s1", conclusion="found it"))
    b.events.append(tr.ToolResultEvent(t=6, tool_use_id="task1", content="found it"))
    b.t = 6
    r = replay(b.call("done").build(), "append_only", None, RunConfig())
    assert r.calls["kind"].tolist() == ["main", "subagent", "main"]
    assert r.metrics["pairing_violations"] == 0
    sub, last = r.calls.iloc[1], r.calls.iloc[2]
    assert sub["context_tokens"] < last["context_tokens"]


def test_resume_answers_a_call_the_previous_launch_left_open():
    """A crash mid tool call, then a resume: the base strategy adds a synthetic error result, so
    the first request of the resumed session is pairing-valid (N-TRANS-5 for every strategy)."""
    from ctxsim.harness.model import trace as tr

    b = Builder()
    b.events += [tr.SessionStart(t=0, session="a"), tr.UserEvent(t=1, text="go"),
                 tr.AssistantEvent(t=2, content=[tr.ToolUseContent(id="x1", name="Bash", input={})]),
                 tr.SessionEnd(t=3, session="a"),
                 tr.SessionStart(t=4, session="b", resume=True), tr.UserEvent(t=5, text="continue")]
    b.t = 5
    r = replay(b.call("done").build(), "append_only", None, RunConfig())
    assert r.metrics["pairing_violations"] == 0 and r.metrics["calls"] == 2
    assert r.metrics["strategy_counters"] == {"synthetic_results": 1}


def test_numbers_do_not_depend_on_the_run_directory(tmp_path):
    """Spill and transcript paths name the run directory; whichever directory a run gets (other
    processes take the first free ones), its numbers are the same."""
    from ctxsim.harness.synth import generate, load_preset

    # Synthetic content is real code, ~2.7 characters per token (the word salad was ~4): one turn of
    # parallel reads under N-SPILL-2's 200,000-character cap holds up to ~74k tokens, so at a 60k
    # window a turn of them can leave NovaCode's compaction request over the window. At 80k this
    # trace (as the generator draws it since issue 43) compacts 3 times, spills 7 results and
    # completes (at 120k it never compacts): both paths that name the run directory are exercised.
    t = generate(load_preset("spill-heavy", ["calls=60"]), 3)
    a = replay(t, "novacode", None, RunConfig(window=80_000, session_dir=tmp_path / "run-000001"))
    b = replay(t, "novacode", None, RunConfig(window=80_000, session_dir=tmp_path / "run-000042"))
    assert a.metrics["compactions"]["succeeded"] > 0 and a.metrics["spills"] > 0 and a.metrics["completed"]
    pd.testing.assert_frame_equal(a.calls, b.calls)

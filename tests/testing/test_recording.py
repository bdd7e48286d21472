"""Recording what a strategy sends: whole replays and step-by-step feeding agree."""

from __future__ import annotations

import shutil

from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig
from ctxsim.harness.testing import check, record
from ctxsim.harness.testing.conversations import conversations
from ctxsim.harness.testing.params import params_for
from ctxsim.harness.testing.recording import Mark, Sent, Stepper, scratch_dir
from ctxsim.strategies.append_only import AppendOnly
from ctxsim.strategies.registry import get
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers_traces import Builder


def test_record_sees_every_request_and_the_hooks(tmp_path):
    t = Builder().event(tr.SessionStart(t=0.5, session="s1")).user("fix the test") \
        .call("reading", ["file a", "file b"]).call("done").build()
    rec = record(t, AppendOnly, None, RunConfig(window=50_000), session_dir=tmp_path)
    sent = [e for e in rec.entries if isinstance(e, Sent)]
    marks = [e for e in rec.entries if isinstance(e, Mark)]
    assert [m.what for m in marks] == ["session_start", "user", "message", "message", "message"]
    assert rec.entries[0] is marks[0]
    assert marks[1].text == "fix the test"   # a user message (latest_request follows them)
    # what the engine gave the strategy between its requests: each answer, the results (kept_tail's conversation)
    assert [(m.message.role, [b.type for b in m.message.blocks]) for m in marks[2:]] == [
        ("assistant", ["text", "tool_use", "tool_use"]), ("user", ["tool_result", "tool_result"]), ("assistant", ["text"])]
    # two model calls, both main; the second carries user, assistant (2 tool uses), results
    assert [s.kind for s in sent] == ["main", "main"] and [s.call for s in sent] == [0, 1]
    assert [len(s.request.messages) for s in sent] == [1, 3]
    assert rec.originals == {"tu_1": "file a", "tu_2": "file b"}
    assert rec.window == 50_000 and all(0 < s.tokens < 50_000 for s in sent)
    assert check(rec) == []


def _digests(entries):
    return [(e.kind, e.tokens, e.request.messages.prefix_digest(len(e.request.messages) - 1)
             if len(e.request.messages) else b"", e.request.rewrite) if isinstance(e, Sent) else (e.what, e.id)
            for e in entries]


@settings(max_examples=8, deadline=None, derandomize=True, database=None)
@given(conversations(max_steps=15, max_result_size=60_000), st.randoms(use_true_random=False))
def test_feeding_in_chunks_is_the_same_replay_as_feeding_whole(trace, rnd):
    """The state machine feeds a session a step at a time: it must see exactly what one replay of
    the whole trace sends (same requests, same true token counts, same rewrites)."""
    cls = get("novacode")
    params = params_for(cls, 32_000)
    cfg = RunConfig(window=32_000)
    d = scratch_dir()  # both runs in the same directory: spill placeholders name their paths
    whole = record(trace, cls, params, cfg, session_dir=d)
    shutil.rmtree(d)
    stepper = Stepper(trace.header, cls, params, cfg, session_dir=d)
    try:
        events = list(trace.events)
        i = 0
        while i < len(events):
            n = rnd.randint(1, 6)
            stepper.feed(events[i:i + n])
            i += n
        stepper.flush()
        assert _digests(stepper.recording.entries) == _digests(whole.entries)
    finally:
        shutil.rmtree(d, ignore_errors=True)

"""observation_masking: SWE-agent LastNObservations (the published config's n = 5, polling 1; the
older default n = 10, JetBrains' M), polling with SWE-agent's meaning, and its cache markers.

Read at: SWE-agent/SWE-agent v1.1.0.
The files read are named in the strategy's docstring."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Breakpoint, Message
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.observation_masking import clipped_text, last_removed_index, masked_text

from tests.helpers_traces import Builder
from tests.strategies.peer_env import make, reject, step


def results(s) -> list[str]:
    return [b.text for m in s.history for b in m.blocks if b.type == "tool_result"]


def test_last_removed_index_as_swe_agent():
    # observations counted with the task (instance template) as observation 0
    assert last_removed_index(15, 10, 1) == 5  # 15 − 10
    assert last_removed_index(15, 10, 4) == 2  # floor(15/4)·4 − 10 = 12 − 10
    assert last_removed_index(16, 10, 4) == 6  # 16 − 10
    assert last_removed_index(9, 10, 1) == 0


def test_n_10_the_older_default_keeps_the_last_10_observations_masks_older_with_line_count():
    s = make("observation_masking", {"n": 10})
    s.on_user(Message.user("the task"))
    for i in range(14):
        step(s, i, f"line a {i}\nline b {i}\nline c {i}")
    req = s.build_request(CallInfo(14, 14.0))
    # count = 1 (task) + 14 = 15 → last_removed = 5 → observations [1, 5) = the first 4 tool results
    out = results(s)
    assert out[:4] == [masked_text("x\ny\nz")] * 4 == ["Old environment output: (3 lines omitted)"] * 4
    assert out[4:] == [f"line a {i}\nline b {i}\nline c {i}" for i in range(4, 14)]  # the last 10 verbatim
    assert s.history[0].text == "the task"
    assert req.rewrite and s.counters.extra["masked_observations"] == 4


def test_polling_moves_the_boundary_every_p_steps():
    s = make("observation_masking", {"n": 10, "polling": 4})
    s.on_user(Message.user("the task"))
    rewrites = []
    for i in range(17):
        rewrites.append(s.build_request(CallInfo(i, float(i))).rewrite)
        step_no_call(s, i)
    # at call i the history holds the task and i results: count = 1 + i; the boundary
    # floor(count/4)·4 − 10 first passes 1 at count 12 (i = 11: 12 − 10 = 2, one result masked) and
    # moves next at count 16 (i = 15: 16 − 10 = 6, five masked); calls in between rewrite nothing
    assert [i for i, r in enumerate(rewrites) if r] == [11, 15]
    assert results(s)[:5] == ["Old environment output: (1 lines omitted)"] * 5


def step_no_call(s, i):
    from ctxsim.harness.model.conversation import Block

    s.on_response(Message("assistant", (Block.tool_use(f"tu_{i}", "Bash", {"c": i}),)), None)
    s.on_tool_results(Message("user", (Block.tool_result(f"tu_{i}", f"out {i}"),)))


def test_cache_markers_on_last_two_user_messages():
    s = make("observation_masking")
    s.on_user(Message.user("task"))
    step(s, 0, "a")
    step(s, 1, "b")
    req = s.build_request(CallInfo(2, 2.0))
    # u0 a0 r0 a1 r1: the last two user messages are r0 (2) and r1 (4); no system marker
    assert req.breakpoints == (Breakpoint(2), Breakpoint(4))


def test_observation_over_100k_chars_is_clipped():
    out = clipped_text("x" * 100_050, 100_000)
    assert out.startswith("x" * 100_000 + "<response clipped>") and "50 characters were elided" in out


def test_polling_cuts_cache_writes_on_replay():
    b = Builder().user("fix it")
    for i in range(60):
        b.call(f"step {i}", [f"output {i}\n" + "text " * 800])
    t = b.call("done").build()
    every = replay(t, "observation_masking", None, RunConfig()).metrics  # polling 1
    polled = replay(t, "observation_masking", {"polling": 10}, RunConfig()).metrics
    assert every["pairing_violations"] == polled["pairing_violations"] == 0
    # masking on every step rewrites an old message on every call: the cache is re-written behind it
    assert polled["tokens"]["cache_write"] < every["tokens"]["cache_write"] / 2
    assert polled["cost_usd"] < every["cost_usd"]


def test_default_is_the_published_config_n_5_polling_1():
    s = make("observation_masking")
    assert (s.config.n, s.config.polling) == (5, 1)
    s.on_user(Message.user("the task"))
    rewrites = []
    for i in range(9):
        rewrites.append(s.build_request(CallInfo(i, float(i))).rewrite)
        step_no_call(s, i)
    # count = 1 + i; last_removed = count − 5 first passes 1 at i = 5 (6 − 5 = 1: still nothing in
    # [1, 1)), masks one at i = 6, and from then on one more on every call
    assert [i for i, r in enumerate(rewrites) if r] == [6, 7, 8]
    assert results(s)[:3] == ["Old environment output: (1 lines omitted)"] * 3 and results(s)[3] == "out 3"


def test_polling_5_keeps_between_n_and_n_plus_polling():
    s = make("observation_masking", {"polling": 5})
    s.on_user(Message.user("the task"))
    kept = []
    for i in range(21):
        s.build_request(CallInfo(i, float(i)))
        kept.append(sum(1 for t in results(s) if not t.startswith("Old environment output")))
        step_no_call(s, i)
    # last_removed = floor((1 + i)/5)·5 − 5: masked = max(0, last_removed − 1) of the i results
    assert kept == [0, 1, 2, 3, 4, 5, 6, 7, 8, 5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6]
    assert all(5 <= k < 10 for k in kept[9:])  # between n and n + polling (SWE-agent's words)


def test_a_rejected_request_ends_the_run():
    s = make("observation_masking")
    s.on_user(Message.user("t"))
    assert reject(s) is False

"""What the Messages API rejects with a 400 (ctxsim.harness.provider.protocol)."""

from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolSet,
)
from ctxsim.harness.provider import protocol


def req(*msgs, bps=()):
    return Request(SystemPrompt(), ToolSet(), History(msgs), tuple(bps))


U = Message.user("go")
A_USE = Message("assistant", (Block.tool_use("t1", "Bash", {}), Block.tool_use("t2", "Bash", {})))
R1 = Message("user", (Block.tool_result("t1", "a"),))
R2 = Message("user", (Block.tool_result("t2", "b"),))
A = Message("assistant", (Block.text_block("ok"),))


def test_valid_parallel_results_split_across_consecutive_user_messages():
    assert protocol.pairing_error(req(U, A_USE, R1, R2, A)) == ""


def test_tool_use_without_result():
    assert "without tool_result" in protocol.pairing_error(req(U, A_USE, R1, A))
    assert "without tool_result" in protocol.pairing_error(req(U, A_USE))


def test_result_for_unknown_or_older_call():
    assert "unexpected tool_use_id" in protocol.pairing_error(req(U, A, R1))
    # a result answering a call two turns back is rejected too
    assert "unexpected tool_use_id" in protocol.pairing_error(req(U, A_USE, R1, R2, A, Message.user("x"), A, R1))


def test_overflow_and_breakpoint_limits():
    r = req(U, bps=[Breakpoint("system")] * 5)
    reasons = {x.reason for x in protocol.validate(r, window=100, input_tokens=101)}
    assert reasons == {"overflow", "breakpoints"}
    assert protocol.validate(req(U, bps=[Breakpoint(0)] * 4), 100, 100) == []
    assert protocol.validate(req(U, bps=[Breakpoint(3)]), 100, 10)[0].reason == "breakpoints"


def test_pairing_fold_is_memoised_per_message():
    calls = []
    h = History([U, A_USE, R1, R2, A])
    step = protocol._step

    def counting(state, m):
        calls.append(m)
        return step(state, m)

    for n in range(1, 6):
        h.truncate(n).fold_through(n - 1, "k", protocol._INIT, counting)
    assert len(calls) == 5  # each message folded once, however many requests share it

"""Finding #17 about the seed's design, shown with the literal settings, and NovaCode's reading that
holds its window (``calibrate_budgets``, not in the seed).

The step: five dense files read one by one (each 4,000 characters, under N-SPILL-1's threshold),
then one step of two dense results of 6,000 characters (each under the threshold, together under
N-SPILL-2's aggregate budget). Dense text runs ~1 character per token here (the kit's DENSE_POOL;
real tool output ~2.7), so the step pushes the request past the 32,000-token window unforeseen
(the estimate, at 3.5, says 24,914). The API refuses it; NovaCode forces a compaction (N-COMP-3).
With the seed's budgets the restore attachment holds the five files at 800 x 3.5 = 2,800 characters
each, about 2,800 tokens each of this text, and the verbatim tail is sized at 3.5 characters per
token too: the compacted request is not smaller than the refused one (no_shrink), so the session
ends. At the calibrated ratio (what this conversation's counts measured, ~1 character per token)
the same budgets hold their tokens, and the retry fits.
"""

from __future__ import annotations

import shutil

import pytest
from ctxsim.harness.engine import RunConfig
from ctxsim.harness.testing import conversations as conv
from ctxsim.harness.testing.invariants import check
from ctxsim.harness.testing.machine import CHECK_MODEL, CHECK_WINDOW, params_for
from ctxsim.harness.testing.recording import record
from ctxsim.strategies.novacode.strategy import NovaCode


def dense_session(reads: int = 5, read_size: int = 4_000, step: tuple[int, ...] = (6_000, 6_000)):
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(300, 1)
    for k in range(reads):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", read_size, seed=k, dense=True),)))
    b.call(conv.Turn(calls=tuple(conv.ToolCall("Bash", n, seed=200 + i, dense=True) for i, n in enumerate(step))))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def _run(extra, **kw):
    params = {**params_for(NovaCode), **extra}
    rec = record(dense_session(**kw), NovaCode, params, RunConfig(model=CHECK_MODEL, window=CHECK_WINDOW, seed=0))
    try:
        # the estimate is not held on dense text (the kit judges it on the other sessions)
        return rec, [v for v in check(rec) if v.invariant != "estimate"]
    finally:
        shutil.rmtree(rec.session_dir, ignore_errors=True)


def test_the_literal_seed_gives_up_on_a_dense_step():
    rec, found = _run({"calibrate_budgets": False})
    refused = [s for s in rec.requests if s.rejected]
    assert [(s.kind, s.tokens) for s in refused] == [("main", 33_801)]
    assert refused[0].request.estimated_tokens == 24_914  # under the window: unforeseen
    assert [v.invariant for v in found] == ["window"]
    assert "it gave up" in found[0].detail and "after a summary made in its reaction" in found[0].detail


def test_calibrated_budgets_hold_the_window_on_the_same_step():
    rec, found = _run({})
    assert found == []
    refused = [s for s in rec.requests if s.rejected]
    assert [(s.kind, s.tokens) for s in refused] == [("main", 33_801)]  # the same refusal, then a retry that fits
    after = [s for s in rec.requests if s.kind == "main" and s.call > refused[0].call]
    assert after and all(s.tokens <= CHECK_WINDOW for s in after)


@pytest.mark.parametrize("step", [(7_000, 7_000, 7_000), (5_000, 5_000, 5_000, 5_000)])
def test_other_dense_steps_literal_fails_calibrated_holds(step):
    reads, size = (5, 3_000) if len(step) == 3 else (6, 2_500)
    _, lit = _run({"calibrate_budgets": False}, reads=reads, read_size=size, step=step)
    _, cal = _run({}, reads=reads, read_size=size, step=step)
    assert [v.invariant for v in lit] == ["window"] and cal == []

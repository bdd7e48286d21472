"""Whether the shared head a log's first call found cached stays cached across its idle gaps
(harness/fidelity/warm_head.py). Each session is written here with the structure the logs show
(a first call that reads a 12,000-token head an earlier session cached; turns a minute apart; three
gaps of ten minutes, past the 5-minute TTL), never a copy of one."""

from __future__ import annotations

from ctxsim.harness.fidelity.compare import run_fidelity, summary_table
from ctxsim.harness.fidelity.recorded import recorded_calls
from ctxsim.harness.fidelity.warm_head import expiry_reads, head_kept_warm
from ctxsim.harness.importers import import_file
from ctxsim.harness.replay.engine import RunConfig, replay

from tests.helpers_claude_code import asst, text, user, write

HEAD, FIRST, STEP = 12_000, 15_000, 500   # the cached head, the first call's context, each turn's growth
GAPS = (2, 5, 8)                          # the turns that come ten minutes after the one before


def _session(tmp_path, kept: bool, turns: int = 12, gaps=GAPS):
    """One call per turn; call k's context is FIRST + k·STEP. The first call reads the head; after a
    gap the call reads the head again (``kept``) or nothing; every other call reads the previous one."""
    recs, t = [], 0.0
    for k in range(turns):
        t += 600.0 if k in gaps else 60.0
        ctx = FIRST + k * STEP
        read = HEAD if k == 0 else (HEAD if kept else 0) if k in gaps else ctx - STEP - 3
        recs += [user(t, f"question {k}"), asst(t + 2, f"r{k}", text(f"answer {k}"), w5m=ctx - 3 - read, read=read)]
    return import_file("claude-code", write(tmp_path / "s.jsonl", recs)).trace


def test_expiry_reads_count_the_calls_after_a_ttl_expiry_by_what_they_read(tmp_path):
    """Three calls come after a gap past the TTL: kept, all three read the head again; expiring, all
    three read nothing. The first four calls (the fit part) hold one of them (call 2)."""
    calls = recorded_calls(_session(tmp_path / "k", kept=True))
    assert expiry_reads(calls, len(calls), HEAD) == (3, 0)
    assert expiry_reads(calls, 4, HEAD) == (1, 0)
    assert expiry_reads(recorded_calls(_session(tmp_path / "e", kept=False)), 12, HEAD) == (0, 3)


def test_a_head_the_log_reads_again_after_its_gaps_stays_cached_in_its_replay(tmp_path):
    """Import judges it on the first 30% of the calls (4 of 12: one read after a gap, the head):
    kept. The replay then reads the head at each call after a gap, as the log did ($ saved: the
    12,000 tokens read at a tenth instead of written at 1.25x, three times); where the log read
    nothing it expires and the replay reads nothing."""
    t = _session(tmp_path / "k", kept=True)
    rec = t.header.recorded
    assert rec.warm_prefix_tokens == HEAD and rec.warm_prefix_kept is True
    table = summary_table(run_fidelity(t).report)
    assert "cached head              12,000 tokens, kept by other sessions" in table
    assert "1 read the 12,000-token head the first call read and 0 read nothing" in rec.warm_prefix_kept_evidence
    run = replay(t, "recorded", {}, RunConfig())
    main = run.calls[run.calls["kind"] == "main"].reset_index(drop=True)
    assert [int(main.loc[k, "cache_read"]) for k in GAPS] == [HEAD] * 3
    e = _session(tmp_path / "e", kept=False)
    assert e.header.recorded.warm_prefix_kept is False
    run = replay(e, "recorded", {}, RunConfig())
    main = run.calls[run.calls["kind"] == "main"].reset_index(drop=True)
    assert [int(main.loc[k, "cache_read"]) for k in GAPS] == [0] * 3


def test_with_no_gap_in_the_first_part_the_whole_log_decides_in_sample_and_with_none_nothing_is_decided(tmp_path):
    """Gaps only after the fit part (turns 6, 8, 10): judged on all 12 calls, said so. No gap at all:
    not decided (None), the provider model's own TTL."""
    late = _session(tmp_path / "l", kept=True, gaps=(6, 8, 10)).header.recorded
    assert late.warm_prefix_kept is True and late.in_sample == ["warm_prefix_kept"]
    assert "0 read nothing; in sample, over all 12 calls: 3 read it, 0 nothing" in late.warm_prefix_kept_evidence
    calls = recorded_calls(_session(tmp_path / "n", kept=True, gaps=()))
    assert head_kept_warm(calls, 4, HEAD) == (None, "of the calls in the first 4 after a TTL expiry, 0 read the "
                                                    "12,000-token head the first call read and 0 read nothing; "
                                                    "the provider model's own TTL", False)
    assert head_kept_warm(calls, 4, 0) == (None, "", False)

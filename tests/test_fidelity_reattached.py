"""What a compaction put back, as the log measured it (issue 41; harness/fidelity/reattached.py): the
first main call after a compaction holds more than the rebuilt re-attachments (content the log has
no text for) or less (a file the agent did not re-attach); the replay follows the log's measure."""

from __future__ import annotations

from ctxsim.harness.fidelity import reattached
from ctxsim.harness.fidelity.recorded import recorded_calls, sim_rows
from ctxsim.harness.importers import import_file
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay

from tests.helpers_claude_code import asst, rec, result, text, user, write

CODE = "value_%d = compute(%d)\n"
FILE = "".join(CODE % (i, i) for i in range(400))   # ~4,000 cl100k tokens: under the 5,000-token re-attach cap


def _session(tmp_path, after: int, wrote: bool = False):
    """A tool loop from a 20,000-token first call (each Bash result grows the log's context by what
    its text is), an auto compaction, and three calls after it. The first of them holds the prefix,
    the summary and ``after`` tokens more; with ``wrote`` the loop wrote a ~4,000-token file, which the
    replay's rebuild re-attaches after the compaction (as a Read and its numbered lines: ~6,000 tokens)."""
    recs, t, ctx = [user(0, "fix the parser")], 1, 20_000
    for i in range(6):
        block = ({"type": "tool_use", "id": f"t{i}", "name": "Write", "input": {"file_path": "/p/a.py", "content": FILE}}
                 if wrote and i == 2 else {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}})
        recs.append(asst(t, f"r{i}", block, w5m=ctx if not i else 1_000, read=0 if not i else ctx - 1_000, inp=3))
        recs.append(result(t + 1, f"t{i}", f"file_{i}.py\n" * 150))
        ctx += 1_000 + (4_500 if wrote and i == 2 else 0)
        t += 2
    start = 20_000 + after
    recs += [rec("system", t, subtype="compact_boundary", compactMetadata={"trigger": "auto", "preTokens": ctx}),
             user(t, "This session is being continued from a previous conversation.", isCompactSummary=True),
             user(t + 1, "go on")]
    for k in range(3):
        recs.append(asst(t + 2 + k, f"a{k}", text("working"), w5m=start if not k else 20, read=0 if not k else start + 20 * (k - 1),
                         inp=3))
    return import_file("claude-code", write(tmp_path / "s.jsonl", recs)).trace


def _first_after(trace: tr.Trace) -> int:
    return next(c.index for c in recorded_calls(trace) if c.after_compact)


def _measured(trace: tr.Trace) -> list:
    return [e.meta.get(reattached.MEASURED) for e in trace.events if isinstance(e, tr.CompactEvent)]


def _context(trace: tr.Trace, call: int, **params) -> int:
    """The replay's context at the log's ``call`` (the compaction's own summary call is no call of the log)."""
    return int(sim_rows(replay(trace, "recorded", params or None, RunConfig()).calls).loc[call, "context_tokens"])


def test_a_compactions_first_call_larger_than_the_rebuild_is_followed_as_content_with_no_text(tmp_path):
    """The log's first call after the compaction holds 8,000 tokens beyond the prefix, summary and
    prompt (re-attached content the log has no text for; nothing was read, so nothing is rebuilt):
    the compaction carries +8,000 (less the few the summary and prompt take) and the replay's context
    there is the log's; without it, ~8,000 short."""
    t = _session(tmp_path, after=8_000)
    first = _first_after(t)
    (diff,) = _measured(t)
    assert 7_900 <= diff <= 8_000, diff
    assert any(n.startswith("compactions as measured: 1 compaction(s)") and "(1 more, 0 less)" in n for n in t.header.notes)
    recorded = 20_000 + 8_000
    assert abs(_context(t, first) - recorded) <= 30
    assert abs(_context(t, first, compact_measured={}) - (recorded - diff)) <= 30
    # none to follow where the log's first call holds what the replay rebuilds
    assert _measured(_session(tmp_path, after=0)) == [None]


def test_a_compactions_first_call_smaller_than_the_rebuild_leaves_the_rebuilt_file_out(tmp_path):
    """The loop wrote a ~4,000-token file, which the rebuild re-attaches after the compaction; the log's
    first call after it holds no more than the prefix, summary and prompt: the compaction carries what
    the rebuild added, negative, and the replay leaves the file out (the closest), its context the log's."""
    t = _session(tmp_path, after=0, wrote=True)
    first = _first_after(t)
    (diff,) = _measured(t)
    rebuilt = _context(t, first, compact_measured={}) - 20_000   # the file as a Read and its numbered lines
    assert rebuilt >= 4_000 and abs(rebuilt + diff) <= 50, (rebuilt, diff)
    assert abs(_context(t, first) - 20_000) <= 50


def test_only_main_compactions_are_measured_and_each_keeps_its_index():
    """A sub-agent's compaction counts in the index (the strategy counts every compaction) but is not
    measured; the main compaction after it is compaction 1, its first main call the one after it."""
    def call(t, ctx):
        return tr.AssistantEvent(t=t, content=[tr.TextContent(text="ok")],
                                 usage=tr.RecordedUsage(input=3, cache_read=0, cache_write_5m=ctx - 3))
    evs = [tr.UserEvent(t=0, text="go"), call(1, 10_000),
           tr.SubtaskStart(t=2, id="s1", description="d", isolated=True), tr.UserEvent(t=2, text="sub"), call(3, 5_000),
           tr.CompactEvent(t=4, trigger="auto", summary="sub summary"), call(5, 2_000),
           tr.SubtaskEnd(t=6, id="s1", conclusion="done"),
           tr.CompactEvent(t=7, trigger="auto", summary="main summary"), tr.UserEvent(t=8, text="on"), call(9, 12_000)]
    trace = tr.validate_events(tr.Header(name="s"), evs)
    calls = recorded_calls(trace)
    firsts = reattached.first_calls(trace, calls)
    assert list(firsts) == [1] and firsts[1].index == 3
    assert reattached.differences(trace, calls, lambda c: 11_000) == {1: 1_000}
    assert reattached.differences(trace, calls, lambda c: 11_900) == {}   # under MIN_TOKENS: noise
    marked = reattached.apply(trace, {1: 1_000})
    assert [e.meta.get(reattached.MEASURED) for e in marked.events if isinstance(e, tr.CompactEvent)] == [None, 1_000]
    again = reattached.apply(marked, {})   # a calibration again: the earlier measure is taken off
    assert all(reattached.MEASURED not in e.meta for e in again.events if isinstance(e, tr.CompactEvent))


def test_a_measured_difference_out_of_range_is_refused_with_its_line(tmp_path):
    """A hand-edited trace whose compaction carries a difference no context holds, or no number, is
    bad input: the file and line and what is wrong, exit 2, no replay of a 10^12-token message."""
    from ctxsim.harness.cli import main as cli

    t = _session(tmp_path, after=8_000)
    for bad in (10**12, "x", True):
        events = [e.model_copy(update={"meta": {**e.meta, reattached.MEASURED: bad}}) if isinstance(e, tr.CompactEvent)
                  else e for e in t.events]
        p = tmp_path / "bad.jsonl"
        p.write_text(tr.dumps(tr.with_events(t, events)))
        line = next(i for i, x in enumerate(p.read_text().splitlines(), 1) if '"compact"' in x)
        try:
            code = cli(["run", str(p), "-s", "recorded", "-q"])
        except SystemExit as e:
            code = e.code
        assert code == 2
        try:
            tr.load(p)
        except tr.TraceError as e:
            assert f"{p}:{line}" in str(e) and "reattach_measured must be a whole number" in str(e)
        else:
            raise AssertionError(f"{bad!r} was accepted")

"""Orderings that must come out of the retention model (issue 4), on long-200k sessions.
Deterministic (seeded trace, seeded run); the full-length figures over three seeds are in the issue-4
report.

* goal retention, 200k window: append_only while it still works (probes before its first overflow)
  >= NovaCode (whole session) > cut_no_summary (whole session): a summary keeps the goal that a
  plain cut throws away (N-COMP-13);
* file details, 1M window, spill-heavy (no overflow on either side, so only truncation vs spill differs): every
  file detail that irreversible truncation (truncate: Codex's 10 KiB / 256 lines) loses, NovaCode
  still has — in the window, or through the path its spill placeholder keeps (N-SPILL-5), read back.
"""

import pytest
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.synth import generate, load_preset


def _first_overflow(r):
    main = r.calls[r.calls["kind"] == "main"].reset_index(drop=True)
    over = main.index[main["overflow"]].tolist()
    return over[0] if over else None


@pytest.fixture(scope="module")
def goal_runs():
    # the first 450 calls of long-200k, seed 0: append_only overflows a 200k window, NovaCode compacts
    # twice; the goal is needed at 40% of the probes (the preset's 3% gives too few goal probes to rank)
    trace = generate(load_preset("long-200k", ["calls=450", "probe_goal_share=0.4"]), 0)
    return {s: replay(trace, s, None, RunConfig(window=200_000, seed=0, recovery={"restate": False}))  # what each keeps on its own: no user restating the goal
            for s in ("append_only", "novacode", "cut_no_summary")}


@pytest.fixture(scope="module")
def file_runs():
    # spill-heavy holds file details deep inside huge results; with reseen_share=0 the agent never reads
    # them again in a small read (which truncation would keep whole), so only truncation vs spill differs
    trace = generate(load_preset("spill-heavy", ["reseen_share=0"]), 2)
    return {s: replay(trace, s, None, RunConfig(window=1_000_000, seed=0)) for s in ("novacode", "truncate")}


def _goal(r, before=None):
    p = r.probes
    g = p[p["category"] == "goal"]
    if before is not None:
        g = g[g["call"] < before]
    return float(g["score"].mean()), len(g)


def test_goal_retention_append_only_before_overflow_ge_novacode_gt_cut_no_summary(goal_runs):
    ao = goal_runs["append_only"]
    first = _first_overflow(ao)
    assert first is not None  # append_only does overflow a 200k window on this session
    ao_goal, n = _goal(ao, first)
    nc_goal, _ = _goal(goal_runs["novacode"])
    cut_goal, _ = _goal(goal_runs["cut_no_summary"])
    assert n >= 5
    assert ao_goal >= nc_goal > cut_goal + 0.1
    nc = goal_runs["novacode"].metrics
    assert nc["compactions"]["succeeded"] >= 2 and nc["overflows"] == 0


def test_novacode_keeps_file_details_that_truncation_loses(file_runs):
    """N-SPILL-5: spilling is not truncation: what truncation cut away NovaCode still has."""
    tp, npb = file_runs["truncate"].probes, file_runs["novacode"].probes
    assert file_runs["truncate"].metrics["overflows"] == 0 == file_runs["novacode"].metrics["overflows"]
    key = ["probe", "fact"]
    lost = tp[(tp["category"] == "file") & (tp["where"] == "lost")][key]
    assert len(lost) >= 2
    joined = lost.merge(npb, on=key)
    assert len(joined) == len(lost)
    assert (joined["score"] > 0).all(), joined
    rec = joined[joined["where"] == "recoverable"]
    assert len(rec) >= 1 and rec["pointer"].str.contains("tool-results").all()  # a spill file, read back
    assert file_runs["novacode"].metrics["readbacks"] >= 1

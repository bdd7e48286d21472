"""`ctxsim fidelity FOLDER` (issue 41): every imported session's cost error and its dominant cause,
the distribution by model and Claude Code version, never a bare error; one call count everywhere."""

from __future__ import annotations

import json

import pytest
from ctxsim.harness.cli import main as cli
from ctxsim.harness.fidelity import population as pop
from ctxsim.harness.model import trace as tr

from tests.helpers_claude_code import asst, rec, result, text, user, write


def _session(path, version="2.1.39", model="claude-opus-4-6", calls=4, compact=False, big=False):
    """A small Claude Code session: a tool loop whose context grows by the tool results (usage that
    follows the content), with an auto compaction and its agent-acompact call if asked."""
    recs, t, ctx = [user(0, "fix the parser", version=version)], 1, 20_000
    for i in range(calls):
        recs.append(asst(t, f"r{i}", {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": "a"}},
                         model=model, version=version, w5m=0, w1h=1_000 if i else ctx, read=ctx - 1_000 if i else 0,
                         inp=3))
        recs.append(result(t + 1, f"t{i}", "x = 1\n" * (2_000 if big else 200), version=version))
        ctx += 1_000
        t += 2
    if compact:
        recs += [rec("system", t, subtype="compact_boundary", compactMetadata={"trigger": "auto", "preTokens": ctx},
                     version=version),
                 user(t, "This session is being continued ...", isCompactSummary=True, version=version),
                 asst(t + 1, "after", text("resumed"), model=model, version=version, w1h=2_000, read=15_000)]
        write(path.with_suffix("") / "subagents" / "agent-acompact-1.jsonl", [
            user(0, "fix the parser", isSidechain=True, version=version),
            asst(t - 0.5, "c1", text("<summary/>"), model=model, w5m=0, w1h=100, read=ctx, out=400, isSidechain=True,
                 version=version)])
    return write(path, recs)


def _imported(tmp_path, capsys, recs):
    """``recs`` written as a projects folder's one session, imported by the command line, its trace loaded."""
    from ctxsim.harness.model.trace import load

    src = tmp_path / "projects" / "p"
    write(src / "a.jsonl", recs)
    out = tmp_path / "traces"
    assert cli(["import", "claude-code", str(src), "-o", str(out), "--no-probes"]) == 0
    capsys.readouterr()
    return load(out / "a.jsonl")


def test_one_call_count_everywhere(tmp_path, capsys):
    """The folder table and fidelity both count the calls the log billed: 5 model calls and the
    recorded compaction call = 6 (fidelity counted 5)."""
    src = tmp_path / "projects" / "p"
    _session(src / "a.jsonl", compact=True)
    out = tmp_path / "traces"
    assert cli(["import", "claude-code", str(src), "-o", str(out), "--json", "--no-probes"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["sessions"]
    assert row["calls"] == 6
    assert cli(["fidelity", str(out / "a.jsonl"), "--json", "-"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert (rep["calls"], rep["model_calls"], rep["compaction_calls"]) == (6, 5, 1)


def test_the_folder_report_names_each_session_and_the_distribution(tmp_path, capsys):
    src = tmp_path / "projects" / "p"
    _session(src / "a.jsonl")
    _session(src / "b.jsonl", version="2.0.76", model="claude-sonnet-4-5-20250929", compact=True)
    out = tmp_path / "traces"
    assert cli(["import", "claude-code", str(src), "-o", str(out), "--no-probes"]) == 0
    (out / "broken.jsonl").write_text('{"type": "header", "format": "ctxsim-trace", "version": 1}\n{"type": "us\n')
    capsys.readouterr()
    assert cli(["fidelity", str(out), "--json", str(tmp_path / "f.json")]) == 2   # one session not measured
    cap = capsys.readouterr()
    text_out = cap.out
    assert "a.jsonl" in text_out and "b.jsonl" in text_out and "bad trace: " in text_out
    assert "ctxsim fidelity: 1 of 3 sessions not measured (bad trace 1; each named above) (exit 2)" in cap.err
    assert "by model:" in text_out and "by Claude Code version (another agent's sessions under its name and version, e.g. 'codex 0.118'):" in text_out
    rep = json.loads((tmp_path / "f.json").read_text())
    st = {s["trace"].rsplit("/", 1)[-1]: s for s in rep["sessions"]}
    assert st["broken.jsonl"]["status"] == "bad trace" and st["a.jsonl"]["status"] == "measured"
    assert st["a.jsonl"]["cause"] and set(st["a.jsonl"]["buckets_usd"]) == set(pop.BUCKETS)
    d = rep["distribution"]
    assert d["all"]["sessions"] == 3 and d["all"]["measured"] == 2 and d["by_status"] == {"bad trace": 1, "measured": 2}
    assert set(d["by_claude_code"]) == {"2.1", "2.0", "?"} and set(d["by_model"]) >= {"claude-opus-4-6"}
    assert cli(["fidelity", str(out), "--figure", str(tmp_path / "x.png")]) == 2
    assert "--figure and --calls are per trace" in capsys.readouterr().err


def test_a_replay_over_the_logs_window_is_measured_and_said_with_the_call(tmp_path, capsys):
    """The log ran on a window its calls stayed under; the replay's requests pass it (here the window
    is set to 30,000 on the trace): the session is still priced call by call, and the report says
    at which call and how large both were (was: a bare `error: TRACE: 3`, a KeyError)."""
    from ctxsim.harness.importers import import_file
    from ctxsim.harness.model import trace as tr

    t = import_file("claude-code", _session(tmp_path / "a.jsonl", calls=6, big=True)).trace
    rec = t.header.recorded.model_copy(update={"window": 30_000})
    t = tr.with_header(t, t.header.model_copy(update={"recorded": rec}))
    tr.write(t, tmp_path / "t.jsonl")
    assert cli(["fidelity", str(tmp_path / "t.jsonl"), "--json", "-"]) == 0
    r = json.loads(capsys.readouterr().out)
    o = r["overflow"]
    assert o["window"] == 30_000 and o["simulated_tokens"] > 30_000 and o["call"] is not None
    assert o["recorded_tokens"] is not None and o["recorded_tokens"] <= 30_000
    assert r["cost_usd"]["simulated"] > 0


def test_a_summary_call_over_the_window_is_no_overflow_when_the_logs_compaction_was_too(tmp_path, capsys):
    """The population's logs hold manual compactions at 200,894 and 200,870 tokens of a 200,000 window
    that went through; the replay's summary call over the window was reported as "the replay overflows
    where the log did not". Here the log's compaction is at 24,000 (preTokens and its call's context)
    and the window is set to 23,500, over every main call (20,000-23,000): the replay's summary call
    over it is what the log did too, so nothing is reported."""
    from ctxsim.harness.importers import import_file
    from ctxsim.harness.model import trace as tr

    t = import_file("claude-code", _session(tmp_path / "a.jsonl", calls=4, compact=True)).trace

    def over(window):
        rec = t.header.recorded.model_copy(update={"window": window})
        tr.write(tr.with_header(t, t.header.model_copy(update={"recorded": rec})), tmp_path / f"t{window}.jsonl")
        assert cli(["fidelity", str(tmp_path / f"t{window}.jsonl"), "--json", "-"]) == 0
        return json.loads(capsys.readouterr().out)["overflow"]

    assert over(23_500) is None


def test_distribution_bands_by_hand():
    rs = [pop.SessionResult(f"s{i}", "measured", model="m", version="2.1.1", signed_pct=x)
          for i, x in enumerate([-1.0, 1.5, 3.0, -7.0, 20.0])] + [pop.SessionResult("x", "overflow")]
    d = pop.distribution(rs)
    assert d["sessions"] == 6 and d["measured"] == 5
    assert (d["within_2pct"], d["within_5pct"], d["within_10pct"]) == (0.4, 0.6, 0.8)
    assert d["median_abs_pct"] == 3.0 and d["median_signed_pct"] == 1.5 and (d["over"], d["under"]) == (3, 2)
    assert d["p90_abs_pct"] == pytest.approx(7.0 + 0.6 * 13.0)   # numpy's linear interpolation


def test_random_misses_are_stated_and_the_sessions_they_spared_measured_apart():
    # five sessions billed by Anthropic; the log's random misses cost 0.5 / 2 / 3 / 8 / 12 % of their bills
    rs = [pop.SessionResult(f"s{i}", "measured", model="claude-opus-4-6", provider="anthropic", route="anthropic",
                            signed_pct=e, random_miss_pct=m)
          for i, (e, m) in enumerate([(1.0, 0.5), (-3.0, 2.0), (-6.0, 3.0), (-9.0, 8.0), (-14.0, 12.0)])]
    rs.append(pop.SessionResult("proxy", "measured", provider="anthropic", route="proxy", signed_pct=40.0,
                                random_miss_pct=0.0))
    assert [r.trace for r in pop.spared(rs)] == ["s0", "s1", "proxy"]
    rep = pop.folder_report(rs)["distribution"]
    spared = rep["anthropic_billed_spared"]   # s0 and s1: |1| and |3|
    assert spared["measured"] == 2 and spared["within_2pct"] == 0.5 and spared["median_abs_pct"] == 2.0
    rm = rep["random_misses"]   # over the five billed by Anthropic, the proxy left out
    assert rm["sessions"] == 5 and rm["median_pct"] == 3.0 and (rm["over_2pct"], rm["over_5pct"], rm["over_10pct"]) == (3, 2, 1)
    text = "\n".join(pop.summary_lines(pop.folder_report(rs)))
    assert "random misses ≤2%" in text and "over 5% in 2 of 5 sessions" in text


def test_route_of_reads_who_served_a_call_from_its_ids():
    from ctxsim.harness.importers.claude_code import route_of

    assert route_of("msg_01SnX6AAb2", "req_011CWugpYpN7r") == "anthropic"
    assert route_of("msg_vrtx_01X5", "req_vrtx_011CXJgN") == "vertex"
    assert route_of("msg_bdrk_01SK3CsA23") == "bedrock"
    assert route_of("msg_20260218130000abc") == "proxy"          # a proxy's own id, no request id
    assert route_of("chatcmpl-9x", None) == "proxy"
    assert route_of(None, None) is None and route_of("", 5) is None


def test_billed_by_anthropic_leaves_out_a_proxy_under_a_claude_name(tmp_path, capsys):
    """A proxy answering as claude-opus-4-6 reports its own usage: it is an Anthropic model's session,
    not Anthropic's bill (issue 41; 25 development sessions served so, ids "msg_2026...")."""
    def session(path, prefix):
        recs = [user(0, "fix the parser")]
        for i in range(3):
            recs.append(asst(1 + 2 * i, f"{prefix}{i}", {"type": "tool_use", "id": f"t{i}", "name": "Read",
                                                          "input": {"file_path": "a"}}, w1h=1_000, read=20_000 * (i > 0)))
            recs.append(result(2 + 2 * i, f"t{i}", "x = 1\n" * 200))
        return write(path, recs)

    def relayed(path):
        """Anthropic's answers passed on without the API's request id (a relay): the same message ids,
        no ``requestId`` on any call."""
        recs = [dict(r, message=dict(r["message"], id="msg_01Xy" + r["requestId"])) if r["type"] == "assistant" else r
                for r in json.loads("[" + ",".join(session(path, "n").read_text().splitlines()) + "]")]
        return write(path, [{k: v for k, v in r.items() if k != "requestId"} for r in recs])

    src = tmp_path / "projects" / "p"
    session(src / "first.jsonl", "req_011CX")
    session(src / "vertex.jsonl", "req_vrtx_011CX")
    session(src / "proxy.jsonl", "gw-")
    relayed(src / "relay.jsonl")
    out = tmp_path / "traces"
    assert cli(["import", "claude-code", str(src), "-o", str(out), "--no-probes", "--json"]) == 0
    routes = {s["session"]: s["route"] for s in json.loads(capsys.readouterr().out)["sessions"]}
    assert routes == {"first": "anthropic", "vertex": "vertex", "proxy": "proxy", "relay": "relay"}
    assert any(n.startswith("served through a relay (route relay)") for n in tr.load(out / "relay.jsonl").header.notes)
    assert cli(["fidelity", str(out), "--json", str(tmp_path / "f.json")]) == 0
    printed = capsys.readouterr().out
    assert "billed by Anthropic" in printed and "billed by Anthropic, by model:" in printed
    assert "billed by Anthropic, by Claude Code version:" in printed
    d = json.loads((tmp_path / "f.json").read_text())["distribution"]
    assert d["anthropic_models"]["sessions"] == 4 and d["anthropic_billed"]["sessions"] == 2
    assert {k: v["sessions"] for k, v in d["by_route"].items()} == {"anthropic": 1, "proxy": 1, "relay": 1, "vertex": 1}
    # by model and by version, over all routes and over the sessions billed by Anthropic
    assert d["by_model"]["claude-opus-4-6"]["sessions"] == 4 and d["anthropic_billed_by_model"]["claude-opus-4-6"]["sessions"] == 2
    assert {k: v["sessions"] for k, v in d["anthropic_billed_by_claude_code"].items()} == {"2.1": 2}


def test_a_first_party_session_with_a_call_missing_its_request_id_stays_first_party():
    """Claude Code leaves a first-party call's request id out now and then (19 of 30,094 in the development
    population, at most 5 in a file): the session is still Anthropic's bill; one call alone says nothing."""
    from collections import Counter

    from ctxsim.harness.importers.claude_code import _route

    assert _route(Counter(anthropic=164), Counter(anthropic=5)) == "anthropic"
    assert _route(Counter(anthropic=164), Counter(anthropic=164)) == "relay"
    assert _route(Counter(vertex=3, proxy=1), Counter(vertex=3, proxy=1)) == "relay"
    assert _route(Counter(anthropic=1), Counter(anthropic=1)) == "anthropic"
    assert _route(Counter(proxy=9), Counter(proxy=9)) == "proxy"


def test_another_agents_version_is_named_not_taken_for_a_claude_code_release():
    """A Codex rollout's 0.118 is grouped as "codex 0.118", not beside Claude Code's releases."""
    from ctxsim.harness.fidelity.population import minor

    assert minor("2.1.39") == "2.1" and minor("2.1.39", "claude-code") == "2.1"
    assert minor("0.118.0", "codex") == "codex 0.118" and minor(None, "codex") == "codex ?" and minor(None) == "?"


def test_a_session_that_begins_mid_conversation_has_that_in_its_cause(tmp_path, capsys):
    """The importer's finding that a log begins mid-conversation (its history in another file) is
    what fidelity's cause ends with: the replay cannot mend it, the user is told why."""
    src = tmp_path / "projects" / "p"
    f = _session(src / "a.jsonl")
    lines = f.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "parentUuid": "in-another-file", "uuid": "u1"})
    f.write_text("\n".join(lines) + "\n")
    out = tmp_path / "traces"
    assert cli(["import", "claude-code", str(src), "-o", str(out), "--no-probes"]) == 0
    capsys.readouterr()
    assert cli(["fidelity", str(out), "--json", str(tmp_path / "f.json")]) == 0
    (s,) = json.loads((tmp_path / "f.json").read_text())["sessions"]
    assert s["status"] == "measured" and s["cause"].endswith("(a compaction in the replay keeps them, unless the log's first read after "
                                                         "one tells the system prompt apart)")
    assert "; the log begins mid-conversation: its first message (line 1) answers one (in-anoth…)" in s["cause"]


def test_a_session_split_between_vertex_and_anthropic_reads_each_routes_own_cache(tmp_path, capsys):
    """A router sent a session's calls to Vertex and to Anthropic's API in turn (request ids
    "req_vrtx_…" and "req_01…"). Each route has its own cache: the log's first Vertex call reads
    nothing, and from then on each call reads what the last call of its own route wrote (20,000,
    21,000, 22,000 ...). The importer names each call's route; the replay keys its caches by it, so
    its call k (k ≥ 2) reads its own context two calls back, and the log's misses at a switch are a
    changed prefix, not strays of a fitted model."""
    from ctxsim.harness.fidelity.compare import run_fidelity
    from ctxsim.harness.model.trace import ROUTE, AssistantEvent

    recs, t, ctx = [user(0, "fix the parser")], 1, 20_000
    for i in range(6):
        rid = f"req_vrtx_011{i}" if i % 2 else f"req_011CX{i}"
        read = ctx - 2_000 if i >= 2 else 0
        recs.append(asst(t, rid, {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": "a"}},
                         w5m=ctx - read, read=read, inp=0))
        recs.append(result(t + 1, f"t{i}", "x = 1\n" * 200))
        ctx += 1_000
        t += 2
    trace = _imported(tmp_path, capsys, recs)
    calls = [e for e in trace.events if isinstance(e, AssistantEvent)]
    assert [e.meta.get(ROUTE) for e in calls] == ["anthropic", "vertex"] * 3
    assert any("more than one route (anthropic 3, vertex 3)" in n for n in trace.header.notes)
    f = run_fidelity(trace)
    sim = f.calls
    assert sim.loc[1, "simulated_cache_read"] == 0
    for k in range(2, 6):
        assert sim.loc[k, "simulated_cache_read"] == sim.loc[k - 2, "simulated_context"]
    switches = {m["call"]: m for m in f.misses}
    assert switches[1]["cause"] == "prefix_change" and "served by vertex" in switches[1]["changed"]


def test_an_opus_4_7_sessions_first_tool_search_load_is_a_prefix_change_the_replay_makes_too(tmp_path, capsys):
    """A ToolSearch result of an Opus 4.7 session loads two tools (tool_reference blocks): the
    importer keeps their names with the result (the text stays the placeholder), and the log's next
    call reads nothing. Fidelity names it a prefix change (no stray of a fitted model: no other call
    falls short), and the replay reads there no more than the system prompt; the later load reads
    in full in both."""
    from ctxsim.harness.fidelity.compare import run_fidelity
    from ctxsim.harness.model.trace import TOOLS_LOADED, ToolResultEvent

    model, recs, t, ctx = "claude-opus-4-7", [user(0, "plan the driver")], 1, 20_000
    loads = {2: ["ExitPlanMode", "TaskCreate"], 5: ["TaskList"]}
    for i in range(8):
        read = 0 if i in (0, 3) else ctx - 1_000
        name = "ToolSearch" if i in loads else "Read"
        recs.append(asst(t, f"r{i}", {"type": "tool_use", "id": f"t{i}", "name": name, "input": {"query": "x"}},
                         model=model, w5m=ctx - read, read=read, inp=0))
        content = [{"type": "tool_reference", "tool_name": n} for n in loads[i]] if i in loads else "x = 1\n" * 200
        recs.append(result(t + 1, f"t{i}", content))
        ctx += 1_000
        t += 2
    trace = _imported(tmp_path, capsys, recs)
    results = [e for e in trace.events if isinstance(e, ToolResultEvent)]
    assert [e.meta.get(TOOLS_LOADED) for e in results] == [None, None, ["ExitPlanMode", "TaskCreate"], None, None,
                                                            ["TaskList"], None, None]
    assert results[2].content == "[tool_reference content not in the log]\n[tool_reference content not in the log]"
    f = run_fidelity(trace)
    (miss,) = f.misses
    assert (miss["call"], miss["cause"]) == (3, "prefix_change") and "tool search" in miss["changed"]
    assert f.report["cache_model"] == {"fitted": False}
    sim = f.calls
    assert sim.loc[3, "simulated_cache_read"] < sim.loc[0, "simulated_context"] / 2   # the system prompt at most
    assert sim.loc[6, "simulated_cache_read"] == sim.loc[5, "simulated_context"]        # the second load: a hit



def test_a_new_turns_error_is_split_between_the_contexts_size_and_the_cache():
    """A main call after a new user message whose replay sends 10,000 tokens more than the log's 100,000
    (input billed $0.05 in the log: $0.0000005 a token) and costs $0.02 more: $0.005 is the size's, at the
    log's rate, the other $0.015 the cache's across the turn. A log that cached nothing (a proxy without
    caching, sent 30% more after a relaunch) is all size: it read "the cache across user turns" before."""
    import pandas as pd

    def row(sim_ctx, d_usd, new_turn=True):
        return {"thread": "main", "after_compact": False, "new_turn": new_turn, "recorded_context": 100_000,
                "simulated_context": sim_ctx, "recorded_input_usd": 0.05, "recorded_cost_usd": 0.06,
                "simulated_cost_usd": 0.06 + d_usd}

    none = pd.DataFrame({"cost_usd": []})
    got = pop.attribute(pd.DataFrame([row(110_000, 0.02)]), none, 0.0)
    assert got["context size"] == pytest.approx(0.005) and got["new user turn"] == pytest.approx(0.015)
    got = pop.attribute(pd.DataFrame([row(130_000, 0.015)]), none, 0.0)
    assert got["context size"] == pytest.approx(0.015) and got["new user turn"] == pytest.approx(0.0)
    got = pop.attribute(pd.DataFrame([row(110_000, 0.02, new_turn=False)]), none, 0.0)
    assert got["context size"] == pytest.approx(0.005) and got["cache"] == pytest.approx(0.015)

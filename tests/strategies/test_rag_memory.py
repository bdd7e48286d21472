"""rag_memory (Letta 0.16.8): chunking, the BM25 index (against rank_bm25 and by hand), core memory
pinned and billed, recall memory searched by billed steps, the window indexed at session end, the
sliding-window rule (0.9 / 0.7 of the window) and its summary on the small model, and retrieval
quality as the probes measure it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from ctxsim.harness.llm.services import SUMMARY
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Block, History, Message, Usage
from ctxsim.harness.provider import protocol
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.rag_memory import ChunkStore, RagMemory, chunk_text, tokenize
from ctxsim.strategies.registry import get, make_config
from rank_bm25 import BM25Okapi

from tests.fakes import IndexedServices, strategy_env
from tests.helpers_traces import Builder


def make(tmp_path: Path, services=None, window: int = 200_000, **params) -> RagMemory:
    env = strategy_env(tmp_path, services or IndexedServices("<summary>what happened</summary>"), window)
    return RagMemory(make_config(RagMemory, params), env)


def test_tokenize_keeps_identifiers_whole_and_in_parts():
    assert tokenize("Fix load_user() in src/a.py, E123!") == [
        "fix", "load_user", "load", "user", "in", "src/a.py", "src", "a", "py", "e123"]


def test_chunks_split_on_lines_and_hard_split_long_lines():
    assert chunk_text("aaaa\nbbbb\ncccc", 9) == ["aaaa\nbbbb", "cccc"]  # 4 + 1 + 4 = 9 fits, 14 does not
    assert chunk_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_bm25_scores_match_rank_bm25_and_the_formula(tmp_path):
    store = ChunkStore(1.5, 0.75, tmp_path / "c.jsonl")
    store.add(["alpha beta", "gamma delta", "gamma epsilon"], source=1)
    lib = BM25Okapi([["alpha", "beta"], ["gamma", "delta"], ["gamma", "epsilon"]])
    store.search("alpha", 1)  # builds the index
    for q in (["alpha"], ["gamma"], ["alpha", "gamma", "zeta"]):
        assert np.allclose(store.scores(q), lib.get_scores(q))
    # by hand: 'alpha' is in 1 of 3 chunks, idf = ln(3 - 1 + 0.5) - ln(1 + 0.5) = ln(2.5 / 1.5);
    # every chunk has 2 terms (= avgdl): score = idf x 1 x 2.5 / (1 + 1.5) = idf
    assert store.scores(["alpha"])[0] == pytest.approx(math.log(2.5 / 1.5))
    # 'gamma' (2 of 3) has a negative idf, floored at 0.25 x the mean idf:
    # mean = (4 x ln(2.5/1.5) + ln(1.5/2.5)) / 5 = 3 x 0.5108 / 5 = 0.3065; floor 0.0766
    assert store.scores(["gamma"])[1] == pytest.approx(0.25 * 3 * math.log(2.5 / 1.5) / 5)
    # a tie is broken towards the newer chunk; a zero score is never returned
    assert [c.id for c, _ in store.search("gamma", 5)] == [2, 1]
    assert store.search("zeta", 5) == []
    lines = (tmp_path / "c.jsonl").read_text().splitlines()
    assert [json.loads(x)["text"] for x in lines] == ["alpha beta", "gamma delta", "gamma epsilon"]


def test_query_keeps_the_rarest_terms(tmp_path):
    store = ChunkStore(1.5, 0.75, None, max_query_terms=1)
    store.add(["common rare", "common other", "common third"], source=1)
    store.search("x", 1)
    assert store.query_terms("common rare unknown") == ["rare"]


GOAL = "Goal: fix parse_header in src/parser.py (ticket LED-100037)."


def test_the_window_rule_is_lettas_and_scales_with_the_window(tmp_path):
    """SUMMARIZATION_TRIGGER_MULTIPLIER 0.9; evict until under (1 - 0.3) of the window."""
    assert get("rag_memory") is RagMemory
    assert make(tmp_path / "a").trigger == 180_000
    assert make(tmp_path / "b", window=1_000_000).trigger == 900_000
    assert make(tmp_path / "c", trigger_share=0.5).trigger == 100_000


def _turns(s: RagMemory, n: int, start: int = 0, text: str = "lorem ipsum "):
    for i in range(start, start + n):
        req = s.build_request(CallInfo(i, float(i)))
        s.on_response(Message("assistant", (Block.text_block(f"step {i}"), Block.tool_use(f"t{i}", "Read", {}))),
                      Usage(input_uncached=req.estimated_tokens))
        s.on_tool_results(Message("user", (Block.tool_result(f"t{i}", text * 250),)))
    return s.build_request(CallInfo(start + n, float(start + n)))


def test_core_memory_holds_the_goal_billed_and_pinned_through_a_compaction(tmp_path):
    svc = IndexedServices("<summary>what happened</summary>")
    s = make(tmp_path, svc, trigger_tokens=3_000, keep_tokens=1_000)
    s.on_user(Message.user(GOAL))
    first = s.build_request(CallInfo(0, 0.0))
    # the model files the request in core memory: a billed step, its pair in the conversation
    (_, spec), = svc.calls
    assert spec.kind == "memory_edit" and first.messages[1].blocks[0].name == "core_memory_append"
    assert first.messages[2].blocks[0].text == GOAL  # Letta returns the updated block
    assert (tmp_path / "rag" / "core_memory.md").read_text() == GOAL + "\n"
    req = _turns(s, 6)
    assert s.counters.compactions_succeeded >= 1 == min(1, s.counters.extra["summaries"])
    head = req.messages
    assert head[0].meta["origin"] == "memory" and GOAL in head[0].text  # re-rendered after the compaction
    assert head[1].meta["origin"] == "summary" and head[1].text.startswith("Note: prior messages from the beginning")
    assert not (tmp_path / "transcripts").exists()  # Letta's path back is recall memory
    summary = [(r, sp) for r, sp in svc.calls if sp.kind == SUMMARY]
    assert summary and all(r.model == "claude-haiku-4-5" for r, _ in summary)  # Letta's summariser
    assert all(not any(m.meta.get("origin") == "memory" for m in r.messages) for r, _ in summary)
    assert protocol.pairing_error(req) == "" and req.breakpoints[1].at == 1  # head: core block + summary


def test_a_task_message_searches_recall_memory_in_a_billed_step(tmp_path):
    svc = IndexedServices("<summary>what happened</summary>")
    s = make(tmp_path, svc, trigger_tokens=3_000, keep_tokens=1_000, core_memory=False)
    s.on_user(Message.user(GOAL))
    _turns(s, 6)
    assert any(GOAL in c.text for c in s.store.chunks)
    s.on_response(Message("assistant", (Block.text_block("done"),)), None)
    s.on_user(Message.user("Which ticket was parse_header for?"))
    req = s.build_request(CallInfo(7, 7.0))
    kinds = [sp.kind for _, sp in svc.calls]
    assert kinds.count("retrieval") == 1
    call, result = req.messages[-2], req.messages[-1]
    assert call.blocks[0].name == "conversation_search" and "parse_header" in call.blocks[0].input["query"]
    text = result.blocks[0].text
    assert text.startswith("Found ") and GOAL in json.loads(text.split(": ", 1)[1])[0]["content"]
    assert protocol.pairing_error(req) == ""
    # asked again while that chunk is still in the window: it does not come back
    s.on_response(Message("assistant", (Block.text_block("LED-100037"),)), None)
    s.on_user(Message.user("parse_header ticket again?"))
    again = s.build_request(CallInfo(8, 8.0))
    assert GOAL not in again.messages[-1].blocks[0].text


def test_hook_output_neither_searches_nor_enters_core_memory(tmp_path):
    svc = IndexedServices()
    s = make(tmp_path, svc)
    s.on_user(Message.user("<task-notification>\n<status>completed</status>\n</task-notification>"))
    s.build_request(CallInfo(0, 0.0))
    assert svc.calls == [] and s.core == []


def test_the_window_is_indexed_at_session_end_and_core_memory_persists(tmp_path):
    s = make(tmp_path)
    s.on_session_start("s1", resume=False, now=0.0)
    s.on_user(Message.user(GOAL))
    _turns(s, 2)
    assert len(s.store) == 0
    s.on_session_end("s1", 10.0)
    assert any(GOAL in c.text for c in s.store.chunks)
    stored = len(s.store)
    s.on_session_end("s1", 10.0)
    assert len(s.store) == stored  # nothing indexed twice
    s.on_session_start("s2", resume=False, now=20.0)
    assert len(s.history) == 1 and GOAL in s.history[0].text and s.history[0].meta["origin"] == "memory"


def test_core_memory_keeps_the_sessions_goal_under_its_limit(tmp_path):
    s = make(tmp_path, core_memory_chars=200)
    s.on_session_start("s2", resume=False, now=0.0)
    s.file_in_core(GOAL)                     # 61 + 1
    for k in range(3):
        s.file_in_core(str(k) * 60)          # 61 each: 62 + 3 x 61 = 245 > 200: the oldest after the goal goes
    assert [e[:1] for _, e in s.core] == ["G", "1", "2"]


def test_other_providers_summarise_on_the_main_model(tmp_path):
    from dataclasses import replace

    env = replace(strategy_env(tmp_path, IndexedServices()), provider="openai")
    assert RagMemory(make_config(RagMemory, {}), env).config.summary_model == ""


def _probe_trace(question: str) -> tr.Trace:
    b = Builder()
    b.user(GOAL)
    b.event(tr.FactEvent(t=b.t, id="g", category="goal", text=GOAL))
    rng = np.random.default_rng(0)
    for i in range(12):
        b.call(f"working {i}", results=[" ".join(rng.choice(["alpha", "beta", "def", "x", "="], 1500))])
    b.call("done")
    b.user(question)
    b.event(tr.ProbeEvent(t=b.t, id="p", needs=["g"]))
    b.call("answer")
    return b.build()


def test_retrieval_quality_is_what_the_probe_measures():
    """Core memory and summary off: the goal is found at the probe only when the question's cue
    brings its chunk back."""
    params = {"trigger_tokens": 8_000, "keep_tokens": 3_000, "core_memory": False, "summary": False}
    hit = replay(_probe_trace("Which ticket was parse_header for?"), "rag_memory", params, RunConfig())
    miss = replay(_probe_trace("Continue please."), "rag_memory", params, RunConfig())
    for r in (hit, miss):
        m = r.metrics
        assert m["pairing_violations"] == 0 and m["compactions"]["succeeded"] >= 1
        assert m["by_kind"]["retrieval"]["calls"] == 1 and m["by_kind"]["retrieval"]["cost_usd"] > 0
    assert hit.probes.set_index("fact").loc["g", "where"] == "window"
    assert miss.probes.set_index("fact").loc["g", "where"] == "lost"
    assert hit.metrics["retention"]["goal"] > 0 == miss.metrics["retention"]["goal"]
    pinned = replay(_probe_trace("Continue please."), "rag_memory", {**params, "core_memory": True}, RunConfig())
    assert pinned.probes.set_index("fact").loc["g", "where"] == "window"  # core memory keeps it without a cue


def test_a_summary_on_the_small_model_still_starts_with_a_user_message(tmp_path):
    # pinned head [core block] and a kept tail that starts with the assistant (the last summary
    # failed, so no summary message sits between them): stripping the head for the other model
    # would leave the assistant first (Bedrock and Vertex refuse it), so the head stays
    svc = IndexedServices("<summary>what happened</summary>")
    s = make(tmp_path, svc)
    s.file_in_core(GOAL)
    core = s.core_block()
    answer = Message("assistant", (Block.text_block("looked at it"),))
    dropped = History([core, answer, Message.user("go on")])
    s.history, s.pinned = History([*dropped, Message.user("next")]), 1
    s.summarise(dropped)
    (req, spec), = svc.calls
    assert spec.kind == SUMMARY and req.model == "claude-haiku-4-5"
    assert [m.role for m in req.messages] == ["user", "assistant", "user"] and req.messages[0] is core
    # with the summary between them, the head goes as before: the summary opens the request
    svc.calls.clear()
    summ = Message.user("Note: prior messages ...", origin="summary")
    dropped = History([core, summ, answer, Message.user("go on")])
    s.history, s.pinned, s.summary_msg = History([*dropped, Message.user("next")]), 2, summ
    s.summarise(dropped)
    (req, _), = svc.calls
    assert [m.role for m in req.messages] == ["user", "assistant", "user"] and req.messages[0] is summ


# --- the incremental index against rank_bm25 (issue 21) ----------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_WORDS = st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa",
                          "load_user", "src/a.py", "e123"])
_DOC = st.lists(_WORDS, min_size=0, max_size=12).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(batches=st.lists(st.lists(_DOC, min_size=1, max_size=6), min_size=1, max_size=8),
       queries=st.lists(st.lists(_WORDS, min_size=1, max_size=6), min_size=1, max_size=4))
def test_incremental_index_is_bit_identical_to_rank_bm25(batches, queries):
    """Chunks added in batches, searched between batches: after each batch the store's idf, average
    length and scores equal a BM25Okapi built from scratch over the same chunks, to the bit."""
    store = ChunkStore(1.5, 0.75, None, max_query_terms=4)
    texts: list[str] = []
    for batch in batches:
        store.add(batch, source=1)
        texts.extend(batch)
        lib = BM25Okapi([tokenize(t) or ["<empty>"] for t in texts], k1=1.5, b=0.75)
        assert store.avgdl == lib.avgdl
        assert {w: store.idf(w) for w in lib.idf} == lib.idf
        norm = 1.5 * (1 - 0.75 + 0.75 * np.asarray(lib.doc_len, dtype=float) / lib.avgdl)
        for q in queries:
            text = " ".join(q)
            terms = sorted({w for w in tokenize(text) if w in lib.idf}, key=lambda w: (-lib.idf[w], w))[:4]
            assert store.query_terms(text) == terms
            # the sum the store evaluated before (over postings, with the library's idf and lengths), exactly
            want = np.zeros(len(texts))
            for w in terms:
                tf = np.asarray([d.get(w, 0) for d in lib.doc_freqs], dtype=float)
                hit = tf > 0
                want[hit] += lib.idf[w] * tf[hit] * 2.5 / (tf[hit] + norm[hit])
            got = store.scores(terms)
            assert np.array_equal(got, want)
            assert np.allclose(got, lib.get_scores(terms), rtol=0, atol=1e-12)
            order = sorted(range(len(want)), key=lambda i: (-want[i], -i))
            top = [i for i in order if want[i] > 0][:3]
            assert [c.id for c, _ in store.search(text, 3)] == top

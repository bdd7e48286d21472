"""rag_memory: chunking, the BM25 index (against rank_bm25 and by hand), eviction into the store,
injection per turn, and retrieval quality as the probes measure it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from harness import trace as tr
from harness.conversation import Block, Message, SystemPrompt, ToolDef, ToolSet, Usage
from harness.engine import RunConfig, replay
from strategies.base import CallInfo, StrategyEnv
from strategies.rag_memory import ChunkStore, RagMemory, chunk_text, tokenize
from strategies.registry import get, make_config
from tests.helpers_traces import Builder


def make(tmp_path: Path, **params) -> RagMemory:
    env = StrategyEnv(session_dir=tmp_path, services=None, now=lambda: 0.0, window=200_000,
                      max_output_tokens=64_000, model="m", provider="anthropic", system=SystemPrompt.of("sys"),
                      tools=ToolSet((ToolDef("Read", "read"),)), rng=np.random.default_rng(0))
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


def _drive(s: RagMemory, question: str):
    """The goal, then turns of a 1,050-char result, until the first eviction; then ``question``."""
    s.on_user(Message.user(GOAL))
    for i in range(4):
        req = s.build_request(CallInfo(i, float(i)))
        s.on_response(Message("assistant", (Block.text_block(f"step {i}"), Block.tool_use(f"t{i}", "Read", {}))),
                      Usage(input_uncached=req.estimated_tokens))
        s.on_tool_results(Message("user", (Block.tool_result(f"t{i}", "lorem ipsum " * 250),)))
    s.on_user(Message.user(question))
    return s.build_request(CallInfo(4, 4.0))


def test_evicted_turns_are_chunked_and_the_relevant_one_comes_back(tmp_path):
    s = make(tmp_path, trigger_tokens=1_000, keep_tokens=400, requery_every=0)
    assert get("rag_memory") is RagMemory
    req = _drive(s, "Which ticket was parse_header for?")
    assert s.counters.extra["window_cuts"] >= 1
    assert any(GOAL in c.text for c in s.store.chunks)
    inj = req.messages[-1]
    assert inj.meta["origin"] == "injection" and GOAL in inj.text
    assert inj.text.index(GOAL) < inj.text.index("</passage>")  # the goal's chunk ranks first
    assert req.messages[-2].text == "Which ticket was parse_header for?"
    # asking again does not inject the same chunk twice while it is still in the window
    s.on_response(Message("assistant", (Block.text_block("LED-100037"),)), None)
    s.on_user(Message.user("parse_header ticket again?"))
    again = s.build_request(CallInfo(5, 5.0))
    assert all(GOAL not in m.text for m in again.messages[len(req.messages):])


def test_nothing_is_injected_when_no_chunk_matches(tmp_path):
    s = make(tmp_path, trigger_tokens=1_000, keep_tokens=400, requery_every=0)
    req = _drive(s, "zebra quartz")
    assert req.messages[-1].text == "zebra quartz" and s.counters.extra["chunks_injected"] == 0


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


def test_retrieval_quality_is_what_the_probe_measures(tmp_path):
    params = {"trigger_tokens": 8_000, "keep_tokens": 3_000, "requery_every": 0}
    hit = replay(_probe_trace("Which ticket was parse_header for?"), "rag_memory", params, RunConfig())
    miss = replay(_probe_trace("Continue please."), "rag_memory", params, RunConfig())
    for r in (hit, miss):
        assert r.metrics["pairing_violations"] == 0 and r.metrics["strategy_counters"]["window_cuts"] >= 1
    assert hit.probes.set_index("fact").loc["g", "where"] == "window"
    assert miss.probes.set_index("fact").loc["g", "where"] == "lost"
    assert hit.metrics["retention"]["goal"] > 0 == miss.metrics["retention"]["goal"]

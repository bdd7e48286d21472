"""The simulated LLM: summaries whose fact survival follows the model fitted on real compactions, their
length and capacity, compounding; memory side calls."""

import json

import numpy as np
import pytest
from ctxsim.harness.llm.services import MEMORY_CONSOLIDATE, MEMORY_EXTRACT, MEMORY_SELECT, SUMMARY, CallSpec
from ctxsim.harness.llm.simulated import (
    DEFAULT_SECTIONS,
    SimParams,
    SimulatedLLM,
    load_calibration,
    memory_name,
)
from ctxsim.harness.model.conversation import Block, History, Message, Request, SystemPrompt, ToolSet
from ctxsim.harness.model.trace import FactEvent


def count(text: str) -> int:
    """A stand-in tokenizer: 1 token per 4 characters, rounded up."""
    return (len(text) + 3) // 4


def fact(i: int, cat: str) -> FactEvent:
    return FactEvent(t=0, id=f"f{i:04d}", category=cat, text=f"{cat.upper()}_FACT_{i:04d} = {100000 + i}")


def req(*msgs: Message) -> Request:
    return Request(SystemPrompt.of("sys"), ToolSet(), History(msgs))


def conversation(facts: list[FactEvent], filler: int = 0) -> list[Message]:
    """A user message with the goal and one assistant message per other fact, plus filler text."""
    out = []
    for f in facts:
        role = "user" if f.category in ("goal", "constraint", "preference", "feedback") else "assistant"
        out.append(Message(role, (Block.text_block(f"{f.text}\n" + "lorem ipsum dolor " * filler),)))
    return out


def test_summary_has_the_sections_and_keeps_surviving_facts_verbatim():
    facts = [fact(0, "goal"), fact(1, "decision"), fact(2, "file")]
    llm = SimulatedLLM({f.id: f for f in facts}, count, 0, SimParams(survival={c: 1.0 for c in
                                                                           ("goal", "decision", "file")}))
    text = llm.respond(req(*conversation(facts)), CallSpec(kind=SUMMARY, max_output_tokens=5000)).text
    assert text.startswith("<summary>") and text.endswith("</summary>")
    for s in DEFAULT_SECTIONS:
        assert f"## {s}" in text
    for f in facts:
        assert f.text in text
    # facts go to their section: the goal under the request, the file detail under files
    assert text.index(facts[0].text) < text.index("## Key technical concepts")
    files_at = text.index("## Files and code sections")
    assert files_at < text.index(facts[2].text) < text.index("## Errors and fixes")


def test_a_fact_that_does_not_survive_does_not_leak_through_material():
    goal = fact(0, "goal")
    llm = SimulatedLLM({goal.id: goal}, count, 0, SimParams(survival={"goal": 0.0}))
    text = llm.respond(req(*conversation([goal], filler=3)), CallSpec(kind=SUMMARY, max_output_tokens=5000)).text
    assert goal.text not in text
    # deterministic: the same request gives the same summary
    assert text == llm.respond(req(*conversation([goal], filler=3)), CallSpec(kind=SUMMARY, max_output_tokens=5000)).text


def test_fixed_rate_by_category_over_many_facts():
    facts = [fact(i, "file") for i in range(400)]
    llm = SimulatedLLM({f.id: f for f in facts}, count, 0, SimParams(survival={"file": 0.45}, fact_share=1.0,
                                                                         min_chars=40_000))
    text = llm.respond(req(*conversation(facts)), CallSpec(kind=SUMMARY, max_output_tokens=200_000)).text
    kept = sum(f.text in text for f in facts)
    # 400 draws at p = 0.45, no capacity limit (the facts need 400 x 25 = 10,000 of 40,000 characters):
    # mean 180, sd sqrt(400 x 0.45 x 0.55) = 9.95 -> within 4 sd
    assert abs(kept - 180) < 40


def test_capacity_keeps_the_facts_within_their_share_of_the_summary():
    """A short conversation: the summary's target is min_chars = 2,400 characters; fact_share 0.5
    leaves 1,200 for facts; each takes its 23 characters + 3 (a list item), so 1,200 // 26 = 46 of
    400 sure survivors are kept."""
    facts = [fact(i, "goal") for i in range(400)]
    llm = SimulatedLLM({f.id: f for f in facts}, count, 0, SimParams(survival={"goal": 1.0}))
    text = llm.respond(req(*conversation(facts)), CallSpec(kind=SUMMARY, max_output_tokens=5_000)).text
    assert sum(f.text in text for f in facts) == 46
    assert count(text) <= 5_000


def test_survival_follows_the_fitted_model_on_content():
    """Two identifier facts: one the assistant used in two messages, one seen once in a tool result.
    The features are worked out by hand; the probabilities are the committed model's."""
    from ctxsim.harness.llm import survival as sv

    used = FactEvent(t=0, id="u", category="identifier", text="flush_ledger_now")
    once = FactEvent(t=0, id="o", category="identifier", text="LedgerStoreCache")
    msgs = [Message.user("fix it"),                                                        # 6 chars: 2 tokens
            Message("assistant", (Block.text_block("call flush_ledger_now"),)),          # 21: 6
            Message("user", (Block.tool_result("t1", "LedgerStoreCache found"),)),       # 22: 6
            Message("assistant", (Block.text_block("flush_ledger_now again"),))]          # 22: 6
    llm = SimulatedLLM({f.id: f for f in (used, once)}, count, 0)
    got = llm.survival(msgs)
    m = sv.default_model()
    # used: 2 mentions, 2 uses, not typed by the user, last in the newest message (age 0 of 20 tokens)
    assert got["u"] == pytest.approx(m.p(sv.Features("identifier", 2, 2, False, 0.0)))
    # once: 1 mention, no use, in a tool result; 6 of the 20 tokens come after it (age 0.3)
    assert got["o"] == pytest.approx(m.p(sv.Features("identifier", 1, 0, False, 6 / 20)))
    assert got["u"] > got["o"]  # the coefficient of uses is positive: what the agent kept using survives


def test_summary_length_follows_the_input_like_real_compactions():
    """150,000 tokens in (count: 4 characters a token) -> chars_per_token x 150,000 characters out:
    0.0708 x 150k = 10.6k (the median over the development population's 142 real compactions,
    harness/data/summary_survival.json; the three bundled ones: 0.087, 13-16k from 142k-167k tokens)."""
    users = [Message.user(f"request {i}: " + " ".join(f"word{i}x{j}" for j in range(560))) for i in range(100)]
    total = sum(count(m.text) for m in users)
    llm = SimulatedLLM({}, count, 0)
    text = llm.respond(req(*users), CallSpec(kind=SUMMARY, max_output_tokens=20_000)).text
    target = llm.params.chars_per_token * total
    assert 145_000 < total < 160_000
    assert 0.9 * target <= len(text) <= 1.02 * target
    assert 9_000 < len(text) < 12_500


def test_the_summariser_never_retokenises_its_input():
    """With the engine's per-message counts, only the finished summary is counted (once per summary),
    and each message object is counted once however many summaries read it (issue #21)."""
    texts, msg_counts = [], []

    def counting(text):
        texts.append(len(text))
        return count(text)

    def message_tokens(m):
        msg_counts.append(id(m))
        return count(m.text)

    history = [Message.user("x" * 4_000) for _ in range(50)]
    system, tools = SystemPrompt.of("sys"), ToolSet()  # built once per run, as the engine does
    llm = SimulatedLLM({}, counting, 0, message_tokens=message_tokens)
    llm.respond(Request(system, tools, History(history)), CallSpec(kind=SUMMARY, max_output_tokens=20_000))
    llm.respond(Request(system, tools, History([*history, Message.user("one more")])),
                CallSpec(kind=SUMMARY, max_output_tokens=20_000))
    # the system prompt once, then each summary once; never the 200k characters of input
    assert len(texts) == 3 and max(texts) < 20_000
    assert len(msg_counts) == 51 == len(set(msg_counts))


def test_losses_compound_over_repeated_compactions():
    """A fact in a summary is drawn again when that summary is summarised: p^2 after two rounds."""
    facts = [fact(i, "decision") for i in range(300)]
    fmap = {f.id: f for f in facts}
    llm = SimulatedLLM(fmap, count, 0, SimParams(survival={"decision": 0.7}, fact_share=1.0, min_chars=80_000))
    s1 = llm.respond(req(*conversation(facts)), CallSpec(kind=SUMMARY, max_output_tokens=50_000)).text
    s2 = llm.respond(req(Message.user(s1, origin="summary"), Message.user("next")),
                     CallSpec(kind=SUMMARY, max_output_tokens=50_000)).text
    k1 = sum(f.text in s1 for f in facts)
    k2 = sum(f.text in s2 for f in facts)
    assert abs(k1 - 210) < 35          # 300 x 0.7
    assert abs(k2 - 147) < 35          # 300 x 0.49
    assert all(f.text in s1 for f in facts if f.text in s2)  # nothing comes back once lost


def test_only_the_summarised_head_is_summarised():
    head, tail = fact(0, "decision"), fact(1, "decision")
    llm = SimulatedLLM({head.id: head, tail.id: tail}, count, 0, SimParams(survival={"decision": 1.0}))
    text = llm.respond(req(*conversation([head, tail])),
                       CallSpec(kind=SUMMARY, max_output_tokens=5000, params={"summarize_messages": 1})).text
    assert head.text in text and tail.text not in text


def test_calibration_file_replaces_measured_rates(tmp_path):
    p = tmp_path / "cal.json"
    p.write_text(json.dumps({"format": "ctxsim-summary-calibration", "version": 1,
                             "survival": {"goal": {"rate": 1.0}, "file": {"rate": 0.2}, "error": {"rate": None}}}))
    assert load_calibration(p) == {"goal": 1.0, "file": 0.2}
    sp = SimParams(calibration=str(p))
    assert sp.survival == {"goal": 1.0, "file": 0.2}  # unmeasured categories stay with the fitted model
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="not a ctxsim-summary-calibration"):
        SimParams(calibration=str(bad))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        SimParams(survival={"goal": 1.5})


def test_params_as_dict_like_make_backend_passes_them():
    llm = SimulatedLLM({}, count, 3, {"min_chars": 100})
    assert llm.params.min_chars == 100


def test_every_summariser_constant_names_its_source():
    for name, _value, source in SimParams().assumptions():
        assert name.startswith("summariser.") and (source == "assumed" or "fitted" in source), name


# --- memory side calls (answers parsed by NovaCode's own memory parsers) --------------------------------
def test_extract_answers_memory_blocks_the_memory_layer_parses():
    from ctxsim.strategies.novacode.memory import extraction_prompt, parse_memory_blocks

    pref, err = fact(0, "preference"), fact(1, "error")
    llm = SimulatedLLM({pref.id: pref, err.id: err}, count, 0, SimParams(extract={"preference": 1.0, "error": 0.0}))
    prompt = extraction_prompt(f"User: {pref.text}\nAssistant: ok, and {err.text}", [])
    out = llm.respond(req(Message.user(prompt)), CallSpec(kind=MEMORY_EXTRACT, params={"existing": []})).text
    mems, bad = parse_memory_blocks(out)
    assert bad == 0 and len(mems) == 1
    assert mems[0].type == "user" and pref.text in mems[0].body
    # already extracted (its name exists): not written again
    again = llm.respond(req(Message.user(prompt)), CallSpec(kind=MEMORY_EXTRACT, params={"existing": [memory_name(pref)]}))
    assert again.text == "NO_MEMORIES" and parse_memory_blocks(again.text) == ([], 0)


def test_select_returns_a_json_array_within_max_with_user_and_feedback_eligible():
    from ctxsim.strategies.novacode.memory import parse_selection

    prompt = ("Query:\nfix the uploader retry budget\n\nAvailable memories:\n"
              "- a.md [project] uploader-retries: retry budget of the uploader\n"
              "- b.md [project] billing-schema: invoice table layout\n"
              "- c.md [user] prefers-small-commits: keep commits small\n")
    llm = SimulatedLLM({}, count, 0)
    out = llm.respond(req(Message.user(prompt)), CallSpec(kind=MEMORY_SELECT, params={
        "candidates": ["a.md", "b.md", "c.md"], "max": 2, "query": "fix the uploader retry budget"})).text
    assert json.loads(out) == ["a.md", "c.md"]  # a: 3 words overlap; c: always eligible (user); b: no overlap
    assert parse_selection(out, ["a.md", "b.md", "c.md"], 2) == ["a.md", "c.md"]


def test_consolidate_merges_identical_bodies_only():
    from ctxsim.strategies.novacode.memory import parse_consolidation

    def file(name, body):
        return f'<file name="{name}" type="user">\n---\nname: {name[:-3]}\ndescription: d\ntype: user\n---\n{body}\n</file>'

    llm = SimulatedLLM({}, count, 0)
    text = "\n\n".join([file("a.md", "keep commits small"), file("b.md", "keep  commits small"), file("c.md", "other")])
    out = llm.respond(req(Message.user(text)), CallSpec(kind=MEMORY_CONSOLIDATE, params={"files": ["a.md", "b.md", "c.md"]})).text
    assert out.startswith("MERGE a.md b.md")
    plan = parse_consolidation(out, ["a.md", "b.md", "c.md"])
    assert plan is not None and plan.merge and plan.merge[0][0] == ["a.md", "b.md"]
    none = llm.respond(req(Message.user(file("c.md", "other"))), CallSpec(kind=MEMORY_CONSOLIDATE)).text
    assert none == "NO_CHANGES"


def test_rng_is_keyed_by_the_request_not_call_order():
    facts = [fact(i, "file") for i in range(50)]
    fmap = {f.id: f for f in facts}
    r1, r2 = req(*conversation(facts[:25])), req(*conversation(facts[25:]))
    spec = CallSpec(kind=SUMMARY, max_output_tokens=5000)
    a = SimulatedLLM(fmap, count, 0)
    b = SimulatedLLM(fmap, count, 0)
    x1, x2 = a.respond(r1, spec).text, a.respond(r2, spec).text
    assert b.respond(r2, spec).text == x2 and b.respond(r1, spec).text == x1
    assert np.any([SimulatedLLM(fmap, count, s).respond(r1, spec).text != x1 for s in range(1, 4)])


def test_a_fact_the_user_typed_stays_the_users_inside_a_later_summary():
    """The goal typed by the user, then (next compaction) only restated by the first summary: the
    second draw still counts it as the user's (peers.md: the summary restates the user's requests and
    messages), not as one mention in a message nobody typed. By hand: first input, the goal typed (4
    tokens) then 4 tokens after it: Features(goal, 1, 0, True, 4/8); second input, the summary (origin
    summary, 8 tokens) holds it, 4 tokens after: Features(goal, 1, 0, True, 4/12)."""
    from ctxsim.harness.llm import survival as sv

    goal = FactEvent(t=0, id="g", category="goal", text="GOAL_ABC")
    llm = SimulatedLLM({"g": goal}, count, 0)
    first = llm.survival([Message.user("GOAL_ABC 12345"), Message("assistant", (Block.text_block("ok, on it now"),))])
    m = sv.default_model()
    assert first["g"] == pytest.approx(m.p(sv.Features("goal", 1, 0, True, 4 / 8)))
    summary = Message("user", (Block.text_block("<summary>GOAL_ABC was asked 1234"),),
                      {"origin": "summary"})
    second = llm.survival([summary, Message("assistant", (Block.text_block("ok, on it now"),))])
    assert second["g"] == pytest.approx(m.p(sv.Features("goal", 1, 0, True, 4 / 12)))
    fresh = SimulatedLLM({"g": goal}, count, 0).survival([summary, Message("assistant", (Block.text_block("ok, on it now"),))])
    assert fresh["g"] == pytest.approx(m.p(sv.Features("goal", 1, 0, False, 4 / 12)))   # never seen typed
    assert second["g"] > fresh["g"]

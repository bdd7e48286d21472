"""A summary that restates the user's goal in its own words keeps it (harness/retention/gist.py)."""

import numpy as np
import pytest
from ctxsim.harness.model.conversation import Block, History, Message, Request, SystemPrompt, ToolSet
from ctxsim.harness.model.trace import FactEvent, ProbeEvent
from ctxsim.harness.retention.gist import content_words, identifiers, recall, restates
from ctxsim.harness.retention.scoring import RetentionModel, RetentionParams, attention

# shaped like the codemie 624a4a58 log: the user's first line, and its real summary's restatement
GOAL = FactEvent(t=0, id="g", category="goal", text="@docs/SYNC-PLAN.md review old and current implementation for "
                 "metrics. make sure that sync logic will track all changes and conversation sync is tracked properly")
PARAPHRASE = ("<summary>\nPrimary Request and Intent:\n- Review the current metrics implementation and the old one\n"
              "- Verify that conversation sync logic tracks changes properly\n\nFiles: docs/SYNC-PLAN.md\n</summary>")
CONSTRAINT = FactEvent(t=0, id="c", category="constraint", text="Don't touch the tests in tests/test_a.py: they are "
                       "the specification; fix src/a.py instead.")


def test_content_words_stem_and_split_names():
    assert content_words("Tracked tracking tracks") == {"track"}
    # stop words and words under 4 characters are not content; a path counts whole and by its parts
    assert content_words("make sure the API is in docs/SYNC-PLAN.md") == {"docs/sync-plan.md", "docs", "sync", "plan"}
    assert identifiers(GOAL.text) == {"docs/sync-plan.md"}
    assert identifiers("Work on bead spotter-4te now") == {"spotter-4te"}


def test_recall_is_the_share_of_the_facts_content_words():
    # GOAL's content words: docs/sync-plan.md, docs, sync, plan, review, current, implementation (stem
    # "implement"), metric, logic, track, chang, conversation, proper -> 13; the paraphrase holds all
    words = content_words(GOAL.text)
    assert len(words) == 13
    assert recall(GOAL.text, content_words(PARAPHRASE)) == 1.0
    # a summary that lost the request keeps "sync", "track" and "chang" of it: 3/13
    other = "<summary>\nThe sync job now tracks its changes in a queue.\n</summary>"
    assert recall(GOAL.text, content_words(other)) == pytest.approx(3 / 13)
    # fewer than 4 content words: too short to recognise in other words
    assert recall("Implement spotter-gqc", content_words("implement spotter-gqc")) == 0.0


def test_restates_needs_the_names_the_fact_gives():
    assert restates(GOAL.text, PARAPHRASE, content_words(PARAPHRASE), 0.8)
    no_name = PARAPHRASE.replace("docs/SYNC-PLAN.md", "the plan")
    # recall 11/13 = 0.85 ("docs/sync-plan.md" and "docs" gone, "plan" still there) passes 0.8,
    # but the path the user named is gone: not the same task
    assert recall(GOAL.text, content_words(no_name)) == pytest.approx(11 / 13)
    assert not restates(GOAL.text, no_name, content_words(no_name), 0.8)


def _req(*msgs):
    return Request(SystemPrompt(()), ToolSet(), History(list(msgs)), ())


def test_a_summary_that_paraphrases_the_goal_keeps_it_and_a_verbatim_search_alone_would_not():
    summ = Message("user", (Block.text_block(PARAPHRASE),), {"origin": "summary"})
    facts = {GOAL.id: GOAL, CONSTRAINT.id: CONSTRAINT}
    model = RetentionModel(facts, RetentionParams(summary_fidelity=0.8), np.random.default_rng(0))
    before = lambda i: [0, 1000][i]  # noqa: E731  the summary spans tokens 0-1,000 of 2,000
    [s] = model.score(ProbeEvent(t=0, id="p", needs=["g"]), _req(summ, Message.user("go on")), before, 2000)
    # scored at the middle of the summary: 0.8 x attention(500 / 2000)
    assert s.where == "summary" and s.score == pytest.approx(0.8 * attention(0.25, 2000), abs=1e-6)
    off = RetentionModel(facts, RetentionParams(gist_recall=1.01), np.random.default_rng(0))
    [s_off] = off.score(ProbeEvent(t=0, id="p", needs=["g"]), _req(summ, Message.user("go on")), before, 2000)
    assert s_off.where == "lost"
    # not in a summary: a user message with the same words is not a restatement (verbatim only there)
    plain = Message.user(PARAPHRASE.replace("<summary>", "notes:"))
    [s_plain] = model.score(ProbeEvent(t=0, id="p", needs=["g"]), _req(plain), before, 2000)
    assert s_plain.where == "lost"


def test_constraints_are_matched_verbatim_only():
    """The synthetic sessions' constraints share their wording and differ in the paths they name: a
    summary holding another constraint and naming these paths elsewhere is not a restatement."""
    text = ("<summary>\n- Don't touch the tests in tests/test_b.py: they are the specification; fix src/b.py instead.\n"
            "- Ran `cat src/a.py`\n- Ran `pytest tests/test_a.py`\n</summary>")
    assert restates(CONSTRAINT.text, text, content_words(text), 0.8)   # what the words alone say
    summ = Message("user", (Block.text_block(text),), {"origin": "summary"})
    model = RetentionModel({CONSTRAINT.id: CONSTRAINT}, RetentionParams(), np.random.default_rng(0))
    [s] = model.score(ProbeEvent(t=0, id="p", needs=["c"]), _req(summ), lambda i: 0, 1000)
    assert s.where == "lost"

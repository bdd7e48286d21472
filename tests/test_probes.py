"""Facts and probes derived from a session's content (harness/retention/probes.py): the extraction rules on
hand-made snippets, the derivation on a hand-built trace, determinism, and the bundled real sessions."""

from pathlib import Path

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.retention import probes

from tests.helpers_traces import Builder

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "real" / "claude-code"


def kinds(text: str) -> dict[str, str]:
    return {it.text: it.kind for it in probes.extract(text)}


# --- extraction on snippets ---------------------------------------------------------------------------

def test_paths_are_rooted_or_have_an_extension_or_three_segments():
    got = kinds("see /home/u/proj/app.py, lib/a/b.ex:12: and src/util.ts; ~/x/y and ./run/me, "
                "docs/guide/setup then https://hex.pm/packages/ash?x=1.")
    assert got == {"/home/u/proj/app.py": "path", "lib/a/b.ex": "path", "src/util.ts": "path", "~/x/y": "path",
                   "./run/me": "path", "docs/guide/setup": "path", "https://hex.pm/packages/ash?x=1": "path"}


def test_not_paths_mime_types_pairs_arities_dates_ratios():
    got = kinds("application/json before/after start/2 2024/01/02 3/4")
    assert "application/json" not in got and "before/after" not in got and "2024/01/02" not in got
    assert "start/2" not in got and "3/4" not in got
    assert got == {}  # `start` alone is a plain word, not a distinctive name


def test_identifiers_need_an_underscore_a_hump_or_a_qualifier():
    got = kinds("call flush_ledger() on LedgerStore via getUserName, Spotter.Repo.insert! and Foo::Bar; "
                "MAX_RETRIES but not self, None, Hello, OK, HTTP or x.y")
    assert got == {"flush_ledger": "identifier", "LedgerStore": "identifier", "getUserName": "identifier",
                   "Spotter.Repo.insert!": "identifier", "Foo::Bar": "identifier", "MAX_RETRIES": "identifier"}


def test_common_words_are_not_needs():
    """Issue 43: a name the tokenizer's vocabulary holds as one token is a word the model knows, not
    something only the session gave it (cl100k: ' GitHub', ' TypeScript', ' useState', ' className' are
    one token each; ' flush_ledger' is three, ' LedgerStore' two)."""
    text = "push to GitHub in TypeScript with useState and className, then flush_ledger in LedgerStore"
    assert kinds(text) == {"flush_ledger": "identifier", "LedgerStore": "identifier"}
    assert probes.common_word("GitHub") and probes.common_word("useState") and not probes.common_word("flush_ledger")
    every = {it.text for it in probes.extract(text, probes.DeriveParams(common_words=False))}
    assert every == {"GitHub", "TypeScript", "useState", "className", "flush_ledger", "LedgerStore"}
    # a first request of one common word is not a goal to recall; a real request is
    assert probes.goal_text("continue") is None and probes.goal_text("continue.") is None
    assert probes.goal_text("fix the flaky login test") == "fix the flaky login test"


def test_hashes_have_letters_and_digits_and_uuids_are_hashes():
    got = kinds("commit 67dc57b and 3fa9c2e1d0 but not 1234567 or deadbeef; id 5a430368-9e91-4564-be20-989803bf4da2")
    assert got == {"67dc57b": "hash", "3fa9c2e1d0": "hash", "5a430368-9e91-4564-be20-989803bf4da2": "hash"}


def test_tickets_carry_a_number():
    got = kinds("fix ABC-123, bead spotter-4te and spotter-4te.3 under spotter-gqc.1, issue #1234; "
                "not pre-commit, utf-8, #1, color: #888; or border:#555")
    assert got == {"ABC-123": "ticket", "spotter-4te": "ticket", "spotter-4te.3": "ticket", "spotter-gqc.1": "ticket",
                   "#1234": "ticket"}


def test_a_path_masks_the_names_inside_it():
    assert kinds("open lib/my_app/session_store.ex") == {"lib/my_app/session_store.ex": "path"}


def test_path_forms_keep_two_segments():
    assert probes.path_forms("/repo/lib/a/b.ex") == ["/repo/lib/a/b.ex", "repo/lib/a/b.ex", "lib/a/b.ex", "a/b.ex"]
    assert probes.path_forms("https://x.org/a/b") == ["https://x.org/a/b"]


def test_error_messages_follow_an_error_keyword_and_a_colon():
    text = ("Traceback (most recent call last):\n"
            "KeyError: chunk 3fa9c2 was rejected by the store\n"
            "error: undefined function get/2 (expected Foo to define it)\n"
            "    throw new Error(`Failed to sync: ${response.message}`);\n"
            "FAILED tests/test_a.py::test_x - assert 3 == 4 in the totals\n"
            "Error: no\n")
    assert probes.error_messages(text) == ["chunk 3fa9c2 was rejected by the store",
                                           "undefined function get/2 (expected Foo to define it)",
                                           "assert 3 == 4 in the totals"]


def test_command_is_the_first_line_of_a_shell_input():
    tu = tr.ToolUseContent(id="a", name="Bash", input={"command": "bd show spotter-4te\necho done"})
    assert probes.command_of(tu) == "bd show spotter-4te"
    tu = tr.ToolUseContent(id="b", name="shell", input={"command": ["bash", "-lc", "pytest -x tests"]})
    assert probes.command_of(tu) == "pytest -x tests"
    assert probes.command_of(tr.ToolUseContent(id="c", name="Read", input={"file_path": "/a/b"})) is None
    assert probes.command_of(tr.ToolUseContent(id="d", name="Bash", input={"command": 'echo "hi there"'})) is None


def test_requests_are_what_the_user_typed():
    def u(text, **meta):
        return tr.UserEvent(t=0, text=text, meta=meta)

    assert probes.is_request(u("Implement spotter-gqc"))
    assert not probes.is_request(u("<command-name>/clear</command-name>"))
    assert not probes.is_request(u("<system-reminder>\nhook output\n</system-reminder>"))
    assert not probes.is_request(u("[Request interrupted by user]"))
    assert not probes.is_request(u("Caveat: The messages below were generated by the user"))
    assert not probes.is_request(u("anything", meta_record=True))
    assert probes.goal_text("  \nFix the uploader now.\nDetails follow") == "Fix the uploader now."
    assert probes.goal_text("word " * 100, probes.DeriveParams(goal_chars=20)) == "word word word word"


# --- derivation on a hand-built session ---------------------------------------------------------------

def session() -> tr.Trace:
    b = Builder()
    b.user("Please fix the totals in src/billing/ledger.py (ticket BIL-42).")
    b.call("Reading it.", ["   1\tdef compute_total(rows):\n   2\t    return sum_rows(rows)\n"], tool="Read",
           inputs=[{"file_path": "/work/src/billing/ledger.py"}])
    b.call("I add new_helper_fn.", ["ok"], tool="Edit",
           inputs=[{"file_path": "/work/src/billing/ledger.py", "old_string": "sum_rows(rows)",
                    "new_string": "new_helper_fn(rows)"}])
    b.call("Run the tests.", ["FAILED t.py - KeyError: row 17 has no amount field at all"],
           inputs=[{"command": "pytest -q"}])
    b.user("also keep compute_total's signature")
    b.call("So row 17 has no amount field at all; new_helper_fn must skip it.", ["ok"],
           inputs=[{"command": "pytest -q"}])
    b.call("Done: BIL-42 fixed.")
    return b.build()


def test_derive_places_facts_where_items_entered_and_probes_where_they_are_used():
    out, d = probes.apply(session())
    ev = out.events
    facts = {e.id: e for e in ev if isinstance(e, tr.FactEvent)}
    by_text = {f.text: f for f in facts.values()}
    assert by_text["Please fix the totals in src/billing/ledger.py (ticket BIL-42)."].category == "goal"
    assert by_text["src/billing/ledger.py"].category == "path"   # entered with the user's message
    assert by_text["sum_rows"].category == "identifier"          # entered with the Read result
    assert by_text["row 17 has no amount field at all"].category == "error"
    assert by_text["BIL-42"].category == "ticket"
    assert "new_helper_fn" not in by_text                        # the agent's own name
    assert "compute_total" not in by_text                        # no call uses it
    assert "pytest -q" not in by_text                            # the agent's own command
    # every fact sits right after the content event holding its text (the loader's rule)
    for i, e in enumerate(ev):
        if isinstance(e, tr.FactEvent):
            prev = next(x for x in reversed(ev[:i]) if isinstance(x, tr.CONTENT_EVENTS))
            assert e.text in probes.seen_text(prev)
    # one probe per (call, fact needed); grouped here by the call they precede
    needs, group = [], []
    for e in ev:
        if isinstance(e, tr.ProbeEvent):
            assert len(e.needs) == 1
            group.append(facts[e.needs[0]].text)
        elif isinstance(e, tr.AssistantEvent) and group:
            needs.append(group)
            group = []
    assert needs == [
        ["src/billing/ledger.py"],                                # call 1 reads the path the user gave
        ["src/billing/ledger.py", "sum_rows"],                    # call 2 edits it and replaces sum_rows
        # call 4 comes after a new user message (the goal) and quotes the error; earliest entered first
        ["Please fix the totals in src/billing/ledger.py (ticket BIL-42).", "row 17 has no amount field at all"],
        ["Please fix the totals in src/billing/ledger.py (ticket BIL-42).", "BIL-42"],  # the last call
    ]
    assert (d.facts, d.probes, d.calls) == (5, 7, 4)
    assert d.by_kind == {"goal": 1, "path": 1, "identifier": 1, "error": 1, "ticket": 1}
    assert any(n.startswith(probes.DERIVED_NOTE) for n in out.header.notes)


def test_derive_is_deterministic_and_idempotent(tmp_path):
    once, _ = probes.apply(session())
    twice, _ = probes.apply(once)
    assert tr.dumps(once) == tr.dumps(twice)
    p = tmp_path / "t.jsonl"
    tr.write(once, p)
    assert tr.load(p).content_hash == once.content_hash


def test_planted_facts_are_kept():
    b = Builder()
    b.user("Goal: ship the uploader, ticket ORB-7 please")
    b.event(tr.FactEvent(t=b.t, id="f1", category="goal", text="ship the uploader"))
    b.call("ok", ["ok"], inputs=[{"command": "make ship"}])
    b.event(tr.ProbeEvent(t=b.t, id="p1", needs=["f1"]))
    b.call("ORB-7 done")
    out, _ = probes.apply(b.build())
    assert "f1" in out.facts() and any(isinstance(e, tr.ProbeEvent) and e.id == "p1" for e in out.events)


def test_items_in_the_system_prompt_are_never_facts():
    b = Builder(system="You work on src/core/engine.py.")
    b.user("look at src/core/engine.py and tell me")
    b.call("Reading src/core/engine.py.")
    _, d = probes.apply(b.build())
    assert d.by_kind == {"goal": 1}


def test_isolated_subagent_spans_are_their_own_context():
    b = Builder()
    b.user("Find where flush_queue lives")
    b.event(tr.SubtaskStart(t=b.t, id="s1", description="explore", isolated=True))
    b.user("explore: where is flush_queue")
    b.call("Searching for flush_queue in lib/queue/core.ex", ["lib/queue/core.ex: def flush_queue"])
    b.event(tr.SubtaskEnd(t=b.t, id="s1", conclusion="in lib/queue/core.ex"))
    b.call("It is lib/queue/core.ex")
    out, _ = probes.apply(b.build())
    facts = out.facts()
    needed = [facts[n].text for e in out.events if isinstance(e, tr.ProbeEvent) for n in e.needs]
    # the sub-agent's call is not probed; the main context never received the path (no Task result)
    assert needed == ["Find where flush_queue lives"]


def test_a_fact_between_two_results_of_one_call_keeps_them_one_message():
    b = Builder()
    b.user("check both")
    b.call("Reading.", ["first: lib/a/one.ex", "second"], inputs=[{"command": "cat a"}, {"command": "cat b"}])
    b.call("Now lib/a/one.ex.")
    out, _ = probes.apply(b.build())
    assert [e.type for e in out.events] == ["user", "fact", "assistant", "tool_result", "fact", "tool_result",
                                            "probe", "probe", "assistant"]
    res = replay(out, "append_only", {}, RunConfig())
    assert res.metrics["retention"]["probes"] == 2 and res.metrics["retention"]["facts_scored"] == 2
    seen = []
    replay(out, "append_only", {}, RunConfig(observer=lambda req, info: seen.append(len(req.messages))))
    assert seen == [1, 3]  # user; user, assistant, one user message with both results


def test_distances_count_tokens_and_calls_back():
    out, _ = probes.apply(session())

    def count(text):  # one token per word: easy to work out by hand
        return len(text.split())

    rows = {(r["probe"], out.facts()[r["fact"]].text): r for r in probes.distances(out, count)}
    r = rows[("dp00003", "sum_rows")]  # entered with call 1's result, used at call 2, nothing in between
    assert (r["first_tokens"], r["first_calls"], r["last_tokens"], r["last_calls"]) == (0, 0, 0, 0)
    r = rows[("dp00002", "src/billing/ledger.py")]
    # entered with the user's message; between it and call 2: call 1 (2 words of text + the path),
    # its result (6 words: "1", "def", "compute_total(rows):", "2", "return", "sum_rows(rows)")
    assert (r["first_tokens"], r["first_calls"]) == (3 + 6, 1)
    assert (r["last_tokens"], r["last_calls"]) == (6, 0)  # last seen in call 1's tool input


# --- the bundled real sessions -----------------------------------------------------------------------

LONG = ["spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl", "spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
        "codemie/session-624a4a58.jsonl", "codemie/session-196820da.jsonl"]


@pytest.fixture(scope="module")
def imported():
    if not REAL.exists():
        pytest.skip("real logs not present")
    from ctxsim.harness.importers import import_file

    return {name: probes.apply(import_file("claude-code", REAL / name).trace)[0] for name in LONG}


@pytest.mark.parametrize("name", LONG)
def test_each_long_real_session_gets_at_least_50_probes(imported, name):
    t = imported[name]
    n = sum(1 for e in t.events if isinstance(e, tr.ProbeEvent))
    assert n >= 50, (name, n)
    assert sum(1 for f in t.facts().values() if f.category == "goal") == 1


def test_cut_no_summary_keeps_less_than_novacode_where_the_session_compacts(imported):
    """258c7280 crosses the 200k trigger once: cut_no_summary drops the head with no summary."""
    t = imported[LONG[0]]
    cfg = RunConfig(window=200_000)
    cut = replay(t, "cut_no_summary", {}, cfg).metrics["retention"]
    nova = replay(t, "novacode", {}, cfg).metrics["retention"]
    assert cut["probes"] >= 50 and nova["probes"] >= 50
    assert cut["score"] < nova["score"]
    assert cut["goal"] < nova["goal"]


def test_a_request_typed_after_the_last_call_is_needed_by_no_call():
    """A log that begins mid-task (no request before its calls) and ends on the user's message: that
    message is the session's goal, but no call comes after it. The end-of-session probe went before
    the last call and needed a fact that entered after it: the trace failed its own check (seen on a
    real outside session). No call needs it; the derived trace loads."""
    b = Builder()
    b.call("Checking the build.", ["make: ok"], inputs=[{"command": "make"}])
    b.call("The build passes.")
    b.user("I will finish the release notes myself.")
    out, d = probes.apply(b.build())
    assert [e.category for e in out.events if isinstance(e, tr.FactEvent)] == ["goal"]
    assert not [e for e in out.events if isinstance(e, tr.ProbeEvent)] and d.probes == 0
    tr.validate_events(out.header, out.events)   # the loader's rule: a probe needs only facts that entered before it

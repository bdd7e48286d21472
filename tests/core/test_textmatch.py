"""ctxsim.harness.model.textmatch: one pass over a text finds exactly the needles `in` would."""

from ctxsim.harness.model.textmatch import Matcher, matcher
from hypothesis import given
from hypothesis import strategies as st

_ALPHABET = "ab(.*\\\n\ud800é"  # few letters (needles overlap and nest), regex metacharacters, a lone surrogate


def brute(needles, text):
    return frozenset(k for k, s in needles.items() if s in text)


@given(st.dictionaries(st.text(alphabet="pqrstu", min_size=1, max_size=3), st.text(alphabet=_ALPHABET, max_size=6),
                       max_size=12),
       st.text(alphabet=_ALPHABET, max_size=60))
def test_present_is_exactly_the_needles_in_the_text(needles, text):
    assert Matcher(needles).present(text) == brute(needles, text)


def test_nested_overlapping_and_repeated_needles():
    needles = {"ab": "ab", "abc": "abc", "bcd": "bcd", "c": "c", "dup": "abc", "none": "zz", "empty": ""}
    m = Matcher(needles)
    assert m.present("xabcdx") == {"ab", "abc", "bcd", "c", "dup", "empty"}
    assert m.present("abab") == {"ab", "empty"}
    assert m.present("") == {"empty"}
    assert Matcher({}).present("anything") == frozenset()


def test_a_long_needle_compiles():
    # one needle of 5,000 characters: no recursion per character
    long = "x" * 2500 + "y" * 2500
    assert Matcher({"l": long, "s": "xy"}).present("a" + long) == {"l", "s"}


def test_matchers_are_shared_for_the_same_needles():
    assert matcher({"a": "x", "b": "y"}) is matcher({"b": "y", "a": "x"})


@given(st.dictionaries(st.text(alphabet="pq", min_size=1, max_size=2), st.text(alphabet="ab\n", max_size=4), max_size=6),
       st.lists(st.text(alphabet="ab\n", max_size=8), max_size=4))
def test_a_message_holds_what_its_text_holds(needles, texts):
    from ctxsim.harness.model.conversation import Block, Message

    m = Message("user", tuple(Block.text_block(t) for t in texts))
    matcher_ = Matcher(needles)
    assert matcher_.in_message(m) == brute(needles, m.text)
    assert matcher_.in_message(m) == brute(needles, m.text)  # cached on the blocks: the same again


def test_a_generated_session_matches_in_on_every_block():
    """pyahocorasick replaced a trie-shaped regex here; on a whole generated session (its planted
    facts as needles, every block as a text) the answer is still exactly what `in` gives."""
    from ctxsim.harness.model.trace import ToolResultEvent, UserEvent
    from ctxsim.harness.synth.config import load_preset
    from ctxsim.harness.synth.generator import generate

    t = generate(load_preset("short"), 3)
    needles = {k: f.text for k, f in t.facts().items()}
    m = Matcher(needles)
    texts = [e.text if isinstance(e, UserEvent) else e.content for e in t.events
             if isinstance(e, UserEvent | ToolResultEvent)]
    assert len(needles) > 5 and len(texts) > 20
    assert [m.present(x) for x in texts] == [brute(needles, x) for x in texts]
    assert any(m.present(x) for x in texts)




@given(st.lists(st.lists(st.text(alphabet="ab\n", max_size=7), min_size=1, max_size=3), max_size=8),
       st.text(alphabet="ab\n", max_size=9), st.integers(0, 8), st.integers(0, 8), st.data())
def test_a_history_contains_what_its_joined_text_contains(msgs, needle, cut, first, data):
    """``History.text_contains`` answers ``needle in "\\n".join(texts)`` exactly: occurrences inside
    one message, across the line breaks between messages, over messages shorter than the needle;
    on every version of a shared store, asked in any order (a request extending another, a
    truncation, a fork)."""
    from ctxsim.harness.model.conversation import Block, History, Message

    messages = [Message("user", tuple(Block.text_block(t) for t in texts)) for texts in msgs]
    h = History(messages)

    def joined(ms):
        return needle in "\n".join(m.text for m in ms)

    cut, first = min(cut, len(messages)), min(first, len(messages))
    assert h.truncate(first).text_contains(needle) == joined(messages[:first])   # the memo starts here
    assert h.truncate(cut).text_contains(needle) == joined(messages[:cut])
    assert h.text_contains(needle) == joined(messages)
    assert h.truncate(cut).text_contains(needle) == joined(messages[:cut])       # and is read back
    extra = [Message.user(t) for t in data.draw(st.lists(st.text(alphabet="ab\n", max_size=7), max_size=3))]
    fork = h.truncate(cut).extend(extra)   # a rewrite from ``cut`` on shares the prefix
    assert fork.text_contains(needle) == joined([*messages[:cut], *extra])


def test_a_needle_across_short_messages_by_hand():
    from ctxsim.harness.model.conversation import History, Message

    h = History([Message.user("xa"), Message.user("b"), Message.user(""), Message.user("c")])
    # joined: "xa\nb\n\nc"
    assert h.text_contains("a\nb\n\nc")
    assert h.text_contains("b\n\n")
    assert not h.text_contains("ab")
    assert h.truncate(2).text_contains("a\nb") and not h.truncate(1).text_contains("a\nb")
    assert not History().text_contains("a") and History().text_contains("")
    # a one-character needle: the line break between two messages is in the joined text
    assert h.text_contains("\n") and not h.truncate(1).text_contains("\n")

"""Session transcripts on a real temporary directory (N-TRANS-1…6)."""

from __future__ import annotations

import json

import pytest
from ctxsim.harness.model.conversation import Block, Message
from ctxsim.strategies.novacode.transcript import (
    META_FILE,
    SYNTHETIC_RESULT_TEXT,
    TRANSCRIPT_FILE,
    Transcript,
    TranscriptError,
    read_records,
    repair_pairing,
)
from hypothesis import given, settings
from hypothesis import strategies as st


class Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def call(ids: list[str], text: str = "") -> Message:
    blocks = ([Block.text_block(text)] if text else []) + [Block.tool_use(i, "Read", {"path": f"/x/{i}"}) for i in ids]
    return Message("assistant", tuple(blocks))


def results(ids: list[str]) -> Message:
    return Message("user", tuple(Block.tool_result(i, f"content of {i}") for i in ids))


def test_n_trans_1_directory_per_launch_jsonl_and_separate_meta(tmp_path):
    """N-TRANS-1: <root>/<session>/transcript.jsonl, one line per record, meta.json beside it."""
    tr = Transcript(tmp_path, "s1", Clock())
    tr.append(Message.user("hello"))
    tr.append(Message("assistant", (Block.text_block("hi"),)))
    assert tr.path == tmp_path / "s1" / TRANSCRIPT_FILE
    lines = tr.path.read_text().splitlines()
    assert len(lines) == 2  # two messages, two appended records
    assert [json.loads(x)["role"] for x in lines] == ["user", "assistant"]
    tr.close()
    meta = json.loads((tmp_path / "s1" / META_FILE).read_text())
    assert meta["session_id"] == "s1" and meta["records"] == 2 and meta["messages"] == 2
    assert "content" not in meta  # metadata only, no conversation in it
    Transcript(tmp_path, "s2", Clock())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s1", "s2"]


def test_n_trans_2_records_inline_tool_calls_provider_independent(tmp_path):
    """N-TRANS-2: tool calls and results are inlined as tool_call/tool_result (no API wire names)."""
    tr = Transcript(tmp_path, "s", Clock())
    tr.append(call(["a"], "reading"))
    tr.append(Message("user", (Block.tool_result("a", "x = 1", is_error=True),)))
    recs = tr.records()
    assert recs[0]["content"][1] == {"type": "tool_call", "id": "a", "name": "Read", "input": {"path": "/x/a"}}
    assert recs[1]["content"][0] == {"type": "tool_result", "id": "a", "content": "x = 1", "is_error": True}
    assert "tool_use" not in tr.path.read_text()
    _, msgs = Transcript.resume(tmp_path, "s", Clock())
    assert [b.type for b in msgs[0].blocks] == ["text", "tool_use"]
    assert msgs[1].blocks[0].is_error and msgs[1].blocks[0].text == "x = 1"


def test_n_trans_3_thinking_not_persisted(tmp_path):
    """N-TRANS-3: thinking blocks are dropped; a thinking-only message writes no record."""
    tr = Transcript(tmp_path, "s", Clock())
    tr.append(Message("assistant", (Block("thinking", "secret plan"), Block.text_block("done"))))
    tr.append(Message("assistant", (Block("thinking", "only thoughts"),)))
    text = tr.path.read_text()
    assert "secret plan" not in text and "only thoughts" not in text
    assert len(text.splitlines()) == 1
    tr.close()
    assert json.loads(tr.meta_path.read_text())["thinking_dropped"] == 2


def test_n_trans_4_resume_replays_only_after_last_boundary(tmp_path):
    """N-TRANS-4: resume = last boundary's summary + the records after it; the prefix stays on disk."""
    tr = Transcript(tmp_path, "s", Clock())
    tr.append(Message.user("old 1"))
    tr.append(Message("assistant", (Block.text_block("old 2"),)))
    tr.compact_boundary(150_000, "SUMMARY ONE")
    tr.append(Message.user("mid"))
    tr.compact_boundary(160_000, "SUMMARY TWO", tail=[Message.user("kept tail")])
    tr.append(Message("assistant", (Block.text_block("new"),)))
    _, msgs = Transcript.resume(tmp_path, "s", Clock())
    assert [m.text for m in msgs] == ["SUMMARY TWO", "kept tail", "new"]
    assert msgs[0].meta["origin"] == "summary"
    raw = tr.path.read_text()
    assert "old 1" in raw and "SUMMARY ONE" in raw  # audit trail kept
    bounds = [r for r in read_records(tr.path) if r["type"] == "compact_boundary"]
    assert [b["pre_tokens"] for b in bounds] == [150_000, 160_000]


def test_n_trans_5_resume_after_crash_mid_tool_call(tmp_path):
    """N-TRANS-5: the session died after the model called two tools and one result was written,
    while the next record was half written. Resume completes the missing result before any request."""
    tr = Transcript(tmp_path, "s", Clock())
    tr.append(Message.user("fix the bug"))
    tr.append(call(["t1", "t2"]))
    tr.append(results(["t1"]))
    with tr.path.open("a") as fh:
        fh.write('{"type":"message","t":9,"role":"user","content":[{"type":"tool_res')  # torn line
    tr2, msgs = Transcript.resume(tmp_path, "s", Clock())
    assert [m.role for m in msgs] == ["user", "assistant", "user"]
    last = msgs[-1]
    assert last.tool_result_ids() == ["t1", "t2"]
    assert last.blocks[1].text == SYNTHETIC_RESULT_TEXT and last.blocks[1].is_error
    # the torn record was cut off (its 66 bytes counted), so appending again stays readable
    assert json.loads(tr2.meta_path.read_text())["torn_bytes_discarded"] == 66
    tr2.append(Message.user("continue"))
    assert [r["type"] for r in tr2.records()] == ["message"] * 4  # 3 old + the new one
    # the repair merged into the recorded result message is redone, identically, by each resume
    _, again = Transcript.resume(tmp_path, "s", Clock())
    assert again[2].tool_result_ids() == ["t1", "t2"] and again[3].text == "continue"


def test_n_trans_5_dangling_call_last_is_recorded(tmp_path):
    """N-TRANS-5: a crash right after the tool call: the synthetic result is appended to the file,
    so the next resume finds a paired history without repairing again."""
    tr = Transcript(tmp_path, "s", Clock())
    tr.append(Message.user("go"))
    tr.append(call(["t9"]))
    tr2, msgs = Transcript.resume(tmp_path, "s", Clock())
    assert msgs[-1].tool_result_ids() == ["t9"]
    recs = tr2.records()
    assert recs[-1]["content"][0]["id"] == "t9"
    _, again = Transcript.resume(tmp_path, "s", Clock())
    assert [m.text for m in again] == [m.text for m in msgs]
    meta = json.loads(tr2.meta_path.read_text())
    assert meta["repairs"][0]["synthetic_results"] == 1 and meta["repairs"][1]["synthetic_results"] == 0


def test_n_trans_5_orphan_result_after_boundary_dropped(tmp_path):
    """N-TRANS-5: a tool_result whose call was before the boundary would be a 400: it is dropped."""
    tr = Transcript(tmp_path, "s", Clock())
    tr.append(call(["a"]))
    tr.compact_boundary(None, "S")
    tr.append(Message("user", (Block.tool_result("a", "late"), Block.text_block("and then?"))))
    _, msgs = Transcript.resume(tmp_path, "s", Clock())
    assert [m.text for m in msgs] == ["S", "and then?"]


def test_n_trans_1_resume_into_new_session_dir(tmp_path):
    """N-TRANS-1: a resumed launch may get its own directory, seeded with the replayed messages."""
    tr = Transcript(tmp_path, "s1", Clock())
    tr.append(Message.user("a"))
    tr2, msgs = Transcript.resume(tmp_path, "s1", Clock(), new_session_id="s2")
    assert tr2.path == tmp_path / "s2" / TRANSCRIPT_FILE
    assert [r["content"][0]["text"] for r in tr2.records()] == ["a"]
    assert json.loads(tr2.meta_path.read_text())["resumed_from"] == "s1"


def test_resume_missing_session_is_a_clear_error(tmp_path):
    with pytest.raises(TranscriptError, match="no transcript for session 'nope'"):
        Transcript.resume(tmp_path, "nope", Clock())


def test_bad_line_in_the_middle_is_an_error_naming_it(tmp_path):
    tr = Transcript(tmp_path, "s", Clock())
    tr.append(Message.user("a"))
    with tr.path.open("a") as fh:
        fh.write("garbage\n")
    tr.append(Message.user("b"))
    with pytest.raises(TranscriptError, match=r"transcript.jsonl:2: bad record"):
        tr.records()


def test_bad_session_id_rejected(tmp_path):
    with pytest.raises(ValueError, match="bad session id"):
        Transcript(tmp_path, "../x", Clock())


@st.composite
def conversations(draw):
    """Random histories with missing and orphan results (what a crash and a boundary can leave)."""
    msgs: list[Message] = []
    n = draw(st.integers(1, 8))
    k = 0
    for _ in range(n):
        ids = [f"t{k + j}" for j in range(draw(st.integers(0, 3)))]
        k += len(ids)
        msgs.append(call(ids, "x"))
        answered = [i for i in ids if draw(st.booleans())]
        orphans = [f"o{k}"] if draw(st.booleans()) else []
        blocks = [Block.tool_result(i, "r") for i in answered + orphans]
        if draw(st.booleans()):
            blocks.append(Block.text_block("user text"))
        if blocks and draw(st.booleans()):
            msgs.append(Message("user", tuple(blocks)))
    return msgs


@settings(max_examples=150, deadline=None)
@given(conversations())
def test_n_trans_5_repair_always_pairs(msgs):
    """N-TRANS-5 property: after repair every tool_use is answered in the very next user message,
    and every tool_result answers a tool_use of the assistant message right before it."""
    fixed, added, dropped = repair_pairing(msgs)
    for i, m in enumerate(fixed):
        if m.role == "assistant" and m.tool_use_ids():
            assert i + 1 < len(fixed) and fixed[i + 1].role == "user"
            assert set(m.tool_use_ids()) <= set(fixed[i + 1].tool_result_ids())
        if m.role == "user" and m.tool_result_ids():
            assert i > 0 and fixed[i - 1].role == "assistant"
            assert set(m.tool_result_ids()) <= set(fixed[i - 1].tool_use_ids())
    uses = sum(len(m.tool_use_ids()) for m in msgs)
    answered_before = sum(len(m.tool_result_ids()) for m in msgs) - dropped
    assert added == uses - answered_before


def test_n_trans_3_n_trans_5_a_resume_inside_a_tool_loop_gets_that_answers_thinking_back(tmp_path):
    """N-TRANS-3 keeps thinking out of the records; the newest answer that called tools keeps its
    thinking beside them, so a resume that continues its tool loop (N-TRANS-5 answers its call)
    starts that turn with its thinking, unmodified, as the API requires when thinking is on."""
    tr = Transcript(tmp_path, "s", Clock())
    tr.append(Message.user("fix the bug"))
    tr.append(Message("assistant", (Block("thinking", "old plan"), *call(["t1"]).blocks)))
    tr.append(results(["t1"]))
    tr.append(Message("assistant", (Block("thinking", "read t2 next"), *call(["t2"], "reading").blocks)))
    assert "old plan" not in tr.path.read_text() and "read t2 next" not in tr.path.read_text()
    _, msgs = Transcript.resume(tmp_path, "s", Clock())  # crashed before t2's result
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert [(b.type, b.text) for b in msgs[3].blocks[:2]] == [("thinking", "read t2 next"), ("text", "reading")]
    assert msgs[1].blocks[0].type == "tool_use"  # an earlier answer's thinking is not kept
    assert msgs[4].tool_result_ids() == ["t2"]  # the synthetic result (N-TRANS-5)
    # a later answer with calls and no thinking clears it: nothing is put back
    tr2, _ = Transcript.resume(tmp_path, "s", Clock())
    tr2.append(call(["t3"]))
    _, msgs = Transcript.resume(tmp_path, "s", Clock())
    assert not any(b.type == "thinking" for m in msgs for b in m.blocks)


def test_n_trans_3_literally_no_thinking_on_disk_with_open_loop_thinking_off(tmp_path):
    """spec/novacode.md N-TRANS-3 ("thinking blocks are not persisted"): with the departure off
    (``open_loop_thinking=False``, whose description starts "not in the seed") no file holds any
    thinking, and a resume inside the tool loop gets the answer back without it."""
    from ctxsim.strategies.novacode.transcript import OPEN_LOOP_FILE

    tr = Transcript(tmp_path, "s", Clock(), open_loop_thinking=False)
    tr.append(Message.user("fix the bug"))
    tr.append(Message("assistant", (Block("thinking", "read t2 next"), *call(["t2"], "reading").blocks)))
    assert not (tmp_path / "s" / OPEN_LOOP_FILE).exists()
    assert not any("read t2 next" in p.read_text() for p in (tmp_path / "s").iterdir())
    _, msgs = Transcript.resume(tmp_path, "s", Clock(), open_loop_thinking=False)
    assert [b.type for b in msgs[1].blocks] == ["text", "tool_use"]
    # on (the default): the thinking is in open_loop_thinking.json, the departure the listing names
    tr = Transcript(tmp_path, "t", Clock())
    tr.append(Message("assistant", (Block("thinking", "read t2 next"), *call(["t2"], "reading").blocks)))
    assert "read t2 next" in (tmp_path / "t" / OPEN_LOOP_FILE).read_text()

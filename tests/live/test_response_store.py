"""The response store (harness/llm/response_store.py): stable keys, ordered answers, clear misses."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from ctxsim.harness.llm.response_store import (
    ResponseStore,
    StoreError,
    StoreMiss,
    Volatile,
    request_key,
    restore_text,
)


def params(text="Summarise.", path="/srv/project/a.py", **extra):
    return {"model": "claude-sonnet-4-6", "max_tokens": 100,
            "messages": [{"role": "user", "content": [{"type": "text", "text": f"read {path}"},
                                                      {"type": "text", "text": text}]}], **extra}


def test_key_ignores_volatile_fields_but_not_content():
    k1, _ = request_key("messages", params())
    k2, _ = request_key("messages", params(metadata={"user_id": "u-1"}, stream=False))
    k3, _ = request_key("messages", params(text="Summarise!"))
    k4, _ = request_key("count_tokens", params())
    assert k1 == k2 and len(k1) == 64
    assert k3 != k1 and k4 != k1


def test_key_is_independent_of_dict_order():
    a = params()
    b = dict(reversed(list(a.items())))
    assert request_key("messages", a)[0] == request_key("messages", b)[0]


def test_temporary_run_directories_are_volatile_and_numbered():
    tmp = Path(tempfile.gettempdir())
    a = params(path=f"{tmp}/ctxsim-run-abc123/tool-results/tu_1.txt", text=f"see {tmp}/tmpq9/t.jsonl")
    b = params(path=f"{tmp}/ctxsim-run-zzz999/tool-results/tu_1.txt", text=f"see {tmp}/tmpXY/t.jsonl")
    (ka, ma), (kb, mb) = request_key("messages", a), request_key("messages", b)
    assert ka == kb
    assert ma == {"<tmp:0>": f"{tmp}/ctxsim-run-abc123", "<tmp:1>": f"{tmp}/tmpq9"}
    assert mb["<tmp:0>"] == f"{tmp}/ctxsim-run-zzz999"


def test_explicit_volatile_paths(tmp_path):
    v = Volatile([str(tmp_path / "run1")])
    ka, _ = request_key("messages", params(path=str(tmp_path / "run1" / "x.txt")), v)
    kb, _ = request_key("messages", params(path=str(tmp_path / "run1" / "y.txt")), v)
    assert ka != kb  # only the directory is volatile, not what is under it


def test_record_then_lookup_restores_the_current_runs_paths(tmp_path):
    tmp = Path(tempfile.gettempdir())
    store = ResponseStore(tmp_path / "s.jsonl")
    live_dir, replay_dir = f"{tmp}/ctxsim-run-live01", f"{tmp}/ctxsim-run-replay02"
    live = params(path=f"{live_dir}/transcript.jsonl")
    store.append("messages", "summary", live, {"text": f"Full transcript: {live_dir}/transcript.jsonl",
                                               "stop_reason": "end_turn", "usage": {"input_tokens": 7}})
    line = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[0])
    assert line["response"]["text"] == "Full transcript: <tmp:0>/transcript.jsonl"
    assert line["v"] == 1 and line["kind"] == "summary" and line["request"]["messages"] == 1

    again = ResponseStore(tmp_path / "s.jsonl")  # reloaded from disk
    rec, mapping = again.lookup("messages", "summary", params(path=f"{replay_dir}/transcript.jsonl"))
    assert restore_text(rec.response["text"], mapping) == f"Full transcript: {replay_dir}/transcript.jsonl"


def test_repeated_request_served_in_recorded_order_last_repeating(tmp_path):
    store = ResponseStore(tmp_path / "s.jsonl")
    p = params()
    store.append("messages", "summary", p, None, {"reason": "overloaded", "status": 529, "message": "x"})
    store.append("messages", "summary", p, {"text": "second"})
    replay = ResponseStore(tmp_path / "s.jsonl")
    got = [replay.lookup("messages", "summary", p)[0] for _ in range(3)]
    assert got[0].error["reason"] == "overloaded"
    assert got[1].response["text"] == got[2].response["text"] == "second"


def test_miss_names_the_request(tmp_path):
    store = ResponseStore(tmp_path / "s.jsonl")
    store.append("messages", "summary", params(), {"text": "a"})
    with pytest.raises(StoreMiss) as e:
        store.lookup("messages", "summary", params(text="Write the handoff summary now."))
    msg = str(e.value)
    assert "kind 'summary'" in msg and "claude-sonnet-4-6" in msg and "Write the handoff" in msg
    assert str(tmp_path / "s.jsonl") in msg and "1 records" in msg


def test_bad_store_file_names_file_and_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"v": 1, "key": "k", "endpoint": "messages"}\nnot json\n')
    with pytest.raises(StoreError, match=r"bad.jsonl:2: not JSON"):
        ResponseStore(f)
    f.write_text('{"v": 2, "key": "k", "endpoint": "messages"}\n')
    with pytest.raises(StoreError, match=r"bad.jsonl:1: store version 2"):
        ResponseStore(f)


def test_engine_run_directories_are_volatile():
    """The engine's run dirs (/tmp/ctxsim-runs/run-NNNNNN) differ between runs, not the requests."""
    a = params(path="/tmp/ctxsim-runs/run-000004/transcripts/s/transcript.jsonl")
    b = params(path="/tmp/ctxsim-runs/run-000117/transcripts/s/transcript.jsonl")
    (ka, ma), (kb, _) = request_key("messages", a), request_key("messages", b)
    assert ka == kb and ma == {"<tmp:0>": "/tmp/ctxsim-runs/run-000004"}

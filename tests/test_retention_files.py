"""Retention's read of a pointer's file (issue 21: searched in the bytes, never decoded, read once
per version for every fact): the line it finds is the one the text-mode read finds."""

import json
import os

from ctxsim.harness.retention.scoring import RetentionModel
from hypothesis import given
from hypothesis import strategies as st

_PIECES = [b"a", b"b", b"ab", b"\n", b"\r", b"\r\n", b"\xc3\xa9", b"\xe2\x82", b"\xff", b'"', b"\\", "é".encode()]


def text_mode_line(path, text):
    """What retention did before: read as text (UTF-8, errors replaced, universal newlines)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        data = fh.read()
    off = data.find(text)
    if off < 0:
        off = data.find(json.dumps(text, ensure_ascii=False)[1:-1])
    return data.count("\n", 0, off) + 1 if off >= 0 else 0


@given(st.lists(st.sampled_from(_PIECES), max_size=40),
       st.text(alphabet=["a", "b", "é", '"', "\\", "\n", "\r", "\ufffd", "\ud800"], min_size=1, max_size=4))
def test_the_line_found_in_the_bytes_is_the_text_modes(tmp_path_factory, pieces, needle):
    path = tmp_path_factory.mktemp("f") / "file.txt"
    path.write_bytes(b"".join(pieces))
    model = RetentionModel({})
    st_ = os.stat(path)
    assert model._line_of(str(path), (st_.st_mtime_ns, st_.st_size), needle) == text_mode_line(path, needle)


def test_a_file_is_read_once_per_version_for_all_facts(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": "x"}\n{"b": "FACT-1"}\n{"c": "FACT-2"}\n')
    model = RetentionModel({})
    st_ = os.stat(path)
    stamp = (st_.st_mtime_ns, st_.st_size)
    assert model._line_of(str(path), stamp, "FACT-1") == 2
    path.write_text("changed on disk, same stamp given: the held bytes answer\n")
    assert model._line_of(str(path), stamp, "FACT-2") == 3
    assert model._line_of(str(path), (stamp[0] + 1, stamp[1]), "FACT-2") == 0  # a new version is read

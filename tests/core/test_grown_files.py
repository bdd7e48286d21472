"""Files read again as they grow (a session's transcript, read back for a fact, probe after probe): the
read-back's lines and the scorer's line numbers are built from the new bytes only, and are exactly what a
whole read gives, whatever happens to the file between reads (appends, a rewrite in place, a truncation,
line breaks of every kind, bytes that are not UTF-8)."""

from __future__ import annotations

from ctxsim.harness.llm import simulated
from ctxsim.harness.model import textmatch
from ctxsim.harness.replay.readback import _Lines
from ctxsim.harness.retention.scoring import RetentionModel
from hypothesis import given, settings
from hypothesis import strategies as st

PIECES = [b"a", b"bc", b"\n", b"\r", b"\r\n", "中".encode(), b"\xe4", b"\xff", "\x85".encode(), b"\x0c",
          "\u2028".encode(), b"fact-1", b"fact-2"]
EDITS = st.lists(st.tuples(st.sampled_from(["append", "rewrite", "truncate"]),
                           st.lists(st.sampled_from(PIECES), max_size=12), st.floats(0, 1)), min_size=1, max_size=25)


def _whole(path) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read().splitlines(keepends=True)


def _edit(path, op, pieces, at) -> None:
    data = b"".join(pieces)
    if op == "append" or not path.exists():
        with open(path, "ab") as fh:
            fh.write(data)
    elif op == "rewrite":
        path.write_bytes(data)
    else:
        old = path.read_bytes()
        path.write_bytes(old[:int(at * len(old))])


@settings(max_examples=60, deadline=None)
@given(edits=EDITS)
def test_a_read_back_of_a_growing_file_gives_the_lines_a_whole_read_gives(tmp_path_factory, edits):
    path = tmp_path_factory.mktemp("grow") / "transcript.jsonl"
    lines = _Lines()
    for op, pieces, at in edits:
        _edit(path, op, pieces, at)
        assert lines.of(path) == _whole(path)


@settings(max_examples=60, deadline=None)
@given(edits=EDITS)
def test_the_scorers_line_of_a_fact_in_a_growing_file_is_the_count_of_breaks_before_it(tmp_path_factory, edits):
    d = tmp_path_factory.mktemp("score")
    path = d / "transcript.jsonl"
    model = RetentionModel({}, session_dir=d)
    for op, pieces, at in edits:
        _edit(path, op, pieces, at)
        data = path.read_bytes()
        st_ = path.stat()
        # a fact is asked of some versions only: what was found in an older one is carried over the rest
        for needle in ("fact-1", "fact-2")[: 1 + (at > 0.3)]:
            got = model._line_of(str(path), (st_.st_mtime_ns, st_.st_size), needle)
            off = data.find(needle.encode())
            if off < 0:
                assert got == 0
            else:   # universal newlines: \r\n, \r and \n each end a line
                head = data[:off]
                assert got == head.count(b"\n") + head.count(b"\r") - head.count(b"\r\n") + 1


def test_a_compactions_elision_does_not_evict_the_facts_matcher_runs_share():
    """The facts of a trace are compiled once for every run over it (textmatch.matcher); each compaction's
    elision compiles its own set apart, so twenty compactions leave the trace's matcher shared."""
    facts = {f"f{i}": f"fact number {i}" for i in range(5)}
    first = textmatch.matcher(facts)
    for k in range(20):
        simulated._elider([f"lost {k}", f"gone {k}"])("lost 3 and gone 3")
    assert textmatch.matcher(facts) is first
    assert simulated._elider(["lost 1"])("a lost 1 line") != "a lost 1 line"


def test_the_scorer_drops_a_files_found_offsets_with_its_bytes(tmp_path, monkeypatch):
    """The offsets found in a file are kept while its bytes are (_BYTES_HELD, newest read last), and go with
    them: a run over many files holds neither without bound. By hand, with room for 10 bytes: a (6 bytes) then
    b (6 bytes) leaves b only; a read again is searched anew and still says its line."""
    from ctxsim.harness.retention import scoring

    monkeypatch.setattr(scoring, "_BYTES_HELD", 10)
    model = RetentionModel({}, session_dir=tmp_path)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(b"x\nfact")
    b.write_bytes(b"fact\ny")

    def line(p):
        st_ = p.stat()
        return model._line_of(str(p), (st_.st_mtime_ns, st_.st_size), "fact")

    assert line(a) == 2 and set(model._found) == {str(a)}
    assert line(b) == 1 and set(model._found) == set(model._data) == {str(b)}
    assert line(a) == 2 and set(model._found) == set(model._data) == {str(a)}


def _excerpt_whole(lines: list[str], line: int | None, n: int, cap: int) -> str:
    """The read-back's excerpt by its definition: the window of ``n`` lines around ``line`` joined, then cut to
    ``cap`` characters keeping the fact's line inside."""
    if line is None or len(lines) <= n:
        start = 1 if line is None else max(1, line - n // 2)
    else:
        start = max(1, min(line - n // 2, len(lines) - n + 1))
    chunk = "".join(lines[start - 1:start - 1 + n])
    if len(chunk) > cap:
        if line is not None:
            at = sum(len(x) for x in lines[start - 1:line - 1])
            lo = max(0, min(at - cap // 2, len(chunk) - cap))
            return chunk[lo:lo + cap]
        return chunk[:cap]
    return chunk


@settings(max_examples=80, deadline=None)
@given(sizes=st.lists(st.integers(0, 60), min_size=1, max_size=40), line=st.one_of(st.none(), st.integers(1, 50)),
       n=st.integers(1, 12), cap=st.integers(1, 120))
def test_a_read_back_excerpt_joins_only_what_its_cut_keeps_and_gives_the_whole_joins_text(tmp_path_factory, sizes, line,
                                                                                          n, cap):
    """The excerpt joins only the lines its character cap keeps (a transcript's window of 2,000 lines can hold
    megabytes, joined and thrown away at every read-back): the text is exactly the window joined, then cut."""
    import pytest
    from ctxsim.harness.replay import readback

    path = tmp_path_factory.mktemp("ex") / "t.jsonl"
    path.write_text("".join(f"{i:03d}" + "x" * k + "\n" for i, k in enumerate(sizes)), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(readback, "READBACK_LINES", n)
        mp.setattr(readback, "READBACK_MAX_CHARS", cap)
        got, _ = readback.excerpt(path, line)
    assert got == _excerpt_whole(_whole(path), line, n, cap)

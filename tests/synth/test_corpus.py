"""The shipped corpus: the real project, its structure index and the recorded runs hold together."""

import ast
import gzip
import hashlib

import pytest
from ctxsim.harness.synth import corpus_build as B
from ctxsim.harness.synth.corpus import CORPUS_FILE, CORPUS_SHA256, CorpusError, load_corpus


@pytest.fixture(scope="module")
def c():
    return load_corpus()


def test_the_file_is_the_pinned_one_and_its_license_ships_beside_it():
    assert hashlib.sha256(CORPUS_FILE.read_bytes()).hexdigest() == CORPUS_SHA256
    assert (CORPUS_FILE.parent / "LICENSE.txt").read_text().startswith("Copyright 2014 Pallets")
    assert CORPUS_FILE.stat().st_size < 3_000_000   # a few MB at most


def test_a_corpus_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch):
    from ctxsim.harness.synth import corpus as C

    fake = tmp_path / "c.json.gz"
    fake.write_bytes(gzip.compress(b"{}"))
    monkeypatch.setattr(C, "CORPUS_FILE", fake)
    C.load_corpus.cache_clear()
    try:
        with pytest.raises(CorpusError, match="sha256"):
            C.load_corpus()
    finally:
        C.load_corpus.cache_clear()


def test_sources_parse_and_the_structure_index_matches_them(c):
    for path in c.python_sources():
        f = c.files[path]
        ast.parse(f.text)
        assert [list(b) for b in f.blocks] == B.blocks_of(f.text)
        assert [list(s) for s in f.segments] == B.segments_of(f.text)


def test_every_mutation_is_a_one_line_bug_whose_recorded_runs_fail(c):
    assert len(c.mutations) >= 100
    for m in c.mutations:
        line = c.files[m.path].lines[m.change.line - 1]
        assert line == m.change.old != m.change.new
        ast.parse("\n".join(c.files[m.path].lines[: m.change.line - 1] + (m.change.new,) + c.files[m.path].lines[m.change.line:]))
        assert all(r.exit in (1, 2) for r in m.runs.values())   # failed, or a collection error
        assert m.failing[0].split("::")[0] == m.module and m.failing[0].split("::")[-1].split("[")[0] in m.runs["x"].out
        for a in m.attempts:
            assert 0 < abs(a.change.line - m.change.line) <= 8 and a.run.exit in (1, 2)


def test_clean_runs_pass(c):
    assert c.clean_suite["q"].exit == 0 and "passed" in c.clean_suite["q"].out
    assert c.test_modules() and all(r["q"].exit == 0 for r in c.clean_modules.values())


def test_mutation_operators_by_hand():
    src = "def f(a, b):\n    if a is not None and b < 2:\n        return not a\n    return a in b\n"
    got = {(m["line"], m["new"].strip()) for m in B.mutation_candidates("x.py", src)}
    assert got == {(2, "if a is None and b < 2:"), (2, "if a is not None or b < 2:"), (2, "if a is not None and b <= 2:"),
                   (2, "if a is not None and b < 1:"), (3, "return a"), (4, "return a not in b")}
    seg = B.segments_of("import x\n\n# c\nclass A:\n    a = 1\n\n    @d\n    def f(self):\n        return 1\n")
    assert seg == [[1, 1, 0], [2, 9, 0], [5, 5, 1], [6, 9, 1]]   # comments and blank lines go with what follows


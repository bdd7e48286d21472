"""FileView keeps a file's known lines as runs of text between Edits (issue 30: an Edit no longer
rebuilds a dict of every line). Property: any sequence of full or partial reads, writes and Edits
leaves exactly the lines, text and unplaced-edit count that the line-by-line definition gives."""

from __future__ import annotations

from ctxsim.strategies.reattach import FileView, numbered_lines
from hypothesis import given
from hypothesis import strategies as st


class Reference:
    """The definition, line by line (the implementation before runs)."""

    def __init__(self) -> None:
        self.lines: dict[int, str] = {}
        self.raw: str | None = None
        self.edits_not_placed = 0

    def read(self, text: str, partial: bool) -> None:
        got = numbered_lines(text)
        if not got:
            if not self.lines:
                self.raw = text
            return
        if partial:
            self.lines.update(got)
        else:
            self.lines = got
        self.raw = None

    def write(self, content: str) -> None:
        self.lines = dict(enumerate(content.split("\n"), 1))
        self.raw = None

    def edit(self, old: str, new: str, replace_all: bool = False) -> None:
        if not old:
            self.write(new)
            return
        out: list[tuple[int, list[str]]] = []
        for n in sorted(self.lines):
            if out and n == out[-1][0] + len(out[-1][1]):
                out[-1][1].append(self.lines[n])
            else:
                out.append((n, [self.lines[n]]))
        runs = [(s, "\n".join(ls)) for s, ls in out]
        hits = [(i, run[1].count(old)) for i, run in enumerate(runs)]
        total = sum(n for _, n in hits)
        if total == 0 or (total > 1 and not replace_all):
            self.edits_not_placed += 1
            return
        for i, n in reversed(hits):
            if n:
                start, text = runs[i]
                end = start + text.count("\n")
                after = (text.replace(old, new) if replace_all else text.replace(old, new, 1)).split("\n")
                delta = len(after) - (end - start + 1)
                kept = {k: t for k, t in self.lines.items() if k < start}
                kept.update({start + k: t for k, t in enumerate(after)})
                kept.update({k + delta: t for k, t in self.lines.items() if k > end})
                self.lines = kept


WORDS = st.sampled_from(["a", "b", "ab", "c", "", "x y"])
TEXT = st.lists(WORDS, min_size=0, max_size=4).map("\n".join)
LINES = st.dictionaries(st.integers(1, 12), WORDS, max_size=8)
OPS = st.lists(st.one_of(
    st.tuples(st.just("read"), LINES, st.booleans()),
    st.tuples(st.just("stub"), st.just("File unchanged since last read"), st.booleans()),
    st.tuples(st.just("write"), TEXT, st.just(False)),
    st.tuples(st.just("edit"), st.tuples(TEXT, TEXT), st.booleans()),
), max_size=12)


@given(OPS)
def test_runs_give_the_lines_the_definition_gives(ops):
    v, ref = FileView(), Reference()
    for kind, arg, flag in ops:
        if kind == "read":
            text = "\n".join(f"{n:6d}\u2192{t}" for n, t in sorted(arg.items()))
            v.read(text, flag)
            ref.read(text, flag)
        elif kind == "stub":
            v.read(arg, flag)
            ref.read(arg, flag)
        elif kind == "write":
            v.write(arg)
            ref.write(arg)
        else:
            v.edit(arg[0], arg[1], flag)
            ref.edit(arg[0], arg[1], flag)
        assert v.known() == bool(ref.lines or ref.raw)
    assert v.lines == ref.lines
    assert v.raw == ref.raw and v.edits_not_placed == ref.edits_not_placed

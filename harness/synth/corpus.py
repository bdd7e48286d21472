"""The real project the synthetic sessions work on, and real runs of its real test suite.

Loaded from package data (``harness/synth/corpus/``, built offline by
:mod:`ctxsim.harness.synth.corpus_build`; provenance and license beside it): click 8.1.8's sources, tests,
docs and config files; the structure of its Python files (def/class spans, statement spans); the
real pytest output of the clean tree and of each mutation (one-token bug) with its wrong attempts.
Nothing is read from the machine, so a trace depends only on the preset, the overrides and the seed.
The file's SHA-256 is checked on load: a different corpus would silently give different traces.
"""

from __future__ import annotations

import bisect
import gzip
import hashlib
import itertools
import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
CORPUS_FILE = CORPUS_DIR / "click-8.1.8.json.gz"
CORPUS_SHA256 = "bde59825857379cdc6ea34cfedbdb7f5fb59c9f31c063018f5a22db92195eea3"  # of CORPUS_FILE, checked on load
CWD = "/workspace/project"   # where the recorded runs ran (header.meta, tool paths)


class CorpusError(RuntimeError):
    """The shipped corpus is missing or is not the one this code was written for."""


@dataclass(frozen=True)
class Run:
    """One recorded command: what the agent typed, its exit status and its output (stdout+stderr)."""

    cmd: str
    exit: int
    out: str


@dataclass(frozen=True)
class LineChange:
    path: str
    line: int      # 1-based
    old: str       # the whole line before
    new: str       # the whole line after
    op: str        # e.g. "< -> <="


@dataclass(frozen=True)
class Attempt:
    """A wrong fix: a second change near the bug; the tests still fail (``run``)."""

    change: LineChange
    run: Run


@dataclass(frozen=True)
class Mutation:
    """A one-token bug in the real sources and what the real test suite prints with it."""

    id: str
    change: LineChange
    function: str              # qualified name of the function it is in ("" at module level)
    failing: tuple[str, ...]   # pytest node ids that fail
    module: str                # the test module of the first failing test
    runs: dict[str, Run]       # "x": module -x -q, "short": module --tb=short, "test": first failing test, "suite": -q
    attempts: tuple[Attempt, ...]

    @property
    def path(self) -> str:
        return self.change.path


@dataclass
class SourceFile:
    path: str
    text: str
    lines: tuple[str, ...]
    blocks: tuple[tuple[int, int, int, str, str], ...] = ()   # (first, last, depth, kind, qualname)
    segments: tuple[tuple[int, int, int], ...] = ()           # (first, last, depth) statement spans
    _starts: list[int] = field(default_factory=list, repr=False)
    _cum: list[int] = field(default_factory=list, repr=False)

    def chars(self, first: int, last: int) -> int:
        """Characters of lines ``first..last`` (1-based, inclusive), newlines not counted."""
        if not self._cum:
            self._cum = [0, *itertools.accumulate(len(ln) for ln in self.lines)]
        last = min(last, len(self.lines))
        return self._cum[last] - self._cum[first - 1] if last >= first else 0

    def line_of_offset(self, off: int) -> int:
        """1-based line of character offset ``off``."""
        if not self._starts:
            self._starts = [0, *itertools.accumulate(len(ln) + 1 for ln in self.lines[:-1])]
        return bisect.bisect_right(self._starts, off)


@dataclass(frozen=True)
class Corpus:
    project: str
    version: str
    files: dict[str, SourceFile]
    clean_suite: dict[str, Run]                 # "q", "v"
    clean_modules: dict[str, dict[str, Run]]    # module -> {"q", "v"}
    mutations: tuple[Mutation, ...]
    provenance: dict

    @cached_property
    def line_counts(self) -> Counter:
        """How many times each stripped line occurs in the corpus's files."""
        return Counter(ln.strip() for f in self.files.values() for ln in f.lines)

    @property
    def paths(self) -> list[str]:
        return sorted(self.files)

    def python_sources(self) -> list[str]:
        return [p for p in self.paths if p.startswith("src/") and p.endswith(".py")]

    def test_modules(self) -> list[str]:
        return sorted(self.clean_modules)


def _run(d: dict) -> Run:
    return Run(d["cmd"], int(d["exit"]), d["out"])


def _change(d: dict) -> LineChange:
    return LineChange(d["path"], int(d["line"]), d["old"], d["new"], d["op"])


def parse(data: dict) -> Corpus:
    """The corpus from its JSON form (what :mod:`ctxsim.harness.synth.corpus_build` writes)."""
    files = {}
    for path, text in data["files"].items():
        files[path] = SourceFile(path, text, tuple(text.split("\n")),
                                 tuple(tuple(b) for b in data["blocks"].get(path, ())),
                                 tuple(tuple(s) for s in data.get("segments", {}).get(path, ())))
    muts = []
    for m in data["mutations"]:
        runs = {k: _run(v) for k, v in m["runs"].items()}
        # pytest's exit 1: tests failed, 2: interrupted by a collection error; anything else (4: a node
        # id pytest could not select, -1: timed out while recording) is not a run of the bug
        runs = {k: r for k, r in runs.items() if r.exit in (1, 2)}
        if not {"x", "short", "suite"} <= set(runs):
            continue
        attempts = tuple(Attempt(_change(w), _run(w["runs"]["x"])) for w in m.get("wrong", ()))
        muts.append(Mutation(m["id"], _change(m), m["function"], tuple(m["failing"]), m["module"], runs, attempts))
    clean = data["clean"]
    return Corpus(
        project=data["project"], version=data["version"], files=files,
        clean_suite={"q": _run(clean["suite_q"]), "v": _run(clean["suite_v"])},
        clean_modules={k: {kk: _run(vv) for kk, vv in v.items()} for k, v in clean["modules"].items()},
        mutations=tuple(muts),
        provenance={k: data[k] for k in ("source", "runner", "license") if k in data},
    )


@cache
def load_corpus(path: str | None = None) -> Corpus:
    """The shipped corpus (checked against :data:`CORPUS_SHA256`), or the one at ``path`` (tests)."""
    p = Path(path) if path else CORPUS_FILE
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise CorpusError(f"{p}: cannot read the synthetic-session corpus ({e.strerror or e}); "
                          "reinstall ctxsim (it ships as package data)") from None
    if path is None:
        digest = hashlib.sha256(raw).hexdigest()
        if digest != CORPUS_SHA256:
            raise CorpusError(f"{p}: sha256 {digest[:16]}... is not the corpus this version of ctxsim "
                              f"generates from ({CORPUS_SHA256[:16]}...); reinstall ctxsim")
    return parse(json.loads(gzip.decompress(raw)))

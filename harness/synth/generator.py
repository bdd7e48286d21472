"""The synthetic session generator: a :class:`SynthConfig` and a seed -> a valid trace (format v1).

Shape, as in the real logs (all of it fitted, :mod:`ctxsim.harness.synth.fit`): a user message opens a
turn; the agent makes a run of model calls (calls per turn), each with zero or more parallel tool
calls, whose results come back before the next call; the turn's last call answers in text. Tool
kinds, result and input sizes, text sizes and gaps are drawn from the fitted distributions.

Content, unlike the shape, is not drawn: it is the real project of :mod:`ctxsim.harness.synth.corpus`
(click 8.1.8) as :mod:`ctxsim.harness.synth.workspace` shows it. The session is a run of tasks; a task is
one real bug (a mutation of the real sources) that the user reports by its failing test. The agent
runs the test module (the real recorded output), reads and greps the code (real lines), may try a
wrong fix first (a second recorded mutation, whose real test output still fails), fixes the line,
re-runs the tests (now the clean tree's real output), adds a changelog entry, commits. What each
tool call does is chosen from the task's state; the size drawn for its result picks among the
actions that fit it (a read window, a grep scope, a shell command), so sizes stay fitted while the
content stays real. Most tasks of a session fall in a few source files (``area_*``): later tasks
re-read what earlier ones read, as real sessions do.

Facts (:mod:`ctxsim.harness.synth.facts`) are real things met on the way: the changed line, signatures and
constants read, the first assertion line of a failing run, the user's goal, constraints,
preferences and feedback, the agent's root-cause statement. A probe needs facts the way real calls
use items: the age of what is needed (tokens since it first entered) is drawn from a log-normal
fitted to the real logs, and before most uses the agent looks at it again (``reseen_share``: the
call before the probe re-reads the line or re-runs the test), so what is needed was usually last
seen a call or two earlier (:mod:`ctxsim.harness.synth.recurrence` measures both, on real and synthetic
traces, with one function). Preferences and feedback are needed where they govern an action (a
test run, an edit, a changelog entry, a commit, a report), in later sessions too.

Long-range needs (issue 43; ``long_range``): a real need reaches back a distance drawn from what real
logs show, whatever the window. At each need the re-need distance D (tokens since the fact was last
seen) passes ``long_range_tokens`` with the probability the fitted mixture gives at this position
(:class:`ctxsim.harness.synth.recurrence.Reneed`, harness/data/reneed.json, fitted on the development
population); such a need is of the fact last seen nearest D tokens back, drawn from the fitted tail, and
the agent does not look at it again first. The generator knows no window: at a 200k or a 1M window,
the needs whose D passes a turnover point are at risk in proportion, and a session that crosses 1M has
them too. (Before, the long presets placed needs right after ``turnover_tokens`` = window − 33,000: the
200k window was built in, and long-200k at 1M had none.) Where each fact was last seen is tracked in
every emitted event (one Aho–Corasick pass over its text).

Everything random comes from one ``numpy.random.Generator`` seeded with the seed, consumed in a
fixed order; the corpus is package data checked by hash; the trace is written by the canonical
writer: the same config and seed give the same bytes on any machine.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field

import ahocorasick
import numpy as np
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import dialogue as T
from ctxsim.harness.synth import facts as F
from ctxsim.harness.synth.config import SynthConfig
from ctxsim.harness.synth.content import Draw
from ctxsim.harness.synth.corpus import CWD, Corpus, Mutation, load_corpus
from ctxsim.harness.synth.distributions import categorical
from ctxsim.harness.synth.reneed import load_reneed
from ctxsim.harness.synth.workspace import ARROW, READ_MAX_LINES, Output, Workspace, abspath

TOOL_NAMES = {"read": "Read", "bash": "Bash", "grep": "Grep", "glob": "Glob", "edit": "Edit", "web": "WebFetch",
              "task": "Task"}
TOOL_SPECS = (
    tr.ToolSpec(name="Read", description="Reads a file from the local filesystem. Returns it with line numbers (cat -n).",
                input_schema={"type": "object", "properties": {"file_path": {"type": "string"}, "offset": {"type": "integer"},
                                                               "limit": {"type": "integer"}}, "required": ["file_path"]}),
    tr.ToolSpec(name="Bash", description="Executes a bash command in a persistent shell and returns its output.",
                input_schema={"type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
                              "required": ["command"]}),
    tr.ToolSpec(name="Grep", description="Searches file contents with ripgrep; returns matching lines.",
                input_schema={"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"},
                                                               "glob": {"type": "string"}, "output_mode": {"type": "string"},
                                                               "-C": {"type": "integer"}, "head_limit": {"type": "integer"}},
                              "required": ["pattern"]}),
    tr.ToolSpec(name="Glob", description="Finds files by glob pattern.",
                input_schema={"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}),
    tr.ToolSpec(name="Edit", description="Replaces old_string with new_string in a file.",
                input_schema={"type": "object", "properties": {"file_path": {"type": "string"}, "old_string": {"type": "string"},
                                                               "new_string": {"type": "string"}},
                              "required": ["file_path", "old_string", "new_string"]}),
    tr.ToolSpec(name="WebFetch", description="Fetches a URL and answers a prompt about its content.",
                input_schema={"type": "object", "properties": {"url": {"type": "string"}, "prompt": {"type": "string"}},
                              "required": ["url"]}),
    tr.ToolSpec(name="Task", description="Launches a sub-agent for a multi-step exploration; returns its report.",
                input_schema={"type": "object", "properties": {"description": {"type": "string"}, "prompt": {"type": "string"}},
                              "required": ["prompt"]}),
)
_ROW = re.compile(r"^(?:[\w./\-]+[:\-])?\s*\d+[:\-\u2192](.*)$")
USER_CATEGORIES = ("constraint", "preference", "feedback")  # said in the next user message
REOBSERVABLE = ("file", "error")   # a file line can be read again, a failing run re-run
EXPLORE_MIX = {"grep": 0.45, "read": 0.4, "glob": 0.15}     # tools of an exploratory span (modelling choice)
SPILL_CHARS = 50_000    # N-SPILL-1: a result above this is spilled (a huge result)
HUGE_FACT_OFFSET = 2_500  # past the 2,000-character preview of a spill placeholder (N-SPILL-1), with margin
OLDER_PENALTY = 1.5     # an older fact than drawn misses more than a younger one: long sessions have many old ones (assumed)
UNSEEN_PENALTY = 0.35   # real uses are mostly of things the agent looks at again: prefer those (assumed)
MAX_AGE_MISS = 1.1      # |ln(age / drawn age)| beyond which a candidate need is dropped (a factor of 5; assumed)
CHARS_PER_TOKEN = 3.7   # estimate used only to aim probe ages while generating (measured later in true tokens)
TRUE_PER_ESTIMATED = 1.022  # cl100k tokens of content per estimated token (measured: long-200k seed 0, 794,494 true
                            # for 777,467 estimated, as recurrence.stream counts them): the fitted distances are in true
                            # tokens, positions here in estimated ones
DOCS_URL = "https://click.palletsprojects.com/en/8.1.x/{page}/"
GLOBS = ("src/click/*.py", "tests/test_*.py", "docs/*.rst", "**/*.toml", "src/click/_*.py", "tests/typing/*.py",
         "**/conftest.py", "requirements/*.txt", "docs/*options*.rst", "src/click/*core*.py")
HUGE_FILES = ("src/click/core.py", "CHANGES.rst", "src/click/types.py", "src/click/termui.py", "tests/test_options.py",
              "src/click/_termui_impl.py", "docs/options.rst", "src/click/utils.py", "src/click/decorators.py")


@dataclass
class _Fact:
    id: str
    category: str
    text: str
    call: int          # model call at which it was introduced (global index)
    pos: float         # estimated tokens of content before it
    session: int
    path: str = ""     # file facts: where the line is
    line: int = 0
    run: str = ""      # error facts: the recorded run ("x", "short", "test", "suite") of the bug that shows it
    bug: str = ""      # error facts: the mutation id
    trigger: str = ""  # preference/feedback: the action it governs


@dataclass
class _Task:
    bug: Mutation
    test: str                      # failing node id
    test_path: str
    test_func: tuple[int, int]     # span of the failing test function in its module
    func: tuple[int, int]          # span of the buggy function (or a window around the line)
    attempts: list[int]            # wrong attempts still to try, in order
    ticket: str
    seen_failure: bool = False
    read_source: bool = False
    decided: bool = False
    untested_edit: bool = False
    fixed: bool = False
    verified: bool = False
    changelog: int = 0             # 0: none, 1: entry added, 2: entry amended
    committed: bool = False
    may_edit: bool = False
    facts: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.fixed and self.verified

    @property
    def path(self) -> str:
        return self.bug.path

    @property
    def func_name(self) -> str:
        return self.bug.function or self.bug.path.rsplit("/", 1)[-1]

    @property
    def short_name(self) -> str:
        return self.func_name.split(".")[-1]


@dataclass
class _Act:
    """One tool call: its kind, input, result, the facts its result shows first, and what it does."""

    kind: str
    input: dict
    out: Output
    plant: list[tuple[str, str, dict]] = field(default_factory=list)   # (category, text, locator)
    tags: set[str] = field(default_factory=set)                       # test/edit/changelog/commit
    reshow: bool = False                                               # looks again at a need of the next probe


class _Gen:
    def __init__(self, cfg: SynthConfig, seed: int, corpus: Corpus | None = None) -> None:
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.d = Draw(self.rng)
        self.c = corpus or load_corpus()
        self.ws = Workspace(self.c)
        self.events: list = []
        self.t = 0.0
        self.call = 0
        self.tool_id = 0
        self.pos = 0.0
        self.facts: list[_Fact] = []
        self.texts: set[str] = set()
        self.first_seen: dict[str, float] = {}   # stripped file line -> estimated tokens when first shown
        self.pending_user: list[str] = []
        self.kinds, self.kind_p = categorical(cfg.tool_mix)
        self.par_n, self.par_p = categorical(cfg.parallel)
        self.explore_n, explore_p = categorical(EXPLORE_MIX)
        self.kind_cdf, self.par_cdf, self.explore_cdf = (np.cumsum(x).tolist() for x in (self.kind_p, self.par_p, explore_p))
        self.next_probe = self._probe_gap()
        self.probes = 0
        self.session = 0
        self.goal: _Fact | None = None
        self.task: _Task | None = None
        self.tasks = 0
        self.used: set[str] = set()
        self.area: list[str] = []
        self.prepared: list[_Fact] = []
        self.prepared_for = -1
        self.goal_due = float(self.rng.random())
        self.show: list[_Fact] = []
        self.by_path: dict[str, list[Mutation]] = {}
        for m in self.c.mutations:
            self.by_path.setdefault(m.path, []).append(m)
        self.stats = {"converted": 0, "edits": 0}
        self.shown: list[_Fact] = []     # the needs the agent looks at again before the coming probe
        self.session_from = 0.0          # estimated position where this session's context started
        self.last_seen: dict[str, float] = {}   # fact id -> estimated position after the last event holding its text
        self.far: set[str] = set()       # the prepared needs drawn long-range: not looked at again first
        self._auto = ahocorasick.Automaton()    # the facts' texts, to track where each was last seen
        self._auto_n = 0
        self.reneed = load_reneed() if cfg.long_range else None
        self.owed: dict[str, int] = {}   # tool kinds used less (>0) or more (<0) than drawn, by conversions

    # --- bookkeeping ----------------------------------------------------------------------------
    def _draw(self, cdf: list[float]) -> int:
        return min(bisect.bisect_right(cdf, self.d.uniform() * cdf[-1]), len(cdf) - 1)

    def _probe_gap(self) -> int:
        """The call of the next probe; ``self.lead``: how many calls before it the agent looks again
        at what it will need (``reseen_calls``)."""
        self.lead = max(1, int(round(self.cfg.reseen_calls.sample(self.rng))))
        return self.call + 1 + int(self.rng.geometric(1.0 / self.cfg.probe_every)) - 1

    def _tick(self, dt: float) -> None:
        self.t = round(self.t + float(dt), 3)

    def _emit(self, ev) -> None:
        self.events.append(ev)
        if isinstance(ev, tr.UserEvent):
            texts = [ev.text]
        elif isinstance(ev, tr.ToolResultEvent):
            texts = [ev.content]
        else:
            texts = [c.text if isinstance(c, tr.TextContent) else "\n".join(str(v) for v in c.input.values())
                     for c in ev.content]
        seen, pos = self.first_seen, self.pos
        self._seen_facts(texts, pos + sum(len(x) for x in texts) / CHARS_PER_TOKEN)
        for text in texts:   # where each line first entered (a fact made of it later is that old)
            for ln in text.split("\n"):
                if ln in seen:
                    continue
                seen[ln] = pos
                # the code of a grep row (path:12:code), a numbered line (12→code), a traceback line (>   code)
                m = _ROW.match(ln)
                for st in (ln.strip(), m.group(1).strip() if m else "", ln.lstrip("> ").strip()):
                    if st and st not in seen:
                        seen[st] = pos
        self.pos += sum(len(x) for x in texts) / CHARS_PER_TOKEN

    def _seen_facts(self, texts: list[str], end: float) -> None:
        """Every fact whose text is in ``texts`` was last seen at ``end`` (one automaton pass each)."""
        if not self._auto_n:
            return
        if self._auto.kind != ahocorasick.AHOCORASICK:
            self._auto.make_automaton()
        for text in texts:
            for _, fid in self._auto.iter(text):
                self.last_seen[fid] = end

    def _fact(self, category: str, text: str, **where) -> _Fact | None:
        if text in self.texts or not text:
            return None
        f = _Fact(f"f{len(self.facts) + 1:05d}", category, text, self.call, self.first_seen.get(text, self.pos),
                  self.session, **where)
        self.facts.append(f)
        self.texts.add(text)
        self.last_seen[f.id] = self.pos   # its event was just emitted: seen up to here
        self._auto.add_word(text, f.id)
        self._auto_n += 1
        self.events.append(tr.FactEvent(t=self.t, id=f.id, category=category, text=text))
        if self.task is not None:
            self.task.facts.append(f.id)
        return f

    def _file_due(self) -> int:
        """File facts due at this call (Poisson, ``facts.file`` per 100 calls)."""
        per100 = self.cfg.facts.get("file", 0.0)
        return int(self.rng.poisson(per100 / 100.0)) if per100 > 0 else 0

    # --- tasks ----------------------------------------------------------------------------------
    def _choose_area(self) -> None:
        paths = sorted(self.by_path, key=lambda p: (-len(self.by_path[p]), p))
        w = np.array([len(self.by_path[p]) for p in paths], dtype=float)
        k = min(self.cfg.area_files, len(paths))
        idx = self.rng.choice(len(paths), size=k, replace=False, p=w / w.sum())
        self.area = [paths[int(i)] for i in sorted(idx)]

    def _new_task(self) -> _Task | None:
        if not self.area:
            self._choose_area()
        elif self.rng.random() < self.cfg.area_drift:   # the work moves on to another part of the code
            others = sorted(p for p in self.by_path if p not in self.area)
            if others:
                self.area[self.d.int(len(self.area))] = others[self.d.int(len(others))]
        pool_area = [m for p in self.area for m in self.by_path[p] if m.id not in self.used]
        pool_all = [m for m in self.c.mutations if m.id not in self.used]
        if not pool_all:   # every bug fixed once: a long session meets old ones again
            self.used.clear()
            pool_all = list(self.c.mutations)
            pool_area = [m for m in pool_all if m.path in self.area]
        pool = pool_area if pool_area and self.rng.random() < self.cfg.area_focus else pool_all
        pool = [m for m in pool if self.ws.lines(m.path)[m.change.line - 1] == m.change.old]
        if not pool:
            return None
        m = pool[self.d.int(len(pool))]
        self.used.add(m.id)
        self.ws.last_pull = self.ws.pull(m)
        test = m.failing[0]
        tpath = test.split("::")[0]
        tname = test.split("::")[-1].split("[")[0]
        tf = self.c.files[tpath]
        span = next(((b[0], b[1]) for b in tf.blocks if b[4].split(".")[-1] == tname), (1, min(40, len(tf.lines))))
        src = self.c.files[m.path]
        fspan = next(((b[0], b[1]) for b in reversed(src.blocks) if b[4] == m.function and b[0] <= m.change.line <= b[1]),
                     (max(1, m.change.line - 15), min(len(src.lines), m.change.line + 15)))
        n_att = int(self.rng.choice(3, p=self.cfg.attempt_weights_p))
        attempts = list(range(len(m.attempts)))[:n_att]
        self.tasks += 1
        ticket = f"CLICK-{2800 + 37 * self.tasks + self.d.int(37)}"
        self.task = _Task(m, test, tpath, span, fspan, attempts, ticket)
        return self.task

    # --- sizes ------------------------------------------------------------------------------------
    def _size(self, kind: str, huge: bool = False) -> int:
        dist = self.cfg.huge_chars if huge else self.cfg.result_chars.get(kind) or self.cfg.result_chars["bash"]
        return max(1, int(dist.sample(self.rng)))

    @staticmethod
    def _closest(options: list[tuple[int, object]], target: int):
        return min(options, key=lambda o: abs(math.log((o[0] + 20) / (target + 20))))[1]

    # --- reads ------------------------------------------------------------------------------------
    def _window(self, path: str, focus: int, target: int) -> tuple[int, int] | None:
        """The lines a read of ``path`` about line ``focus`` returns for about ``target`` characters:
        None for the whole file; otherwise a run of whole statements of one module or class body
        around ``focus`` (so a read of Python parses), or for other files a window of lines."""
        ws = self.ws
        n = ws.n_lines(path)
        if n <= READ_MAX_LINES and ws.read_size(path, 1, n) <= target * 1.25:
            return None
        f = self.c.files[path]
        segs = f.segments
        if not segs or not path.endswith(".py"):
            per = max(1.0, ws.read_size(path, 1, n) / n)
            k = max(5, min(READ_MAX_LINES, int(target / per)))
            first = max(1, min(focus - k // 3, n - k + 1))
            return first, min(n, first + k - 1)
        inner = [s for s in segs if s[0] <= focus <= s[1]]
        depth = max((s[2] for s in inner), default=0)
        while True:
            if depth == 0:
                sibs = [s for s in segs if s[2] == 0]
            else:
                parent = next(s for s in inner if s[2] == depth - 1)
                sibs = [s for s in segs if s[2] == depth and parent[0] <= s[0] and s[1] <= parent[1]]
            i = next((k for k, s in enumerate(sibs) if s[0] <= focus <= s[1]), None)
            if i is None:
                i = min(range(len(sibs)), key=lambda k: abs(sibs[k][0] - focus))
            lo = hi = i
            prev = None
            while ws.read_size(path, sibs[lo][0], sibs[hi][1]) < target:
                prev = (lo, hi)
                grow_up = hi + 1 < len(sibs) and (lo == 0 or self.d.int(3) > 0)
                if grow_up:
                    hi += 1
                elif lo > 0:
                    lo -= 1
                else:
                    break
            if prev is not None:   # the window just under the target may be closer than the one just over
                under = ws.read_size(path, sibs[prev[0]][0], sibs[prev[1]][1])
                over = ws.read_size(path, sibs[lo][0], sibs[hi][1])
                if over > target and math.log(over / target) > math.log(target / max(1, under)):
                    lo, hi = prev
            first, last = sibs[lo][0], sibs[hi][1]
            covers = lo == 0 and hi == len(sibs) - 1
            if covers and depth > 0 and ws.read_size(path, first, last) < target * 0.7:
                depth -= 1          # the whole class body is smaller than asked: read more around it
                continue
            while last - first + 1 > READ_MAX_LINES and hi > lo:
                hi -= 1
                last = sibs[hi][1]
            return first, min(last, first + READ_MAX_LINES - 1)

    def _read(self, path: str, focus: int, target: int) -> _Act:
        win = self._window(path, focus, target)
        inp: dict = {"file_path": abspath(path)}
        if win is None:
            out = self.ws.read(path)
            first, last = 1, min(self.ws.n_lines(path), READ_MAX_LINES)
        else:
            first, last = win
            inp.update(offset=first, limit=last - first + 1)
            out = self.ws.read(path, first, last - first + 1)
        act = _Act("read", inp, out)
        if len(out.text) > SPILL_CHARS:
            # large files hold details: a due file fact goes here, and some huge reads hold an extra
            # one, past the part a spill placeholder previews (N-SPILL-1)
            if self.rng.random() < self.cfg.huge_file_fact_share:
                self.file_due += 1
            here = self.rng.random() < self.cfg.file_facts_in_huge   # else a due file fact waits for another read
            self._plant_lines(act, path, first, last, min_offset=HUGE_FACT_OFFSET, take_due=here)
            return act
        self._plant_lines(act, path, first, last)
        return act

    def _plant_lines(self, act: _Act, path: str, first: int, last: int, min_offset: int = 0,
                     take_due: bool = True) -> None:
        """File facts the result shows: the task's changed line when it is first seen, and a due
        file fact (``self.file_due``) among the distinctive lines shown."""
        task, ws = self.task, self.ws
        lines = ws.lines(path)
        if task is not None and task.bug is ws.bug and path == task.path and first <= task.bug.change.line <= last \
                and not any(self._by_id(i).category == "file" and self._by_id(i).line == task.bug.change.line
                            for i in task.facts):
            ln = task.bug.change.line
            text = lines[ln - 1].strip()
            if not F.distinctive(self.c, text) and act.kind == "read":
                text = f"{ln:>6}{ARROW}{lines[ln - 1]}"    # the numbered line: distinctive in a Read
            if (F.distinctive(self.c, text) or act.kind == "read") and \
                    (not min_offset or ws.read_size(path, first, ln) >= min_offset):
                act.plant.append(("file", text, {"path": path, "line": ln}))
        if self.file_due > 0 and take_due:
            cands = [ln for ln in F.file_fact_lines(self.c, path, lines, first, last if min_offset else min(last, first + 600))
                     if lines[ln - 1].strip() not in self.texts]
            if min_offset:
                cands = [ln for ln in cands if ws.read_size(path, first, ln) >= min_offset]
            fresh = [ln for ln in cands if lines[ln - 1].strip() not in self.first_seen]
            cands = fresh or cands   # a detail noted when first met (its age is the fact's)
            if cands:
                top = cands[: max(1, len(cands) // 2)]
                ln = top[self.d.int(len(top))]
                act.plant.append(("file", lines[ln - 1].strip(), {"path": path, "line": ln}))
                self.file_due -= 1

    def _by_id(self, fid: str) -> _Fact:
        return self.facts[int(fid[1:]) - 1]

    def _read_target(self, target: int, huge: bool) -> _Act:
        """What to read: a fact the next call needs, else the task's code, its test, or the area."""
        for f in list(self.show):
            if f.category == "file" and self._reobservable(f):
                self.show.remove(f)
                return self._read(f.path, f.line, target)
        task = self.task
        huge = huge or target > SPILL_CHARS   # the fitted size's tail: a large file read in full
        if huge:   # a file that can give a result this large
            big = [p for p in HUGE_FILES if self.ws.read_size(p, 1, min(self.ws.n_lines(p), READ_MAX_LINES)) >= target * 0.8]
            path = (big or ["src/click/core.py"])[self.d.int(len(big) or 1)]
            return self._read(path, 1 + self.d.int(max(1, self.ws.n_lines(path) // 3)), target)
        r = self.d.uniform()
        if task is not None and not task.done:
            if not task.read_source or r < 0.5:
                task.read_source = True
                return self._read(task.path, task.bug.change.line, target)
            if r < 0.8:
                return self._read(task.test_path, task.test_func[0], target)
        if r < 0.85 or not self.area:
            path = self.area[self.d.int(len(self.area))] if self.area else "src/click/core.py"
        else:
            others = ("pyproject.toml", "tox.ini", "CHANGES.rst", "README.md", "docs/options.rst", "docs/arguments.rst")
            path = others[self.d.int(len(others))]
        return self._read(path, 1 + self.d.int(max(1, self.ws.n_lines(path))), target)

    # --- grep / glob ------------------------------------------------------------------------------
    def _grep(self, target: int) -> _Act:
        ws, task = self.ws, self.task
        fact = next((f for f in self.show if f.category == "file" and ARROW not in f.text
                     and self._reobservable(f) and F.identifier_of(f.text)), None)
        if fact is not None:
            self.show.remove(fact)
            pats = [(F.identifier_of(fact.text), fact.path)]
        else:
            pats = []
            if task is not None:
                pats += [(task.short_name, None), (f"def {task.short_name}", None),
                         (task.test.split("::")[-1].split("[")[0], task.test_path)]
                ident = F.identifier_of(task.bug.change.old)
                if ident:
                    pats.append((ident, task.path))
            if self.area:
                p = self.area[self.d.int(len(self.area))]
                blocks = [b for b in self.c.files[p].blocks if b[3] == "def"]
                if blocks:
                    pats.append((blocks[self.d.int(len(blocks))][4].split(".")[-1], None))
            if not pats:
                pats = [("def main", None)]
        options = []
        for pat, under in pats[:6]:
            for scope in ([under] if under else ["src/click", "tests", None]):
                n = len(ws.matches(pat, ws.scope(scope)))
                if n:
                    options.append((n * (len(pat) + 40), (pat, scope)))
        if not options:
            pat, scope = pats[0][0], pats[0][1] or "src/click"
        else:
            pat, scope = self._closest(options, target)
        inp: dict = {"pattern": pat}
        if scope:
            inp["path"] = abspath(scope)
        r = self.d.uniform()
        files_mode = r < self.cfg.grep_files_share and scope not in self.c.files
        mode, ctx = ("files_with_matches", 0) if files_mode else ("content", 2 if r > 0.92 else 0)
        inp["output_mode"] = mode
        if ctx:
            inp["-C"] = ctx
        out = ws.grep(pat, scope, mode=mode, context=ctx)
        if mode == "content" and len(out.text) > target * 3 and out.text.count("\n") > 10:
            per = len(out.text) / (out.text.count("\n") + 1)
            inp["head_limit"] = max(5, int(target / per))
            out = ws.grep(pat, scope, mode=mode, context=ctx, head_limit=inp["head_limit"])
        act = _Act("grep", inp, out)
        if mode == "content" and out.text and out.text[0] != "N":
            for row in out.text.split("\n")[:40]:
                self._grep_row_facts(act, row, scope)
        return act

    def _grep_row_facts(self, act: _Act, row: str, scope: str | None) -> None:
        parts = row.split(":", 2) if scope is None or scope not in self.c.files else [scope, *row.split(":", 1)]
        if len(parts) < 3 or not parts[1].isdigit() or parts[0] not in self.c.files:
            return
        self._plant_lines(act, parts[0], int(parts[1]), int(parts[1]))

    def _glob(self, target: int) -> _Act:
        options = [(len(self.ws.glob(g).text), g) for g in GLOBS]
        g = self._closest(options, target)
        return _Act("glob", {"pattern": g}, self.ws.glob(g))

    # --- the shell --------------------------------------------------------------------------------
    def _pytest_act(self, what: str, module: str | None = None) -> _Act | None:
        got = self.ws.pytest(what, module)
        if got is None:
            return None
        cmd, run = got
        text = run.out if run.exit == 0 else f"Exit code {run.exit}\n{run.out}"
        if self.d.int(3) == 0:
            cmd += " 2>&1"   # the recorded output is stdout and stderr together already
        what_ = cmd.split()[3] if len(cmd.split()) > 3 and cmd.split()[3].startswith("tests") else "the test suite"
        desc = self.d.pick(("Run {m}", "Run {m} to see the failure", "Re-run {m} after the change",
                            "Check that {m} passes")).format(m=what_)
        act = _Act("bash", {"command": cmd, "description": desc}, Output(text, run.exit != 0), tags={"test"})
        task = self.task
        if run.exit != 0 and task is not None and self.ws.bug is task.bug:
            task.seen_failure = True
            task.untested_edit = False
            line = F.error_line(run.out, self.texts)
            if line is not None and line in text:
                act.plant.append(("error", line, {"run": what, "bug": task.bug.id}))
        elif run.exit == 0 and task is not None and task.fixed:
            task.verified = True
            task.untested_edit = False
        return act

    def _bash(self, target: int, huge: bool) -> _Act:
        ws, task, d = self.ws, self.task, self.d
        for f in list(self.show):   # re-run the failing test a needed assertion line came from
            if f.category == "error" and ws.bug is not None and ws.bug.id == f.bug and ws.attempt is None:
                act = self._pytest_act(f.run)
                if act is not None and f.text in act.out.text:
                    self.show.remove(f)
                    return act
        for f in list(self.show):   # or look at a needed line again
            if f.category == "file" and ARROW not in f.text and self._reobservable(f) and not (task is not None and (
                    (ws.bug is task.bug and (not task.seen_failure or task.untested_edit)) or (task.fixed and not task.verified))):
                self.show.remove(f)
                per = max(20, len(ws.text(f.path)) // max(1, ws.n_lines(f.path)))
                k = max(3, min(200, target // per))
                a, b = max(1, f.line - k // 2), min(ws.n_lines(f.path), f.line + k - k // 2)
                act = _Act("bash", {"command": f"sed -n '{a},{b}p' {f.path}", "description": "Show the lines"},
                           Output(ws.cat(f.path, a, b)))
                self._plant_lines(act, f.path, a, b)
                return act
        if task is not None and not huge:
            must = (ws.bug is task.bug and (not task.seen_failure or task.untested_edit)) or (task.fixed and not task.verified)
            if must:
                act = self._pytest_act("x", task.test_path)
                if act is not None:
                    return act
            if task.done and not task.committed and (task.changelog or self.d.int(2)):
                return self._commit()
            if task.done and task.committed and ws.bug is None:
                act = self._pull()
                if act is not None:
                    return act
        options: list[tuple[int, object]] = []

        def add(what: str, module: str | None = None) -> None:
            got = ws.pytest(what, module)
            if got is not None:
                options.append((len(got[1].out), ("pytest", what, module)))

        if task is not None:
            for what in ("x", "short", "test", "q", "suite"):
                add(what, task.test_path)
        if huge or d.int(8) == 0:
            add("suite_v")
            add("v", task.test_path if task else "tests/test_options.py")
        options.append((len(ws.git_status()), ("status",)))
        if ws.modified():
            options.append((len(ws.git_diff()), ("diff",)))
            if task is not None and task.verified and not task.committed:
                options += [(80, ("commit",))] * 3
        focus = task.path if task is not None else (self.area[0] if self.area else "src/click/core.py")
        line = task.bug.change.line if task is not None else 1
        n = ws.n_lines(focus)
        for k in (10, 30, 80, 200):
            a = max(1, line - k // 2)
            options.append((len(ws.cat(focus, a, a + k)), ("sed", focus, a, min(n, a + k))))
        for p in sorted({focus, *self.area}):
            options.append((len(ws.text(p)), ("cat", [p])))
        options.append((len(ws.wc_l(ws.scope("src/click", "*.py"))), ("wc", "src/click")))
        options.append((len(ws.ls("src/click")), ("ls", "src/click")))
        options.append((len(ws.ls("tests")), ("ls", "tests")))
        if huge:
            for k in range(1, 5):
                files = list(HUGE_FILES[:k])
                options.append((sum(len(ws.text(p)) for p in files), ("cat", files)))
        choice = self._closest(options, target)
        kind = choice[0]
        if kind == "pytest":
            return self._pytest_act(choice[1], choice[2])  # type: ignore[return-value]
        if kind == "status":
            return _Act("bash", {"command": "git status", "description": "Show which files the working tree has changed"},
                        Output(ws.git_status()))
        if kind == "diff":
            return _Act("bash", {"command": "git diff", "description": "Show the uncommitted changes to review them"},
                        Output(ws.git_diff()))
        if kind == "commit":
            return self._commit()
        if kind == "sed":
            _, path, a, b = choice
            act = _Act("bash", {"command": f"sed -n '{a},{b}p' {path}",
                                "description": f"Show lines {a}-{b} of {path.rsplit('/', 1)[-1]}"}, Output(ws.cat(path, a, b)))
            self._plant_lines(act, path, a, b)
            return act
        if kind == "wc":
            files = ws.scope(choice[1], "*.py")
            return _Act("bash", {"command": f"wc -l {choice[1]}/*.py", "description": "Count the lines of each module"},
                        Output(ws.wc_l(files)))
        if kind == "ls":
            return _Act("bash", {"command": f"ls {choice[1]}", "description": f"List the files in {choice[1]}"},
                        Output(ws.ls(choice[1])))
        files = choice[1]
        return _Act("bash", {"command": "cat " + " ".join(files), "description": "Print the whole file" + ("s" if len(files) > 1 else "")},
                    Output("\n".join(ws.text(p) for p in files)))

    def _commit(self) -> _Act:
        task = self.task
        assert task is not None
        msg = self.d.pick(T.COMMIT).format(func=task.short_name, ticket=task.ticket)
        out = self.ws.commit(msg)
        task.committed = True
        return _Act("bash", {"command": f"git commit -am \"{msg}\"", "description": "Commit the fix"}, Output(out),
                    tags={"commit"})

    def _pull(self) -> _Act | None:
        """The next upstream commit arrives, with the next bug (a new task, as the goal asked)."""
        task = self._new_task()
        if task is None:
            return None
        self.pulled = True
        return _Act("bash", {"command": "git pull --ff-only", "description": "Take the next upstream commit"},
                    Output(self.ws.last_pull), tags={"pull"})

    # --- edits --------------------------------------------------------------------------------------
    def _context(self, target_input: int, around: int) -> tuple[int, int]:
        """Lines of context before/after the changed lines so the Edit input has about the size drawn."""
        lines = self.ws.lines(self.task.path)  # type: ignore[union-attr]
        per = max(20.0, sum(len(x) for x in lines[max(0, around - 20):around + 20]) / 40)
        k = max(0, int((target_input - 120) / 2 / per) - 1)
        before = k // 2 + self.d.int(2)
        return before, max(0, k - before)

    def _edit(self, target_input: int, result_target: int) -> _Act | None:
        ws, task = self.ws, self.task
        if task is None:
            return None
        if ws.bug is task.bug:
            if not task.may_edit:   # the agent has run the failing test and read the code in earlier calls
                return None
            ctx = self._context(target_input, task.bug.change.line)
            if task.attempts:
                i = task.attempts.pop(0)
                old, new = ws.try_attempt(i, ctx)
            else:
                old, new = ws.fix(ctx)
                task.fixed = True
            task.untested_edit = True
            path = task.path
            tags = {"edit", "fix" if task.fixed else "attempt"}
        elif task.fixed and task.changelog < 2:
            path = "CHANGES.rst"
            issue = task.ticket.split("-")[1]
            entry = T.CHANGELOG.format(func=task.func_name, issue=issue)
            text = ws.text(path)
            if task.changelog == 0:
                if "Unreleased\n" not in text:
                    old = ".. currentmodule:: click\n\nVersion 8.1.8\n-------------"
                    new = (".. currentmodule:: click\n\nVersion 8.1.9\n-------------\n\nUnreleased\n\n" + entry +
                           "\n\n\nVersion 8.1.8\n-------------")
                else:
                    old = "Unreleased\n\n"
                    new = "Unreleased\n\n" + entry + "\n"
            else:
                old = entry
                new = entry.replace(" regression.", f" regression in {task.path} (`{task.test}`).")
            # the agent includes the lines that follow, as far as the edit's size goes (Edit needs a unique anchor)
            at = text.find(old) + len(old)
            more = text[at:at + max(0, (target_input - 120 - len(old) - len(new)) // 2)]
            more = more[:more.rfind("\n") + 1] if "\n" in more else ""
            old, new = old + more, new + more
            if not ws.replace(path, old, new):
                return None
            task.changelog += 1
            tags = {"changelog"}
        else:
            return None
        self.stats["edits"] += 1
        if result_target > 300:   # Claude Code 2.0 shows a cat -n snippet around the edit; 2.1 only acknowledges
            lines = ws.lines(path)
            at = next((i + 1 for i, x in enumerate(lines) if new.split("\n")[0] == x), 1)
            first = last = at
            while ws.read_size(path, first, last) < result_target - 150 and (first > 1 or last < ws.n_lines(path)):
                first, last = max(1, first - 1), min(ws.n_lines(path), last + 2)
            out = ws.edit_ack(path, (first, last))
        else:
            out = ws.edit_ack(path)
        return _Act("edit", {"file_path": abspath(path), "old_string": old, "new_string": new}, out, tags=tags)

    # --- web / task -----------------------------------------------------------------------------------
    def _web(self, target: int) -> _Act:
        task = self.task
        name = task.short_name if task else "option"
        docs = [p for p in self.c.paths if p.startswith("docs/") and p.endswith(".rst")]
        hits = [p for p in docs if name in self.ws.text(p)] or docs
        page = hits[self.d.int(len(hits))]
        lines = self.ws.lines(page)
        n = self.ws.n_lines(page)
        focus = next((i for i, x in enumerate(lines) if name in x), self.d.int(max(1, n)))
        per = max(10.0, len(self.ws.text(page)) / max(1, n))
        k = max(5, int(target / per))
        a = max(0, min(focus - k // 3, n - k))
        url = DOCS_URL.format(page=page[5:-4])
        return _Act("web", {"url": url, "prompt": f"How does `{name}` behave, and what are its parameters?"},
                    Output("\n".join(lines[a:a + k])))

    def _task_tool(self, target: int) -> _Act:
        ws, task = self.ws, self.task
        name = task.short_name if task else "invoke"
        hits = ws.matches(name, ws.scope("src/click") + ws.scope("tests"))
        head = f"I searched src/ and tests/ for `{name}`. It appears in {len(hits)} places:\n"
        rows = []
        total = len(head)
        for p, ln in hits:
            row = f"- {p}:{ln}: `{ws.lines(p)[ln - 1].strip()}`"
            if total + len(row) > target:
                break
            rows.append(row)
            total += len(row) + 1
        body = head + "\n".join(rows)
        if task is not None:
            for path, (a, b), what in ((task.path, task.func, "The function itself"),
                                       (task.test_path, task.test_func, "The failing test")):
                if len(body) >= target:
                    break
                lines = ws.lines(path)
                k = b
                while k > a and ws.read_size(path, a, k) > target - len(body):
                    k -= 1
                code = "\n".join(lines[a - 1:k])
                body += f"\n\n{what} ({path}:{a}):\n```python\n{code}\n```"
        return _Act("task", {"description": f"Find the callers of {name}",
                             "prompt": f"Find every place in src/ and tests/ that calls or overrides `{name}` and "
                                       f"summarise how each uses its return value."}, Output(body))

    # --- one call --------------------------------------------------------------------------------------
    def _kinds(self, explore: bool) -> tuple[list[str], list[bool]]:
        cfg = self.cfg
        if not explore and cfg.burst_share and self.rng.random() < cfg.burst_share:
            return ["read"] * cfg.burst_tools, [True] * cfg.burst_tools
        n = int(self.par_n[self._draw(self.par_cdf)])
        if explore:
            kinds = [self.explore_n[self._draw(self.explore_cdf)] for _ in range(n)]
        else:
            kinds = [self.kinds[self._draw(self.kind_cdf)] for _ in range(n)]
        huge = [k in ("read", "bash") and cfg.huge_share > 0 and self.d.uniform() < cfg.huge_share for k in kinds]
        return kinds, huge

    def _act(self, kind: str, huge: bool, burst: bool) -> _Act:
        cfg = self.cfg
        target = self._size(kind, huge)
        if kind == "edit":
            act = self._edit(int(cfg.input_chars["edit"].sample(self.rng)), target)
            if act is not None:
                return act
            # nothing to edit yet (the agent has not seen the failure): it reads now and edits later
            self.stats["converted"] += 1
            self.owed["edit"] = self.owed.get("edit", 0) + 1
            self.owed["read"] = self.owed.get("read", 0) - 1
            kind, target = "read", self._size("read")
        elif not self.show and not huge and self.owed.get(kind, 0) < 0:
            # a kind used more than drawn (conversions above) gives its slot to one used less
            for other in sorted(self.owed, key=lambda k: -self.owed[k]):
                if self.owed[other] <= 0:
                    break
                if other == "edit":
                    act = self._edit(int(cfg.input_chars["edit"].sample(self.rng)), self._size("edit"))
                    if act is None:
                        continue
                    self.owed["edit"] -= 1
                    self.owed[kind] += 1
                    return act
                self.owed[other] -= 1
                self.owed[kind] += 1
                kind, target = other, self._size(other)
                break
        if kind == "read":
            if burst:
                path = HUGE_FILES[self.burst_i % len(HUGE_FILES)]
                self.burst_i += 1
                return self._read(path, 1, target)
            return self._read_target(target, huge)
        if kind == "grep":
            return self._grep(target)
        if kind == "glob":
            return self._glob(target)
        if kind == "web":
            return self._web(target)
        if kind == "task":
            return self._task_tool(target)
        return self._bash(target, huge)

    def _text(self, acts: list[_Act], final: bool) -> tuple[str, str | None]:
        """The assistant's text for a call, and the decision it states (a fact), if any."""
        d, task = self.d, self.task
        n = int(self.cfg.text_chars.sample(self.rng))
        kw = {"func": task.func_name if task else "the command", "path": task.path if task else "src/click",
              "module": task.test_path if task else "tests", "pattern": acts[0].input.get("pattern", "") if acts else ""}
        decision = None
        parts: list[str] = []
        if final:
            if task is not None and task.fixed:
                parts.append(d.pick(T.DONE).format(**kw))
            elif task is not None and task.seen_failure:
                parts.append(d.pick(T.NOT_YET).format(**kw))
            else:
                parts.append(d.pick(T.PLAN).format(**kw))
        else:
            a = acts[0]
            key = ("test" if "test" in a.tags else "changelog" if "changelog" in a.tags else
                   "commit" if "commit" in a.tags else "pull" if "pull" in a.tags else
                   {"bash": "shell", "read": "read", "grep": "grep", "glob": "glob", "edit": "edit", "web": "web",
                    "task": "task"}[a.kind])
            parts.append(d.pick(T.ANNOUNCE[key]).format(**kw))
            if self.ws.attempt is not None and any("test" in x.tags and x.out.is_error for x in acts):
                parts.insert(0, d.pick(T.STILL_FAILING))
            if task is not None and self.ws.bug is task.bug and task.seen_failure and not task.decided \
                    and (task.read_source or any(x.kind == "edit" for x in acts)):
                ch = task.bug.change
                decision = d.pick(T.ROOT_CAUSE).format(new=ch.new.strip(), old=ch.old.strip(), func=task.func_name,
                                                       path=task.path, line=ch.line)
                task.decided = True
        if n > sum(len(p) for p in parts) + 40:
            parts.append(d.pick(T.EXPLAIN).format(**kw))
            if task is not None and n > 300:
                a, _ = task.func
                ln = task.bug.change.line
                lines = self.ws.lines(task.path)
                k = max(2, min(30, (n - 200) // 45))
                lo = max(a, ln - k // 2)
                parts.append("```python\n" + "\n".join(lines[lo - 1:lo - 1 + k]) + "\n```")
        text = T.sized(parts, n)
        if decision:
            text = text + "\n\n" + decision
        return text, decision

    def _prepare(self) -> None:
        """Choose what the next call's probe needs, and what this call shows again of it."""
        cfg = self.cfg
        here = [f for f in self.facts if f.session == self.session and f.category != "goal"]
        earlier = [f for f in self.facts if f.session < self.session and f.category in cfg.cross_session_categories]
        needs: list[_Fact] = []
        self.goal_due += cfg.probe_goal_share   # exactly that share of the probes (a random phase), not a coin flip each
        if self.goal is not None and self.goal_due >= 1.0:
            self.goal_due -= 1.0
            needs.append(self.goal)
        far: set[str] = set()
        k = int(self.rng.integers(1, cfg.probe_max_needs + 1)) - len(needs)
        cutoff = cfg.probe_age_unseen.hi or math.inf
        for _ in range(max(k, 0 if needs else 1)):
            got = self._far_need(here, needs)
            if got is not None:   # reaches back past what the agent looks at again: drawn from the fitted tail
                needs.append(got)
                far.add(got.id)
                continue
            cross = bool(earlier) and self.rng.random() < cfg.cross_session_share
            pool = earlier if cross else here
            # what cannot be looked at again is needed soon after it entered, or (across sessions) from memory
            pool = [f for f in pool if f not in needs and (cross or self.pos - f.pos <= cutoff or self._reobservable(f))]
            if not pool:
                continue
            w = {c: cfg.probe_mix.get(c, 0.0) for c in {f.category for f in pool}}
            if max(w.values(), default=0.0) <= 0:
                continue
            age = float(cfg.probe_age.sample(self.rng))
            young = float(cfg.probe_age_unseen.sample(self.rng))

            def score(x: _Fact, age: float = age, young: float = young) -> float:
                """How far the fact's age is from the drawn one (a fact that can be looked at again is
                matched on first-entered, one that cannot on last-seen), less its category's weight."""
                again = self._reobservable(x)
                # a file line can be needed long after it first entered (it is read again); a failing run,
                # a decision, what the user said are needed while they are recent
                target = age if again and x.category == "file" else young
                miss = math.log((self.pos - x.pos + 50) / (target + 50))
                return miss * (OLDER_PENALTY if miss > 0 else -1.0) + (0.0 if again else UNSEEN_PENALTY) \
                    + 0.05 * self.d.uniform()

            names = sorted(c for c in w if w[c] > 0)
            cat = names[self._draw(np.cumsum([w[c] for c in names]).tolist())]   # the category, by probe_mix
            best = min((f for f in pool if f.category == cat), key=score)
            if score(best) >= MAX_AGE_MISS:   # none of it near the drawn age: the best of any category
                best = min((f for f in pool if w[f.category] > 0), key=score)
            if score(best) < MAX_AGE_MISS:    # still nothing near: fewer needs, not a wrong one
                needs.append(best)
        self.prepared = needs
        self.far = far
        self.show = [f for f in needs if f.id not in far and self._reobservable(f) and self.rng.random() < cfg.reseen_share]
        self.shown = list(self.show)   # what the agent means to look at again before the probe

    def _far_need(self, here: list[_Fact], taken: list[_Fact]) -> _Fact | None:
        """A long-range need (``long_range``), or None: with the probability that the fitted re-need
        distance passes ``long_range_tokens`` at this position, the fact of this session last seen
        nearest a distance drawn from the fitted tail (None when no fact was last seen near it)."""
        r, cfg = self.reneed, self.cfg
        if r is None:
            return None
        pos = (self.pos - self.session_from) * TRUE_PER_ESTIMATED   # true tokens into this session's context
        lo = float(cfg.long_range_tokens)
        if pos <= lo or self.rng.random() >= r.sf(lo, pos):
            return None
        d = r.sample_beyond(self.rng, lo, pos) / TRUE_PER_ESTIMATED
        want = self.pos - d
        pool = [f for f in here if f not in taken and cfg.probe_mix.get(f.category, 0.0) > 0
                and self.pos - self.last_seen.get(f.id, f.pos) >= lo / TRUE_PER_ESTIMATED]
        if not pool:
            return None
        best = min(pool, key=lambda f: abs(math.log((self.pos - self.last_seen.get(f.id, f.pos) + 50) / (d + 50))))
        seen = self.last_seen.get(best.id, best.pos)
        return best if abs(math.log((self.pos - seen + 50) / (self.pos - want + 50))) < MAX_AGE_MISS else None

    def _reobservable(self, f: _Fact) -> bool:
        """Whether the agent can look at ``f`` again now: a file line still in its file, the
        failing output of the bug still in the tree."""
        if f.category == "file":
            lines = self.ws.lines(f.path)
            if ARROW in f.text:   # a numbered line: only a read of that line shows it again
                return f.line <= len(lines) and f"{f.line:>6}{ARROW}{lines[f.line - 1]}" == f.text
            if f.line <= len(lines) and lines[f.line - 1].strip() == f.text:
                return True
            moved = next((i + 1 for i, x in enumerate(lines) if x.strip() == f.text), 0)   # lines added above it
            if moved:
                f.line = moved
            return bool(moved)
        if f.category == "error":
            return self.ws.bug is not None and self.ws.bug.id == f.bug and self.ws.attempt is None
        return False

    def _make_room(self, kinds: list[str], huge: list[bool]) -> None:
        """Last call before a probe whose needs are still to be looked at again: one of its tool calls
        (not an edit) does it."""
        for f in self.show:
            ok = (("read",) if ARROW in f.text else ("read", "grep")) if f.category == "file" else ("bash",)
            if any(k in ok for k in kinds):
                continue
            i = next((j for j, k in enumerate(kinds) if k != "edit"), None)
            if i is None:
                return
            self.owed[kinds[i]] = self.owed.get(kinds[i], 0) + 1   # given back later (the tool mix holds)
            self.owed[ok[0]] = self.owed.get(ok[0], 0) - 1
            kinds[i], huge[i] = ok[0], False
            self.stats["converted"] += 1

    def _uses(self, acts: list[_Act], final: bool) -> list[_Fact]:
        """Preferences and feedback that govern what this call does (needed here): each with chance
        ``preference_use_share``, at most one per call."""
        tags = set().union(*(a.tags for a in acts)) if acts else set()
        if final:
            tags.add("report")
        cutoff = self.cfg.probe_age_unseen.hi or math.inf
        cands = [f for f in self.facts if f.trigger and f.trigger in tags
                 and (f.session < self.session or self.pos - f.pos <= cutoff)]
        out = [cands[self.d.int(len(cands))]] if cands and self.rng.random() < self.cfg.preference_use_share else []
        task = self.task
        if task is not None and tags & {"fix", "attempt"} and self.rng.random() < self.cfg.fix_use_share:
            # an edit of the bug uses what the agent concluded about it and the failure it saw
            mine = [f for f in map(self._by_id, task.facts) if f.session == self.session]
            out += [f for f in mine if f.category == "decision"][-1:] + [f for f in mine if f.category == "error"][-1:]
        return out

    def _call(self, kinds: list[str], huge: list[bool], final: bool, in_span: bool,
              extra_decision: str | None = None) -> None:
        cfg = self.cfg
        self.file_due += self._file_due()
        burst = len(kinds) > 1 and all(huge)
        self.burst_i = self.d.int(len(HUGE_FILES))
        if self.task is not None:
            self.task.may_edit = self.task.seen_failure and self.task.read_source
        due = self.call >= self.next_probe
        if not in_span and self.prepared_for != self.next_probe and self.next_probe - self.call <= self.lead:
            self._prepare()
            self.prepared_for = self.next_probe
        probe_now = due and not in_span and self.goal is not None
        needs = list(self.prepared) if probe_now else []
        if self.show and self.next_probe - self.call == 1 and kinds:
            self._make_room(kinds, huge)
        acts = []
        for k, h in zip(kinds, huge, strict=True):
            before = len(self.show)
            act = self._act(k, h, burst)
            act.reshow = len(self.show) < before
            acts.append(act)
        acts.sort(key=lambda a: a.reshow)   # what the next call needs is looked at last (stable otherwise)
        if not in_span:
            for f in self._uses(acts, final):
                if f not in needs and len(needs) < cfg.probe_max_needs + 1:
                    needs.append(f)
                    probe_now = probe_now or self.goal is not None
        text, decision = self._text(acts, final)
        if extra_decision:
            text = extra_decision + "\n\n" + text
        if probe_now and needs:
            self.probes += 1
            self.events.append(tr.ProbeEvent(t=self.t, id=f"p{self.probes:05d}", needs=[f.id for f in needs]))
        if self.call >= self.next_probe and not in_span:
            self.stats["unshown"] = self.stats.get("unshown", 0) + len(self.show)
            self.stats["shown_needs"] = self.stats.get("shown_needs", 0) + len(self.prepared)
            self.next_probe = self._probe_gap()
            self.prepared = []
            self.show = []
            self.shown = []
        content: list = [tr.TextContent(text=text)]
        ids = []
        for a in acts:
            self.tool_id += 1
            tid = f"toolu_{self.tool_id:06d}"
            ids.append(tid)
            content.append(tr.ToolUseContent(id=tid, name=TOOL_NAMES[a.kind], input=a.input))
        self._emit(tr.AssistantEvent(t=self.t, content=content))
        if extra_decision:
            self._fact("decision", extra_decision)
        if decision:
            self._fact("decision", decision)
        if acts:
            gap = float(cfg.call_gap_s.sample(self.rng))
            self._tick(gap * 0.4)  # tools run; the model answers in the rest of the gap
            for tid, a in zip(ids, acts, strict=True):
                self._emit(tr.ToolResultEvent(t=self.t, tool_use_id=tid, content=a.out.text, is_error=a.out.is_error))
                for cat, ftext, where in a.plant:
                    if ftext in a.out.text:
                        self._fact(cat, ftext, **where)
            self._tick(gap * 0.6)
        self.call += 1

    # --- the user ---------------------------------------------------------------------------------------
    def _user(self, first: bool) -> None:
        d = self.d
        task = self.task
        ready = task is None or (task.done and self.ws.bug is None)
        new_task = first and ready or (ready and self.rng.random() < self.cfg.new_task_share)
        if new_task:
            task = self._new_task() or task
        parts: list[tuple[str, str | None, str]] = []
        kw = {}
        if task is not None:
            src = self.c.files[task.path]
            dl = F.def_line(src, *task.func)
            kw = {"test": task.test, "ticket": task.ticket, "func": task.func_name, "path": task.path,
                  "module": task.test_path, "sig": F.signature(src, dl) if dl else task.func_name}
        if first and task is not None:
            options = T.GOAL if new_task else T.RESUME
            goal = next((g.format(**kw) for g in (d.pick(options), *options) if g.format(**kw) not in self.texts),
                        f"Session {self.session + 1}: " + d.pick(options).format(**kw))
            parts.append((goal, "goal", ""))
        elif new_task and task is not None and not task.seen_failure:
            parts.append((d.pick(T.TASK).format(**kw), None, ""))
        for cat in self.pending_user:
            if task is None:
                break
            if cat == "constraint":
                parts.append((d.pick(T.CONSTRAINT).format(**kw), cat, ""))
            else:
                s = T.said(d, T.PREFERENCE if cat == "preference" else T.FEEDBACK, **kw)
                parts.append((s.text, cat, s.trigger))
        self.pending_user = []
        if not any(c is None or c == "goal" for _, c, _ in parts):
            parts.append((d.pick(T.FOLLOW_UP).format(**kw), None, ""))
        text = "\n\n".join(p for p, _, _ in parts)
        self._emit(tr.UserEvent(t=self.t, text=text))
        for p, cat, trig in parts:
            if cat is None:
                continue
            f = self._fact(cat, p, trigger=trig)
            if cat == "goal" and f is not None:
                self.goal = f

    # --- structure -----------------------------------------------------------------------------------
    def session_run(self, n_calls: int) -> None:
        cfg = self.cfg
        end = self.call + n_calls
        first = True
        while self.call < end:
            if not first:
                self._tick(cfg.user_gap_s.sample(self.rng))
            for cat in USER_CATEGORIES:
                per100 = cfg.facts.get(cat, 0.0)
                # user facts accrue with the calls since the last user message (Poisson rate per call)
                k = int(self.rng.poisson(per100 / 100.0 * max(1, self._since_user)))
                self.pending_user.extend([cat] * min(k, 2))
            self._since_user = 0
            self._user(first)
            first = False
            turn = max(1, min(int(round(cfg.calls_per_turn.sample(self.rng))), end - self.call))
            span_id, span_end = None, -1
            explore = turn >= 3 and cfg.subtask_share > 0 and self.rng.random() < cfg.subtask_share
            for k in range(turn):
                # an exploratory span opens a turn, or follows a pull that brought a new bug
                if explore or (span_id is None and self.pulled and turn - k >= 3 and cfg.subtask_share > 0
                               and self.rng.random() < cfg.subtask_share):
                    span_id = f"st{sum(isinstance(e, tr.SubtaskStart) for e in self.events) + 1:04d}"
                    span_end = k + max(2, min(int(round(cfg.subtask_calls.sample(self.rng))), turn - k - 1))
                    name = self.task.short_name if self.task else "main"
                    self.events.append(tr.SubtaskStart(t=self.t, id=span_id, description=f"Explore how {name}() is "
                                                       f"used across src/click and tests", isolated=False))
                explore = self.pulled = False
                in_span = span_id is not None and k < span_end
                final = k == turn - 1
                self._since_user += 1
                extra = self._conclusion() if span_id is not None and k == span_end else None
                if final:
                    self._call([], [], True, False, extra)
                else:
                    kinds, huge = self._kinds(in_span)
                    self._call(kinds, huge, False, in_span, extra)
                if span_id is not None and k == span_end - 1:
                    self.events.append(tr.SubtaskEnd(t=self.t, id=span_id, conclusion=self._summary()))
                elif span_id is not None and k == span_end:
                    span_id = None     # its conclusion is stated: another span may follow
            # (a span always closes: span_end <= turn - 1, so its end is emitted before the final call)

    _since_user = 0
    pulled = False
    file_due = 0
    burst_i = 0

    def _summary(self) -> str:
        task = self.task
        if task is None:
            return "Explored src/click; nothing specific to report."
        n = len(self.ws.matches(task.short_name, self.ws.scope("src/click") + self.ws.scope("tests")))
        return (f"`{task.short_name}` is defined in {task.path} (lines {task.func[0]}-{task.func[1]}) and appears in "
                f"{n} places in src/click and tests; the failing test is {task.test}.")

    def _conclusion(self) -> str:
        task = self.task
        if task is None:
            return ""
        n = len(self.ws.matches(task.short_name, self.ws.scope("src/click") + self.ws.scope("tests")))
        kw = {"func": task.func_name, "path": task.path, "pattern": task.short_name, "uses": n, "test": task.test}
        options = [c.format(**kw) for c in T.CONCLUSION]
        fresh = [c for c in options if c not in self.texts]
        return self.d.pick(fresh) if fresh else f"{self.d.pick(options)} (checked again after {self.call} calls)"


def generate(cfg: SynthConfig, seed: int | None = None, corpus: Corpus | None = None) -> tr.Trace:
    """The trace for ``cfg`` and ``seed`` (default: ``cfg.seed``); validated before it is returned."""
    seed = cfg.seed if seed is None else seed
    g = _Gen(cfg, seed, corpus)
    per = [cfg.calls // cfg.sessions + (1 if i < cfg.calls % cfg.sessions else 0) for i in range(cfg.sessions)]
    for s, n in enumerate(per):
        g.session = s
        g.goal = None
        g.prepared, g.show, g.prepared_for = [], [], -1   # a new launch: nothing prepared in the last one carries over
        g.session_from = g.pos   # and its context starts empty: a need reaches back within it
        if g.task is not None and g.task.done:
            g.task = None
        if cfg.sessions > 1:
            if s:
                g._tick(cfg.session_gap_s.sample(g.rng))
            g.events.append(tr.SessionStart(t=g.t, session=f"session-{s + 1:03d}", cwd=CWD))
        if n:
            g.session_run(n)
        if cfg.sessions > 1:
            g.events.append(tr.SessionEnd(t=g.t, session=f"session-{s + 1:03d}"))
    meta = {"generator": "ctxsim synth", "preset": cfg.name, "seed": seed, "read_tool": "Read",
            "calls": cfg.calls, "sessions": cfg.sessions,
            "corpus": f"{g.c.project} {g.c.version} ({g.c.provenance.get('license', '')})"}
    if cfg.seed_files:
        meta["files"] = T.memory_files(cfg.seed_memories)
    header = tr.Header(
        name=cfg.name, system=_system_prompt(g, cfg.system_chars), tools=list(TOOL_SPECS), usage="none",
        notes=[f"synthetic: ctxsim synth seed {seed}; sizes, tool mix and gaps fitted to ../shared/traces/real/; "
               f"content: the real files and recorded test runs of {g.c.project} {g.c.version} "
               f"(harness/synth/corpus/)"],
        meta=meta,
    )
    return tr.validate_events(header, g.events, name=f"<synth {cfg.name}>")


def _system_prompt(g: _Gen, n_chars: int) -> str:
    """The authored agent instructions, then the project's layout and README (real), cut to size."""
    layout = "\n".join(["# Project layout (git ls-files, abridged)", *[p for p in g.c.paths if "/" not in p or
                        p.startswith(("src/", "tests/test_"))]])
    readme = "# README.md\n" + g.c.files["README.md"].text if "README.md" in g.c.files else ""
    env = f"# Environment\nWorking directory: {CWD}\nPlatform: linux\nIs a git repository: yes\n"
    text = "\n".join([T.SYSTEM, env, layout, readme, "# pyproject.toml\n" + g.c.files["pyproject.toml"].text])
    if n_chars <= len(text):
        return text[:n_chars].rsplit("\n", 1)[0] if n_chars else ""
    return text


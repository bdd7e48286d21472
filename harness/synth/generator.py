"""The synthetic session generator: a :class:`SynthConfig` and a seed -> a valid trace (format v1).

Shape of a session, as in the real logs: a user message opens a turn; the agent makes a run of
model calls (calls per turn fitted), each with zero or more parallel tool calls (fitted), whose
results come back before the next call; the turn's last call answers in text. Sizes and gaps are
drawn from the fitted distributions; content comes from :mod:`harness.synth.content`.

Facts (:mod:`harness.synth.facts`) are planted where an agent meets them, each followed by its
``fact`` event; probes are placed before a model call and need facts introduced before it: the
session's goal often, otherwise mostly recent facts (recency-weighted) and some far back.

Everything random comes from one ``numpy.random.Generator`` seeded with the seed, consumed in a
fixed order, and the trace is written by the canonical writer: the same config and seed give the
same bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness import trace as tr
from harness.synth import content as C
from harness.synth.config import SynthConfig
from harness.synth.distributions import categorical
from harness.synth.facts import FactMaker

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
                                                               "output_mode": {"type": "string"}}, "required": ["pattern"]}),
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
USER_CATEGORIES = ("constraint", "preference", "feedback")  # planted in the next user message
EXPLORE_MIX = {"grep": 0.45, "read": 0.4, "glob": 0.15}     # tools of an exploratory span (modelling choice)
CWD = "/workspace/project"


@dataclass
class _Fact:
    id: str
    category: str
    call: int      # index of the model call at which it was introduced (global)
    session: int


class _Gen:
    def __init__(self, cfg: SynthConfig, seed: int) -> None:
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.d = C.Draw(self.rng)
        self.fm = FactMaker(self.d)
        self.events: list = []
        self.t = 0.0
        self.call = 0
        self.tool_id = 0
        self.facts: list[_Fact] = []
        self.pending_user: list[str] = []   # categories waiting for the next user message
        self.pending_calls: dict[str, int] = {}  # category -> count due at the next suitable call
        self.kinds, self.kind_p = categorical(cfg.tool_mix)
        self.par_n, self.par_p = categorical(cfg.parallel)
        self.next_probe = self._probe_gap()
        self.probes = 0
        self.session = 0
        self.goal: _Fact | None = None

    # --- helpers ---------------------------------------------------------------------------------
    def _probe_gap(self) -> int:
        return self.call + 1 + int(self.rng.geometric(1.0 / self.cfg.probe_every)) - 1

    def _tick(self, dt: float) -> None:
        self.t = round(self.t + float(dt), 3)

    def _fact(self, category: str, text: str) -> None:
        fid = f"f{len(self.facts) + 1:05d}"
        self.facts.append(_Fact(fid, category, self.call, self.session))
        self.events.append(tr.FactEvent(t=self.t, id=fid, category=category, text=text))

    def _plant(self, body: str, fact_line: str, min_pos: int = 0) -> str:
        """Insert ``fact_line`` as a whole line at a random line boundary at or after ``min_pos``."""
        lo = min(min_pos, len(body))
        starts = [i + 1 for i in range(lo, len(body)) if body[i] == "\n"] if len(body) - lo < 4_000 else None
        if starts is None:  # large body: probe a few random offsets for a newline (no full scan)
            for _ in range(20):
                j = body.find("\n", lo + self.d.int(max(1, len(body) - lo)))
                if j >= 0:
                    return body[: j + 1] + fact_line + "\n" + body[j + 1:]
            return body + "\n" + fact_line
        if not starts:
            return body + ("\n" if body else "") + fact_line
        j = starts[self.d.int(len(starts))]
        return body[:j] + fact_line + "\n" + body[j:]

    def _due(self) -> None:
        """Facts of each category fall due at a Poisson rate per call."""
        for cat, per100 in sorted(self.cfg.facts.items()):
            if per100 <= 0:
                continue
            k = int(self.rng.poisson(per100 / 100.0))
            if not k:
                continue
            if cat in USER_CATEGORIES:
                self.pending_user.extend([cat] * k)
            else:
                self.pending_calls[cat] = self.pending_calls.get(cat, 0) + k

    # --- probes ----------------------------------------------------------------------------------
    def _maybe_probe(self, in_subtask: bool) -> None:
        if self.call < self.next_probe or in_subtask or self.goal is None:
            return
        self.next_probe = self._probe_gap()
        cfg = self.cfg
        here = [f for f in self.facts if f.session == self.session and f.category != "goal"]
        earlier = [f for f in self.facts if f.session < self.session and f.category in cfg.cross_session_categories]
        needs: list[str] = []
        if self.rng.random() < cfg.probe_goal_share:
            needs.append(self.goal.id)
        k = int(self.rng.integers(1, cfg.probe_max_needs + 1)) - (1 if needs else 0)
        for _ in range(max(k, 0 if needs else 1)):
            pool = earlier if earlier and self.rng.random() < cfg.cross_session_share else here
            pool = [f for f in pool if f.id not in needs]
            if not pool:
                continue
            if self.rng.random() < cfg.probe_far_share:
                f = pool[int(self.rng.integers(len(pool)))]
            else:
                age = np.array([self.call - f.call for f in pool], dtype=float)
                w = np.exp(-age / cfg.probe_recent_calls)
                f = pool[int(self.rng.choice(len(pool), p=w / w.sum()))]
            needs.append(f.id)
        if not needs:
            needs.append(self.goal.id)
        self.probes += 1
        self.events.append(tr.ProbeEvent(t=self.t, id=f"p{self.probes:05d}", needs=needs))

    # --- content -------------------------------------------------------------------------------------
    def _result_size(self, kind: str, huge: bool) -> int:
        dist = self.cfg.huge_chars if huge else self.cfg.result_chars.get(kind) or self.cfg.result_chars["bash"]
        return max(1, int(dist.sample(self.rng)))

    def _user(self, first: bool) -> None:
        d = self.d
        parts: list[tuple[str, str | None]] = []
        if first:
            g = self.fm.goal()
            parts.append((g, "goal"))
        for cat in self.pending_user:
            parts.append((self.fm.make(cat), cat))
        self.pending_user = []
        ask = " ".join(d.sentence() for _ in range(1 + d.int(3)))
        text = "\n\n".join([p for p, _ in parts] + [ask])
        self.events.append(tr.UserEvent(t=self.t, text=text))
        for p, cat in parts:
            self._fact(cat, p)
            if cat == "goal":
                self.goal = self.facts[-1]

    def _assistant(self, kinds: list[str], final: bool, extra_text: str | None = None,
                   huge: list[bool] | None = None) -> None:
        cfg, d = self.cfg, self.d
        plant_decision = self.pending_calls.get("decision", 0) > 0
        text = C.prose(d, int(cfg.text_chars.sample(self.rng)))
        decision = None
        if plant_decision:
            self.pending_calls["decision"] -= 1
            decision = self.fm.decision()
            text = text + "\n\n" + decision
        if extra_text:
            text = extra_text + "\n\n" + text
        content: list = [tr.TextContent(text=text)]
        uses = []
        for k in kinds:
            self.tool_id += 1
            path = d.path(".py")
            tid = f"toolu_{self.tool_id:06d}"
            size = int(cfg.input_chars[k].sample(self.rng)) if k in cfg.input_chars else 100
            uses.append((tid, k, path))
            content.append(tr.ToolUseContent(id=tid, name=TOOL_NAMES[k], input=C.tool_input(d, k, size, path)))
        self.events.append(tr.AssistantEvent(t=self.t, content=content))
        if decision:
            self._fact("decision", decision)
        if extra_text and extra_text.startswith("Decision:"):
            self._fact("decision", extra_text)
        if not uses:
            return
        gap = float(cfg.call_gap_s.sample(self.rng))
        self._tick(gap * 0.4)  # tools run; the model answers in the rest of the gap
        huge = huge or [False] * len(uses)
        sizes = [self._result_size(k, h) for (_, k, _), h in zip(uses, huge, strict=True)]
        if len(uses) > 1 and all(huge) and sum(sizes) < cfg.burst_min_total:  # a burst must exceed the budget
            scale = cfg.burst_min_total / sum(sizes)
            sizes = [int(math.ceil(s * scale)) + 1 for s in sizes]
        want_error = self.pending_calls.get("error", 0) > 0
        want_file = self.pending_calls.get("file", 0) > 0
        file_slot = None
        if want_file:
            reads = [i for i, (_, k, _) in enumerate(uses) if k == "read"]
            big = [i for i in reads if huge[i]]
            if big and self.rng.random() < cfg.file_facts_in_huge:
                file_slot = big[self.d.int(len(big))]
            elif reads:
                file_slot = reads[self.d.int(len(reads))]
        if file_slot is None and cfg.huge_file_fact_share > 0:
            big = [i for i, (_, k, _) in enumerate(uses) if k == "read" and huge[i]]
            if big and self.rng.random() < cfg.huge_file_fact_share:
                file_slot = big[self.d.int(len(big))]
        error_slot = next((i for i, (_, k, _) in enumerate(uses) if k == "bash"), None) if want_error else None
        for i, ((tid, k, path), size) in enumerate(zip(uses, sizes, strict=True)):
            body = C.tool_result(d, k, size, path)
            fact = None
            is_error = False
            if i == file_slot:
                fact = ("file", self.fm.file())
                min_pos = 2_500 if huge[i] else 0  # past a spill placeholder's 2,000-char preview (N-SPILL-1)
                body = self._plant(body, f"{self.d.int(900) + 1:>6}\t    {fact[1]}  # {d.sentence(3, 7)}", min_pos)
                if self.pending_calls.get("file", 0) > 0:
                    self.pending_calls["file"] -= 1
            elif i == error_slot:
                fact = ("error", self.fm.error())
                body = self._plant(C.test_log(d, size), f"E       {fact[1]}")
                is_error = True
                self.pending_calls["error"] -= 1
            self.events.append(tr.ToolResultEvent(t=self.t, tool_use_id=tid, content=body, is_error=is_error))
            if fact:
                self._fact(*fact)
        self._tick(gap * 0.6)

    def _tool_kinds(self, explore: bool) -> tuple[list[str], list[bool]]:
        cfg = self.cfg
        if not explore and cfg.burst_share and self.rng.random() < cfg.burst_share:
            return ["read"] * cfg.burst_tools, [True] * cfg.burst_tools
        n = int(self.par_n[int(self.rng.choice(len(self.par_n), p=self.par_p))])
        if explore:
            names, p = categorical(EXPLORE_MIX)
            kinds = [names[int(i)] for i in self.rng.choice(len(names), size=n, p=p)]
        else:
            kinds = [self.kinds[int(i)] for i in self.rng.choice(len(self.kinds), size=n, p=self.kind_p)]
        # a due error needs a test run, a due file detail a file read: the agent's next step provides it
        if self.pending_calls.get("error", 0) > 0 and "bash" not in kinds:
            kinds[0] = "bash"
        if self.pending_calls.get("file", 0) > 0 and "read" not in kinds:
            kinds[-1] = "read"
        huge = [k in ("read", "bash") and cfg.huge_share > 0 and self.rng.random() < cfg.huge_share for k in kinds]
        return kinds, huge

    # --- structure -----------------------------------------------------------------------------------
    def session_run(self, n_calls: int) -> None:
        cfg = self.cfg
        end = self.call + n_calls
        first = True
        while self.call < end:
            if not first:
                self._tick(cfg.user_gap_s.sample(self.rng))
            self._user(first)
            first = False
            turn = max(1, min(int(round(cfg.calls_per_turn.sample(self.rng))), end - self.call))
            explore = turn >= 3 and cfg.subtask_share > 0 and self.rng.random() < cfg.subtask_share
            span_id = None
            if explore:
                span = max(2, min(int(round(cfg.subtask_calls.sample(self.rng))), turn - 1))
                span_id = f"st{len([e for e in self.events if isinstance(e, tr.SubtaskStart)]) + 1:04d}"
                self.events.append(tr.SubtaskStart(t=self.t, id=span_id, description=f"Explore how {self.d.ident()}() "
                                                   f"is used across {self.d.pick(C.DIRS)}/", isolated=False))
            for k in range(turn):
                in_span = span_id is not None and k < span
                final = k == turn - 1
                self._due()
                self._maybe_probe(in_span)
                if final:
                    extra = None
                    if span_id is not None and k == span:  # the span's conclusion, stated right after it
                        extra = self.fm.decision()
                    self._assistant([], True, extra)
                    self.call += 1
                    continue
                kinds, huge = self._tool_kinds(in_span)
                extra = None
                if span_id is not None and k == span:
                    extra = self.fm.decision()
                self._assistant(kinds, False, extra, huge)
                self.call += 1
                if span_id is not None and k == span - 1:
                    concl = self._peek_conclusion()
                    self.events.append(tr.SubtaskEnd(t=self.t, id=span_id, conclusion=concl))
            # (a span always closes: span <= turn - 1, so its end is emitted before the final call)

    def _peek_conclusion(self) -> str:
        return f"Explored {self.d.int(40) + 5} files; the relevant code paths are summarised in the next message."


def generate(cfg: SynthConfig, seed: int | None = None) -> tr.Trace:
    """The trace for ``cfg`` and ``seed`` (default: ``cfg.seed``); validated before it is returned."""
    seed = cfg.seed if seed is None else seed
    g = _Gen(cfg, seed)
    per = [cfg.calls // cfg.sessions + (1 if i < cfg.calls % cfg.sessions else 0) for i in range(cfg.sessions)]
    for s, n in enumerate(per):
        g.session = s
        g.goal = None
        if cfg.sessions > 1:
            if s:
                g._tick(cfg.session_gap_s.sample(g.rng))
            g.events.append(tr.SessionStart(t=g.t, session=f"session-{s + 1:03d}", cwd=CWD))
        if n:
            g.session_run(n)
        if cfg.sessions > 1:
            g.events.append(tr.SessionEnd(t=g.t, session=f"session-{s + 1:03d}"))
    header = tr.Header(
        name=cfg.name, system=_system_prompt(C.Draw(np.random.default_rng(seed + 1)), cfg.system_chars),
        tools=list(TOOL_SPECS), usage="none",
        notes=[f"synthetic: ctxsim synth seed {seed}; sizes, tool mix and gaps fitted to ../shared/traces/real/"],
        meta={"generator": "ctxsim synth", "preset": cfg.name, "seed": seed, "read_tool": "Read",
              "calls": cfg.calls, "sessions": cfg.sessions},
    )
    return tr.validate_events(header, g.events, name=f"<synth {cfg.name}>")


def _system_prompt(d: C.Draw, n_chars: int) -> str:
    head = ("You are a coding agent working in the user's repository at /workspace/project. Use the tools to read, "
            "search, edit and run code. Keep answers short; cite files with their paths.\n\n# Conventions\n")
    return (head + C.prose(d, max(0, n_chars - len(head))))[:n_chars] if n_chars else ""

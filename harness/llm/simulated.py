"""The simulated LLM backend: deterministic, seeded, with real output text.

It stands in for the model in side calls. It may look at the trace's facts: it is part of the
simulated world (the model), not of the strategy, which never sees them.

Summaries (kind ``summary``)
----------------------------
Built from what the request really holds: the user's messages, the files the agent touched (with
excerpts of the latest reads), the errors it met, its own recent reasoning, in the sections the
strategy asked for (``CallSpec.sections``; Claude Code's nine by default). Of the trace's facts present
in the summarised messages, each survives with the probability of the survival model fitted on real
compactions (:mod:`ctxsim.harness.llm.survival`, ``harness/data/summary_survival.json``): by the fact's kind, how
often the assistant itself used it, how often it is mentioned, whether the user typed it and how old
its last mention is. So a name the agent kept using survives, a path read once and never used is
lost, and what the user said is kept (as Claude Code's "All user messages" section keeps it).

* ``survival`` (``SimParams``) — per-category fixed rates that replace the model for that category
  (a sweep axis, or a live ``ctxsim calibrate`` file: ``SimParams(calibration=PATH)``).
* Length — ``chars_per_token`` × the input tokens (fitted on the same compactions: 0.087 characters
  per input token, 13–16k characters from 142–167k tokens), at least ``min_chars``, at most the call's
  ``max_output_tokens``.
* Capacity — the surviving facts may take at most ``fact_share`` of the summary's characters; beyond
  it the least likely survivors are dropped first (assumed).

Survivors are copied verbatim (so retention can find them); lines of material that hold a fact are
left out (a fact enters the summary only through its survival draw). A fact already in an earlier
summary is drawn again at the next compaction (there it is one mention in a message nobody typed, but a
fact the user typed stays the user's: the summary restates the user's requests and messages, peers.md),
so losses compound over repeated compactions. Counts come from the engine's per-block token counts
(``message_tokens``) and what each block holds is memoised by block identity: a summary never
re-tokenises its input (issue #21).

Memory side calls (``memory_extract``, ``memory_select``, ``memory_consolidate``)
---------------------------------------------------------------------------------
Answered in the formats NovaCode's memory layer parses (strategies/novacode/memory.py): extraction
keeps each fact present in the dialogue with probability ``extract[category]`` as one
``<memory>`` block whose body is the fact verbatim; selection ranks the candidates by word overlap
with the query, user/feedback memories always eligible; consolidation merges memories with identical
bodies.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from ctxsim.harness.llm.services import (
    JUDGE,
    MEMORY_CONSOLIDATE,
    MEMORY_EXTRACT,
    MEMORY_SELECT,
    SUMMARY,
    VERIFY,
    BackendReply,
    CallSpec,
)
from ctxsim.harness.model.conversation import Block, Message, Request

# Chance that memory extraction writes down a fact said in the dialogue (modelling assumption):
# preferences and feedback are what auto memory exists for; project decisions and constraints often;
# the task's goal rarely (it is this session's, not the project's); file details and errors seldom
# (they are in the code and logs).
DEFAULT_EXTRACT = {"preference": 0.9, "feedback": 0.9, "constraint": 0.7, "decision": 0.6, "goal": 0.3,
                   "file": 0.15, "error": 0.1,
                   # items derived from real sessions: reference details, seldom a memory (assumed)
                   "path": 0.15, "identifier": 0.1, "hash": 0.05, "ticket": 0.3, "command": 0.2}
MEMORY_TYPE = {"preference": "user", "feedback": "feedback", "constraint": "project", "decision": "project",
               "goal": "project", "file": "reference", "error": "reference", "path": "reference",
               "identifier": "reference", "hash": "reference", "ticket": "project", "command": "reference"}
DEFAULT_SECTIONS = ("Primary request and intent", "Key technical concepts", "Files and code sections",
                    "Errors and fixes", "Problem solving", "All user messages", "Pending tasks", "Current work",
                    "Optional next step")  # Claude Code's summary sections (peers.md)
# where a surviving fact goes: the first section whose name holds one of these words
FACT_ROUTES = {
    "goal": ("request", "intent", "goal", "plan"),
    "constraint": ("constraint", "request", "intent", "goal", "plan", "decision"),
    "decision": ("decision", "knowledge", "concept", "problem", "fact", "progress"),
    "error": ("error", "fix", "notes"),
    "file": ("file", "code", "artifact", "reference", "notes"),
    "preference": ("preference", "user message", "constraint", "feedback", "user"),
    "feedback": ("feedback", "user message", "preference", "user"),
}
SUMMARY_OPEN, SUMMARY_CLOSE = "<summary>", "</summary>"
_PATH = re.compile(r"(?:/[\w.\-]+){2,}")
_WORD = re.compile(r"[a-z0-9]{3,}")


MAX_WHOLE = 10_000_000   # min_chars, excerpt_lines: far beyond any summary (assumed bound)


@dataclass
class SimParams:
    """The simulated summariser's and memory model's constants; each names its source (the fitted
    ones come from ``harness/data/summary_survival.json``) or says assumed (:meth:`assumptions`)."""

    # per-category fixed survival rates replacing the fitted model for those categories (none by default)
    survival: dict[str, float] = field(default_factory=dict)
    survival_file: str | None = None  # a `ctxsim calibrate-summariser` file (default: the committed one)
    chars_per_token: float | None = None  # summary characters per input token (default: the file's fit)
    min_chars: int = 2_400  # shortest summary (assumed: about 600 tokens)
    fact_share: float = 0.5  # share of the summary's characters the surviving facts may take (assumed)
    extract: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_EXTRACT))
    # a summary's excerpt of a file read keeps this many lines (assumed)
    excerpt_lines: int = 8
    calibration: str | None = None  # a `ctxsim calibrate` file: its measured survival rates replace the model

    def __post_init__(self) -> None:
        from ctxsim.harness.llm import survival as sv

        self._check_numbers()
        for name in ("survival", "extract"):
            bad = {k: v for k, v in getattr(self, name).items() if not 0.0 <= v <= 1.0}
            if bad:
                raise ValueError(f"SimParams.{name}: probabilities must be in [0, 1], got {bad}")
        if not 0 < self.fact_share <= 1 or self.min_chars < 0:
            raise ValueError("SimParams: fact_share must be in (0, 1], min_chars >= 0")
        if self.calibration:
            self.survival = {**self.survival, **load_calibration(self.calibration)}
        data = sv.load(self.survival_file) if self.survival_file else None
        self.model = sv.SurvivalModel.from_dict(data["model"]) if data else sv.default_model()
        if self.chars_per_token is None:
            self.chars_per_token = float((data["length"] if data else sv.default_length())["chars_per_input_token"])
        if not 0 < self.chars_per_token <= 10:
            raise ValueError(f"SimParams.chars_per_token: must be in (0, 10], got {self.chars_per_token}")

    def _check_numbers(self) -> None:
        """Every number is a finite one of its kind (issue 44: a NaN was explained as a bound it
        failed, min_chars=1e309 ran), whole numbers within MAX_WHOLE (assumed bound)."""
        def real(v: Any) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        for name in ("chars_per_token", "fact_share"):
            v = getattr(self, name)
            if v is not None and not real(v):
                raise ValueError(f"SimParams.{name}: {v!r} is not a finite number")
        for name in ("min_chars", "excerpt_lines"):
            v = getattr(self, name)
            if isinstance(v, float) and v.is_integer():
                v = int(v)
                setattr(self, name, v)
            if not (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_WHOLE):
                raise ValueError(f"SimParams.{name}: {v!r} is not a whole number in 0..{MAX_WHOLE:,}")
        for name in ("survival", "extract"):
            d = getattr(self, name)
            if not isinstance(d, dict):
                raise ValueError(f"SimParams.{name}: a table of probabilities, got {d!r}")
            bad = {k: v for k, v in d.items() if not real(v)}
            if bad:
                raise ValueError(f"SimParams.{name}: not finite numbers: {bad}")

    def assumptions(self) -> list[tuple[str, Any, str]]:
        """(name, value, source) of every constant, for the report's assumptions."""
        src = self.survival_file or "harness/data/summary_survival.json (ctxsim calibrate-summariser)"
        m = self.model
        out = [("summariser.survival_model", f"intercept {m.intercept:+.2f}, "
                + ", ".join(f"{k} {v:+.2f}" for k, v in m.coef.items()), f"fitted on real compactions: {src}"),
               ("summariser.chars_per_token", round(self.chars_per_token, 4), f"fitted: {src}"),
               ("summariser.min_chars", self.min_chars, "assumed"),
               ("summariser.fact_share", self.fact_share, "assumed"),
               ("summariser.planted_kinds", "file→identifier, constraint/preference/feedback→goal", "assumed"),
               ("summariser.excerpt_lines", self.excerpt_lines, "assumed")]
        if self.survival:
            out.append(("summariser.survival", dict(self.survival), self.calibration or "set for this run"))
        return out


def load_calibration(path: str | Path) -> dict[str, float]:
    """Per-category survival rates from a ``ctxsim calibrate`` file (null rates: not measured, skipped)."""
    p = Path(path)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: cannot read calibration: {e}") from None
    if d.get("format") != "ctxsim-summary-calibration" or d.get("version") != 1:
        raise ValueError(f"{p}: not a ctxsim-summary-calibration v1 file")
    out = {}
    for cat, row in (d.get("survival") or {}).items():
        rate = row.get("rate") if isinstance(row, dict) else None
        if rate is not None:
            if not 0.0 <= float(rate) <= 1.0:
                raise ValueError(f"{p}: survival.{cat}.rate {rate} outside [0, 1]")
            out[cat] = float(rate)
    return out


@dataclass
class _Seen:
    """What the summariser reads from the summarised messages."""

    users: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    reads: list[tuple[str, str]] = field(default_factory=list)  # (path, result text) of file reads
    errors: list[str] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    tools: dict[str, int] = field(default_factory=dict)


class SimulatedLLM:
    name = "simulated"

    def __init__(self, facts: dict, tokenizer_count: Callable[[str], int], seed: int = 0,
                 params: SimParams | dict[str, Any] | None = None, run_dir: str | None = None,
                 message_tokens: Callable[[Message], int] | None = None) -> None:
        self.facts = facts
        self.count = tokenizer_count
        self.seed = seed
        self.params = params if isinstance(params, SimParams) else SimParams(**(params or {}))
        self.run_dir = run_dir
        # the engine's per-message count (per-block counts cached on the blocks); else counted here once
        self._message_tokens = message_tokens
        self._block: dict[int, list] = {}  # id -> [block, facts present (None: not asked yet), masked text]
        self._key: dict[int, tuple[Message, bytes]] = {}  # id -> (msg, digest with the run dir masked)
        self._msg: dict[int, tuple[Message, str, int, frozenset[str]]] = {}  # id -> (msg, text, tokens, facts)
        self._prefix: dict[tuple[int, int], tuple[Any, Any, int]] = {}  # (system, tools) -> tokens
        self._matcher = None  # the facts compiled into one search (ctxsim.harness.model.textmatch), on first use
        # facts a summary took from a message the user typed: in the next summary's input they sit in
        # that summary, and they are still the user's (the summary carries "Primary request and
        # intent" and "All user messages": peers.md, Claude Code's summary sections)
        self._from_user: set[str] = set()

    def learn(self, facts: dict) -> None:
        """Facts a trace fed a chunk at a time brings in (the property kit's Stepper): added to those known, and what
        was read of the blocks before them read again (a whole replay knows every fact from the start)."""
        new = {fid: f for fid, f in facts.items() if fid not in self.facts}
        if new:
            self.facts.update(new)
            self._matcher = None
            self._block.clear()   # the facts each block and message holds (a digest of the text holds none)
            self._msg.clear()

    def _masked(self, b: Block) -> list:
        """The block's cache entry, ``[block, facts present or None, payload with the run dir masked]``: the
        masked text once per block object, the facts only when asked (:meth:`_block_info`). A side call's
        prompt is hashed for its draw and never searched for facts."""
        hit = self._block.get(id(b))
        if hit is None or hit[0] is not b:
            text = b.payload
            hit = [b, None, text.replace(self.run_dir, "<run>") if self.run_dir else text]
            self._block[id(b)] = hit
        return hit

    def _block_info(self, b: Block) -> tuple[frozenset[str], str]:
        """Facts present in a block and its payload with the run dir masked, once per block object."""
        hit = self._masked(b)
        if hit[1] is None:
            hit[1] = self._facts_matcher().in_block(b)
        return hit[1], hit[2]

    def _facts_matcher(self):
        """The facts compiled into one search: a text is read once, whatever the number of facts."""
        if self._matcher is None:
            from ctxsim.harness.model.textmatch import matcher

            self._matcher = matcher({fid: f.text for fid, f in self.facts.items()})
        return self._matcher

    def _facts_in(self, text: str) -> frozenset[str]:
        """The facts whose text occurs in ``text``."""
        return self._facts_matcher().present(text)

    def _digest(self, m: Message) -> bytes:
        """The message's role and text with the run dir masked, hashed once per message object."""
        hit = self._key.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        text = m.role + "\x00" + "\n".join(self._masked(b)[2] for b in m.blocks)
        d = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        self._key[id(m)] = (m, d)
        return d

    def _rng(self, request: Request, spec: CallSpec) -> np.random.Generator:
        """A generator per call, keyed by what is asked (not by call order: replays agree) and not
        by where the run's files are: spill and transcript paths name the run directory, whose
        number depends on what else runs on the machine, and must not change the draw."""
        h = hashlib.blake2b(digest_size=8)
        for m in request.messages:
            h.update(self._digest(m))
        h.update(spec.kind.encode() + spec.instructions.encode() + str(self.seed).encode())
        return np.random.default_rng(int.from_bytes(h.digest(), "little"))

    def _info(self, m: Message) -> tuple[str, int, frozenset[str]]:
        """Text, token count and facts present, once per message object (facts and counts per block)."""
        hit = self._msg.get(id(m))
        if hit is None or hit[0] is not m:
            text = m.text
            present = frozenset().union(*(self._block_info(b)[0] for b in m.blocks)) if m.blocks else frozenset()
            tokens = self._message_tokens(m) if self._message_tokens else self.count(text)
            hit = (m, text, tokens, present)
            self._msg[id(m)] = hit
        return hit[1], hit[2], hit[3]

    def _prefix_tokens(self, request: Request) -> int:
        """Tokens of the request's system prompt and tools, counted once per object."""
        key = (id(request.system), id(request.tools))
        hit = self._prefix.get(key)
        if hit is None or hit[0] is not request.system or hit[1] is not request.tools:
            n = self.count(request.system.text) + request.system.opaque_tokens + \
                sum(self.count(t.payload) for t in request.tools.tools)
            hit = (request.system, request.tools, n)
            self._prefix[key] = hit
        return hit[2]

    def respond(self, request: Request, spec: CallSpec) -> BackendReply:
        expected = spec.params.get("expected_output")
        if isinstance(expected, str):
            # an answer the caller models itself (the todo list of a TodoWrite call, a delegation's
            # prompt, the summary the log holds for a recorded compaction): answered with it, whatever
            # the kind, so its output is billed at its real size
            return BackendReply(expected)
        if spec.kind == SUMMARY:
            return BackendReply(self.summarize(request, spec))
        if spec.kind == VERIFY:
            return BackendReply("The summary is consistent with the conversation.")
        if spec.kind == JUDGE:
            return BackendReply(self.judge(request, spec))
        if spec.kind == MEMORY_EXTRACT:
            return BackendReply(self.extract(request, spec))
        if spec.kind == MEMORY_SELECT:
            return BackendReply(self.select(request, spec))
        if spec.kind == MEMORY_CONSOLIDATE:
            return BackendReply(self.consolidate(request, spec))
        return BackendReply(self.generic(request, spec))

    # --- summaries -------------------------------------------------------------------------------
    def survival(self, msgs: list[Message]) -> dict[str, float]:
        """Survival probability of each fact present in ``msgs`` (the summarised messages)."""
        from ctxsim.harness.llm.survival import features_all

        p = self.params
        table = []
        for m in msgs:
            _, tok, present = self._info(m)
            typed = m.role == "user" and not m.meta.get("origin") and not m.meta.get("meta_record") \
                and any(b.type == "text" for b in m.blocks)
            table.append((m.role, typed, tok, present))
        fids = sorted(set().union(*(t[3] for t in table)) if table else ())
        modelled = {fid: self.facts[fid].category for fid in fids if p.survival.get(self.facts[fid].category) is None}
        feats = features_all(table, modelled)
        out = {}
        for fid in fids:
            fixed = p.survival.get(self.facts[fid].category)
            if fixed is not None:
                out[fid] = fixed
                continue
            f = feats[fid]
            if f.from_user:
                self._from_user.add(fid)
            elif fid in self._from_user:   # the user's, restated by an earlier summary
                f = replace(f, from_user=True)
            out[fid] = p.model.p(f)
        return out

    def summarize(self, request: Request, spec: CallSpec) -> str:
        p = self.params
        rng = self._rng(request, spec)
        msgs = list(request.messages)
        n = spec.params.get("summarize_messages")
        if isinstance(n, int) and 0 < n <= len(msgs):
            msgs = msgs[:n]  # the strategy keeps the rest verbatim: only the head is summarised
        # the length is fitted per token of the whole context (system and tools included), as the
        # recorded pre-compaction size counts it
        input_tokens = sum(self._info(m)[1] for m in msgs) + self._prefix_tokens(request)
        target = max(p.min_chars, int(p.chars_per_token * input_tokens))
        probs = self.survival(msgs)
        pres = [self.facts[f] for f in probs]
        draws = rng.random(len(pres))
        kept = [(u / max(probs[f.id], 1e-12), f) for f, u in zip(pres, draws, strict=True) if u < probs[f.id]]
        # capacity: the least likely survivors go first when the facts would take too much of the summary
        kept.sort(key=lambda x: (x[0], x[1].id))
        room, chosen = p.fact_share * target, []
        for _, f in kept:
            if len(f.text) + 3 <= room:
                chosen.append(f)
                room -= len(f.text) + 3
        kept_f = sorted(chosen, key=lambda f: f.id)
        fact_texts = [f.text for f in pres]
        sections = tuple(spec.sections) or DEFAULT_SECTIONS
        seen = self._read(msgs)
        body: dict[str, list[str]] = {s: [] for s in sections}
        for f in kept_f:
            body[_route(f.category, sections)].append(f.text)
        material = self._material(seen, sections, p.excerpt_lines)
        # facts first (protected), then material round-robin over the sections until the target length
        used = len(SUMMARY_OPEN) + len(SUMMARY_CLOSE) + sum(len(s) + 4 for s in sections) + \
            sum(len(f.text) + 3 for f in kept_f)
        # facts enter only through the survival draw (a survivor once, in its section): in material,
        # every fact's text is elided ("…"), longest first
        elided = sorted(fact_texts, key=len, reverse=True)
        elide = _elider(elided)
        queues = {s: [elide(x) for x in material.get(s, [])] for s in sections}
        placed: set[str] = set()  # a line of material goes to one section only
        progress = True
        while used < target and progress:
            progress = False
            for s in sections:
                while queues[s] and queues[s][0] in placed:
                    queues[s].pop(0)
                if queues[s] and used < target:
                    line = queues[s].pop(0)
                    placed.add(line)
                    cost = len(line) + 3
                    if used + cost > target:
                        queues[s] = []
                        continue
                    body[s].append(line)
                    used += cost
                    progress = True
        lines = [SUMMARY_OPEN]
        for s in sections:
            lines.append(f"## {s}")
            lines.extend(f"- {x}" if "\n" not in x else x for x in body[s] if x)
        lines.append(SUMMARY_CLOSE)
        return self._fit("\n".join(lines), spec.max_output_tokens, protect=[f.text for f in kept_f])

    def _read(self, msgs: list[Message]) -> _Seen:
        s = _Seen()
        uses: dict[str, tuple[str, str]] = {}  # tool_use id -> (tool name, path)
        for m in msgs:
            origin = m.meta.get("origin")
            for b in m.blocks:
                if b.type == "text" and m.role == "user" and not origin and b.text.strip():
                    s.users.append(b.text.strip())
                elif b.type == "text" and m.role == "assistant" and b.text.strip():
                    s.thoughts.extend(p.strip().split("\n")[0][:300] for p in b.text.split("\n\n") if p.strip())
                elif b.type == "tool_use":
                    s.tools[b.name or "?"] = s.tools.get(b.name or "?", 0) + 1
                    path = next((v for k, v in (b.input or {}).items()
                                 if isinstance(v, str) and k in ("file_path", "path") and _PATH.fullmatch(v.strip())), "")
                    if path and path not in s.files:
                        s.files.append(path)
                    cmd = next((v for k, v in (b.input or {}).items() if k in ("command", "cmd") and isinstance(v, str)), "")
                    if cmd.strip():
                        s.commands.append(f"Ran `{cmd.strip().splitlines()[0][:200]}`")
                    uses[b.id or ""] = (b.name or "", path)
                elif b.type == "tool_result":
                    name, path = uses.get(b.id or "", ("", ""))
                    if b.is_error and b.text.strip():
                        err = [ln.strip() for ln in b.text.splitlines() if ln.lstrip().startswith(("E ", "Error", "Traceback"))]
                        s.errors.append((err[-1] if err else b.text.strip().splitlines()[0])[:300])
                    elif name == "Read" and path:
                        s.reads.append((path, b.text))
        return s

    def _material(self, seen: _Seen, sections: tuple[str, ...], excerpt_lines: int) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for sec in sections:
            low = sec.lower()
            if "user message" in low or "task" in low and "pending" not in low:
                out[sec] = [u[:600] for u in seen.users]
            elif "file" in low or "code" in low or "artifact" in low:
                lines = [f"{f}" for f in reversed(seen.files[-40:])]
                for path, text in reversed(seen.reads):
                    excerpt = "\n".join(text.splitlines()[:excerpt_lines])
                    lines.append(f"{path}:\n```\n{excerpt}\n```")
                out[sec] = lines
            elif "error" in low:
                out[sec] = list(reversed(seen.errors))
            elif "request" in low or "intent" in low or "goal" in low or "plan" in low:
                out[sec] = [u[:400] for u in seen.users[:1]]
            elif any(w in low for w in ("current", "recent", "next", "pending", "state")):
                out[sec] = ([f"Last request: {seen.users[-1][:400]}"] if seen.users else []) + \
                           [f"Latest step: {t}" for t in reversed(seen.thoughts[-3:])] + \
                           [f"Tools used so far: {json.dumps(seen.tools, sort_keys=True)}"]
            else:  # concepts, problem solving, decisions, knowledge: the newest reasoning and steps first
                out[sec] = [x for pair in zip(reversed(seen.thoughts), reversed(seen.commands)) for x in pair] + \
                    list(reversed(seen.thoughts[:max(0, len(seen.thoughts) - len(seen.commands))])) + \
                    list(reversed(seen.commands[:max(0, len(seen.commands) - len(seen.thoughts))]))
        return out

    def _fit(self, text: str, target: int, protect: list[str]) -> str:
        """Cut to ``target`` tokens, dropping unprotected lines from the end first."""
        if self.count(text) <= target:
            return text
        lines = text.splitlines()
        keep = [ln for ln in lines if any(p in ln for p in protect) or ln.startswith(("##", "<"))]
        out = "\n".join(keep)
        while self.count(out) > target and keep:
            keep.pop(len(keep) // 2)
            out = "\n".join(keep)
        return out

    # --- memory side calls ----------------------------------------------------------------------
    def extract(self, request: Request, spec: CallSpec) -> str:
        """N-MEM-4 extraction: facts said in the dialogue, kept with probability ``extract[category]``."""
        whole = "\n".join(m.text for m in request.messages)
        m = re.search(r"<dialogue>\n?(.*?)</dialogue>", whole, re.S)
        dialogue = m.group(1) if m else whole
        existing = set(spec.params.get("existing") or [])
        rng = self._rng(request, spec)
        blocks = []
        for fid in sorted(self._facts_in(dialogue)):  # the facts said in it, in id order
            f = self.facts[fid]
            u = rng.random()
            name = memory_name(f)
            if name in existing or u >= self.params.extract.get(f.category, 0.0):
                continue
            blocks.append(f"<memory>\n---\nname: {name}\ndescription: {_one_line(f.text)[:100]}\n"
                          f"type: {MEMORY_TYPE.get(f.category, 'project')}\n---\n{f.text}\n</memory>")
        return "\n".join(blocks) if blocks else "NO_MEMORIES"

    def select(self, request: Request, spec: CallSpec) -> str:
        """N-MEM-5 selection: a JSON array of at most ``max`` candidate file names."""
        whole = "\n".join(m.text for m in request.messages)
        k = int(spec.params.get("max", 5))
        query = str(spec.params.get("query") or "")
        cands = list(spec.params.get("candidates") or [])
        lines = {}
        for ln in whole.splitlines():
            mm = re.match(r"- (\S+\.md) \[(\w+)\] (.*)", ln)
            if mm:
                lines[mm.group(1)] = (mm.group(2), mm.group(3))
        if not cands:
            cands = list(lines)
        q = set(_WORD.findall(query.lower()))
        scored = []
        for i, c in enumerate(cands):
            typ, desc = lines.get(c, ("", ""))
            overlap = len(q & set(_WORD.findall((c + " " + desc).lower())))
            always = typ in ("user", "feedback")
            if overlap or always:
                scored.append((-(overlap + (1 if always else 0)), i, c))
        return json.dumps([c for _, _, c in sorted(scored)[:k]])

    def consolidate(self, request: Request, spec: CallSpec) -> str:
        """N-MEM-7 consolidation: memories with identical bodies are merged into the first."""
        whole = "\n".join(m.text for m in request.messages)
        files = re.findall(r'<file name="([^"]+)" type="[^"]*">\n(.*?)</file>', whole, re.S)
        by_body: dict[str, list[tuple[str, str]]] = {}
        for name, text in files:
            parts = text.split("---", 2)
            body = parts[2].strip() if len(parts) == 3 else text.strip()
            by_body.setdefault(" ".join(body.split()), []).append((name, text.strip()))
        out = []
        for group in by_body.values():
            if len(group) > 1:
                out.append("MERGE " + " ".join(n for n, _ in group))
                out.append(f"<memory>\n{group[0][1]}\n</memory>")
        return "\n".join(out) if out else "NO_CHANGES"

    # --- other kinds ----------------------------------------------------------------------------
    def judge(self, request: Request, spec: CallSpec) -> str:
        fact = spec.params.get("fact", "")
        whole = "\n".join(m.text for m in request.messages)
        return "yes" if fact and fact in whole else "no"

    def generic(self, request: Request, spec: CallSpec) -> str:
        """Any other kind (one with ``spec.params["expected_output"]`` is answered with it: :meth:`respond`)."""
        last = request.messages[-1].text if len(request.messages) else ""
        return f"({spec.kind}) acknowledged: {last[:200]}"


def _elide(line: str, lost: list[str]) -> str:
    for t in lost:
        if t in line:
            line = line.replace(t, "…")
    return line


def _elider(lost: list[str]):
    """``lambda line: _elide(line, lost)``, with the texts a line holds found in one pass
    (harness/textmatch): a summary elides every fact of the context from each line of material,
    and testing each line against each fact made a compaction O(lines × facts). The same answer:
    only the texts the line holds are replaced, in ``lost``'s order (a text holding the ellipsis
    could appear only after a replacement, so then every text is tried, as before)."""
    if not lost or any("…" in t for t in lost):
        return lambda line: _elide(line, lost)
    from ctxsim.harness.model.textmatch import Matcher

    # compiled here, not through textmatch.matcher's shared cache: each compaction's set is its own, and
    # sixteen of them evicted the trace's facts matcher, so the next run searched every block again
    m = Matcher({t: t for t in lost})

    def elide(line: str) -> str:
        held = m.present(line)
        return _elide(line, [t for t in lost if t in held]) if held else line
    return elide


def _route(category: str, sections: tuple[str, ...]) -> str:
    for word in FACT_ROUTES.get(category, ()):
        for s in sections:
            if word in s.lower():
                return s
    for s in sections:
        if "fact" in s.lower() or "key" in s.lower():
            return s
    return sections[0]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def memory_name(fact) -> str:
    """A stable kebab-case memory name for a fact (the same fact is never extracted twice)."""
    words = _WORD.findall(fact.text.lower())[:5]
    return "-".join([fact.category, *words])[:60].strip("-") + "-" + hashlib.blake2b(
        fact.text.encode(), digest_size=3).hexdigest()

"""The simulated LLM backend: deterministic, seeded, with real output text.

It stands in for the model in side calls. It may look at the trace's facts: it is part of the
simulated world (the model), not of the strategy, which never sees them.

Summaries (kind ``summary``)
----------------------------
Built from what the request really holds: the user's messages, the files the agent touched (with
excerpts of the latest reads), the errors it met, its own recent reasoning, in the sections the
strategy asked for (``CallSpec.sections``; Claude Code's nine by default). Of the trace's facts present
in the summarised messages, each survives with probability

    p = survival[category] × squeeze × ratio_factor

* ``survival`` — by category (defaults below): goals and constraints are what summary prompts ask
  for first (Claude Code's "Primary request and intent", Codex's "goal", gemini-cli's
  "overall_goal"); exact file details and error strings are what summaries drop first.
* ``squeeze`` = min(1, fact_share × target / tokens of the present facts): when the facts alone
  would take more than ``fact_share`` of the summary, each is less likely to make it.
* ``ratio_factor`` = min(1, (ratio_ref / (input tokens / target))^ratio_exponent): a summary that
  compresses harder than ``ratio_ref``:1 loses more (a 1M-token history in a 20k-token summary).

Survivors are copied verbatim (so retention can find them); lines of material that hold a fact are
left out (a fact enters the summary only through its survival draw). A fact already in an earlier summary is drawn again at the
next compaction, so losses compound over repeated compactions (goal: 0.95^k after k of them).
The summary's length is ``target`` = clamp(target_ratio × input tokens, min_tokens, max_output_tokens).
All of these are modelling assumptions with documented defaults (:class:`SimParams`); ``ctxsim
calibrate`` (harness/cli/calibrate.py) measures survival on a live model and writes a file that
``SimParams(calibration=PATH)`` loads (format agreed in /work/helpers/coord-BE.md).

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
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.conversation import Message, Request
from harness.llm import (
    JUDGE,
    MEMORY_CONSOLIDATE,
    MEMORY_EXTRACT,
    MEMORY_SELECT,
    SUMMARY,
    VERIFY,
    BackendReply,
    CallSpec,
)

# Survival of a fact through one summary, by category (modelling assumption; see the module docstring)
DEFAULT_SURVIVAL = {"goal": 0.95, "constraint": 0.85, "decision": 0.8, "preference": 0.75,
                    "feedback": 0.75, "error": 0.6, "file": 0.45}
# Chance that memory extraction writes down a fact said in the dialogue (modelling assumption):
# preferences and feedback are what auto memory exists for; project decisions and constraints often;
# the task's goal rarely (it is this session's, not the project's); file details and errors seldom
# (they are in the code and logs).
DEFAULT_EXTRACT = {"preference": 0.9, "feedback": 0.9, "constraint": 0.7, "decision": 0.6, "goal": 0.3,
                   "file": 0.15, "error": 0.1}
MEMORY_TYPE = {"preference": "user", "feedback": "feedback", "constraint": "project", "decision": "project",
               "goal": "project", "file": "reference", "error": "reference"}
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


@dataclass
class SimParams:
    survival: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SURVIVAL))
    # summary length: this share of the summarised input, at least min_tokens, at most the budget
    target_ratio: float = 0.04
    min_tokens: int = 600
    # share of the summary that facts may take before the budget squeezes them
    fact_share: float = 0.5
    # compression beyond ratio_ref:1 lowers survival by (ratio_ref / ratio) ** ratio_exponent
    ratio_ref: float = 25.0
    ratio_exponent: float = 0.15
    extract: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_EXTRACT))
    # a summary's excerpt of a file read keeps this many lines
    excerpt_lines: int = 8
    calibration: str | None = None  # a `ctxsim calibrate` file: its measured survival rates replace the defaults

    def __post_init__(self) -> None:
        for name in ("survival", "extract"):
            bad = {k: v for k, v in getattr(self, name).items() if not 0.0 <= v <= 1.0}
            if bad:
                raise ValueError(f"SimParams.{name}: probabilities must be in [0, 1], got {bad}")
        if not 0 < self.target_ratio <= 1 or not 0 < self.fact_share <= 1 or self.ratio_ref <= 0:
            raise ValueError("SimParams: target_ratio and fact_share must be in (0, 1], ratio_ref > 0")
        if self.calibration:
            self.survival = {**self.survival, **load_calibration(self.calibration)}


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
    tools: dict[str, int] = field(default_factory=dict)


class SimulatedLLM:
    name = "simulated"

    def __init__(self, facts: dict, tokenizer_count: Callable[[str], int], seed: int = 0,
                 params: SimParams | dict[str, Any] | None = None, run_dir: str | None = None) -> None:
        self.facts = facts
        self.count = tokenizer_count
        self.seed = seed
        self.params = params if isinstance(params, SimParams) else SimParams(**(params or {}))
        self._msg: dict[int, tuple[Message, str, int, frozenset[str]]] = {}  # id -> (msg, text, tokens, facts)
        self.run_dir = run_dir
        self._key: dict[int, tuple[Message, bytes]] = {}  # id -> (msg, digest with the run dir masked)

    def _digest(self, m: Message) -> bytes:
        hit = self._key.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        text = m.role + "\x00" + m.text
        if self.run_dir:
            text = text.replace(self.run_dir, "<run>")
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
        """Text, token count and facts present, computed once per message object."""
        hit = self._msg.get(id(m))
        if hit is None or hit[0] is not m:
            text = m.text
            present = frozenset(fid for fid, f in self.facts.items() if f.text in text)
            hit = (m, text, self.count(text), present)
            self._msg[id(m)] = hit
        return hit[1], hit[2], hit[3]

    def respond(self, request: Request, spec: CallSpec) -> BackendReply:
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
    def summarize(self, request: Request, spec: CallSpec) -> str:
        p = self.params
        rng = self._rng(request, spec)
        msgs = list(request.messages)
        n = spec.params.get("summarize_messages")
        if isinstance(n, int) and 0 < n <= len(msgs):
            msgs = msgs[:n]  # the strategy keeps the rest verbatim: only the head is summarised
        input_tokens = 0
        present: set[str] = set()
        for m in msgs:
            _, tok, facts = self._info(m)
            input_tokens += tok
            present |= facts
        target = int(min(spec.max_output_tokens, max(p.min_tokens, p.target_ratio * input_tokens)))
        target = max(1, target)
        pres = [self.facts[f] for f in sorted(present)]
        need = sum(self.count(f.text) for f in pres) or 1
        squeeze = min(1.0, p.fact_share * target / need)
        ratio = input_tokens / target
        ratio_factor = min(1.0, (p.ratio_ref / ratio) ** p.ratio_exponent) if ratio > 0 else 1.0
        draws = rng.random(len(pres))
        kept = [f for f, u in zip(pres, draws, strict=True)
                if u < p.survival.get(f.category, 0.5) * squeeze * ratio_factor]
        fact_texts = [f.text for f in pres]
        sections = tuple(spec.sections) or DEFAULT_SECTIONS
        seen = self._read(msgs)
        body: dict[str, list[str]] = {s: [] for s in sections}
        for f in kept:
            body[_route(f.category, sections)].append(f.text)
        material = self._material(seen, sections, p.excerpt_lines)
        # facts first (protected), then material round-robin over the sections until the target
        used = self.count("\n".join([SUMMARY_OPEN, SUMMARY_CLOSE, *(f"## {s}" for s in sections),
                                     *(f"- {t}" for f in kept for t in [f.text])]))
        # facts enter only through the survival draw: material lines holding any fact are left out
        queues = {s: [x for x in material.get(s, []) if not any(t in x for t in fact_texts)] for s in sections}
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
                    cost = self.count(line) + 1
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
        return self._fit("\n".join(lines), spec.max_output_tokens, protect=[f.text for f in kept])

    def _read(self, msgs: list[Message]) -> _Seen:
        s = _Seen()
        uses: dict[str, tuple[str, str]] = {}  # tool_use id -> (tool name, path)
        for m in msgs:
            origin = m.meta.get("origin")
            for b in m.blocks:
                if b.type == "text" and m.role == "user" and not origin and b.text.strip():
                    s.users.append(b.text.strip())
                elif b.type == "text" and m.role == "assistant" and b.text.strip():
                    s.thoughts.append(b.text.strip().split("\n")[0][:300])
                elif b.type == "tool_use":
                    s.tools[b.name or "?"] = s.tools.get(b.name or "?", 0) + 1
                    path = next((v for k, v in (b.input or {}).items()
                                 if isinstance(v, str) and k in ("file_path", "path") and _PATH.fullmatch(v.strip())), "")
                    if path and path not in s.files:
                        s.files.append(path)
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
                for path, text in reversed(seen.reads[-5:]):
                    excerpt = "\n".join(text.splitlines()[:excerpt_lines])
                    lines.append(f"{path}:\n```\n{excerpt}\n```")
                out[sec] = lines
            elif "error" in low:
                out[sec] = list(reversed(seen.errors[-15:]))
            elif "request" in low or "intent" in low or "goal" in low or "plan" in low:
                out[sec] = [u[:400] for u in seen.users[:1]]
            elif any(w in low for w in ("current", "recent", "next", "pending", "state")):
                out[sec] = ([f"Last request: {seen.users[-1][:400]}"] if seen.users else []) + \
                           [f"Latest step: {t}" for t in reversed(seen.thoughts[-3:])] + \
                           [f"Tools used so far: {json.dumps(seen.tools, sort_keys=True)}"]
            else:  # concepts, problem solving, decisions, knowledge
                out[sec] = list(reversed(seen.thoughts[-30:]))
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
        whole = "\n".join(self._info(m)[0] for m in request.messages)
        m = re.search(r"<dialogue>\n?(.*?)</dialogue>", whole, re.S)
        dialogue = m.group(1) if m else whole
        existing = set(spec.params.get("existing") or [])
        rng = self._rng(request, spec)
        blocks = []
        for fid in sorted(self.facts):
            f = self.facts[fid]
            if f.text not in dialogue:
                continue
            u = rng.random()
            name = memory_name(f)
            if name in existing or u >= self.params.extract.get(f.category, 0.0):
                continue
            blocks.append(f"<memory>\n---\nname: {name}\ndescription: {_one_line(f.text)[:100]}\n"
                          f"type: {MEMORY_TYPE.get(f.category, 'project')}\n---\n{f.text}\n</memory>")
        return "\n".join(blocks) if blocks else "NO_MEMORIES"

    def select(self, request: Request, spec: CallSpec) -> str:
        """N-MEM-5 selection: a JSON array of at most ``max`` candidate file names."""
        whole = "\n".join(self._info(m)[0] for m in request.messages)
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
        whole = "\n".join(self._info(m)[0] for m in request.messages)
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
        whole = "\n".join(self._info(m)[0] for m in request.messages)
        return "yes" if fact and fact in whole else "no"

    def generic(self, request: Request, spec: CallSpec) -> str:
        last = request.messages[-1].text if len(request.messages) else ""
        return f"({spec.kind}) acknowledged: {last[:200]}"


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

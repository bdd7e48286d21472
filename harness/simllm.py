"""The simulated LLM backend: deterministic, seeded, with real output text.

It stands in for the model in side calls. A summary is built from what the request really holds
(user messages, files touched, errors, tool names) and, for the trace's facts present in the
summarised text, decides which survive: each by a probability set by its category, lowered when the
summary budget is squeezed, and applied again every time a fact is re-summarised (so losses compound
over repeated compactions). Survivors are copied verbatim, so retention scoring can find them.
These are modelling assumptions with documented defaults (:class:`SimParams`); ``ctxsim calibrate``
measures them against a live model.

The backend may look at the trace's facts: it is part of the simulated world (the model), not of
the strategy, which never sees them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from harness.conversation import Request
from harness.llm import SUMMARY, BackendReply, CallSpec

# Survival of a fact through one summary, by category (modelling assumption; calibrate with
# `ctxsim calibrate`). Goals and constraints are what summary prompts ask for first (Claude Code's
# "Primary request and intent", Codex's "goal", gemini-cli's "overall_goal"); file details and
# exact error strings are what summaries drop first.
DEFAULT_SURVIVAL = {"goal": 0.95, "constraint": 0.85, "decision": 0.8, "preference": 0.75,
                    "feedback": 0.75, "error": 0.6, "file": 0.45}


@dataclass
class SimParams:
    survival: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SURVIVAL))
    # summary length: this share of the summarised input, at least min_tokens, at most the budget
    target_ratio: float = 0.04
    min_tokens: int = 600
    # share of the summary that facts may take before the budget squeezes them
    fact_share: float = 0.5


_PATH = re.compile(r"(?:/[\w.\-]+){2,}")


class SimulatedLLM:
    name = "simulated"

    def __init__(self, facts: dict, tokenizer_count: Callable[[str], int], seed: int = 0,
                 params: SimParams | None = None) -> None:
        self.facts = facts
        self.count = tokenizer_count
        self.seed = seed
        self.params = params or SimParams()

    def _rng(self, request: Request, spec: CallSpec) -> np.random.Generator:
        n = len(request.messages)
        d = request.messages.prefix_digest(n - 1) if n else b""
        h = hashlib.blake2b(d + spec.kind.encode() + str(self.seed).encode(), digest_size=8).digest()
        return np.random.default_rng(int.from_bytes(h, "little"))

    def respond(self, request: Request, spec: CallSpec) -> BackendReply:
        if spec.kind == SUMMARY:
            return BackendReply(self.summarize(request, spec))
        if spec.kind == "verify":
            return BackendReply("The summary is consistent with the conversation.")
        if spec.kind == "judge":
            return BackendReply(self.judge(request, spec))
        return BackendReply(self.generic(request, spec))

    # --- summaries -------------------------------------------------------------------------------
    def summarize(self, request: Request, spec: CallSpec) -> str:
        p = self.params
        rng = self._rng(request, spec)
        msgs = list(request.messages)
        text_parts: list[str] = []
        users: list[str] = []
        files: list[str] = []
        errors: list[str] = []
        tools: dict[str, int] = {}
        in_summary: set[str] = set()
        for m in msgs:
            summary_msg = m.meta.get("origin") == "summary"
            for b in m.blocks:
                t = b.payload
                text_parts.append(t)
                if summary_msg:
                    in_summary.add(t)
                if b.type == "text" and m.role == "user" and not m.meta.get("origin"):
                    users.append(t.strip().splitlines()[0][:200] if t.strip() else "")
                elif b.type == "tool_use":
                    tools[b.name or "?"] = tools.get(b.name or "?", 0) + 1
                    for v in (b.input or {}).values():
                        if isinstance(v, str) and _PATH.fullmatch(v.strip()) and v not in files:
                            files.append(v)
                elif b.type == "tool_result" and b.is_error and t.strip():
                    errors.append(t.strip().splitlines()[0][:200])
        whole = "\n".join(text_parts)
        input_tokens = sum(self.count(t) for t in text_parts[-400:])  # bounded work
        target = int(min(spec.max_output_tokens, max(p.min_tokens, p.target_ratio * input_tokens)))
        # facts present in the summarised text, and which survive this summary
        present = [f for f in self.facts.values() if f.text in whole]
        need = sum(self.count(f.text) for f in present) or 1
        squeeze = min(1.0, p.fact_share * target / need)
        kept = [f for f in present if rng.random() < p.survival.get(f.category, 0.5) * squeeze]
        sections = spec.sections or ("Primary request and intent", "Key facts", "Files", "Errors",
                                     "User messages", "Current work")
        body = {s: [] for s in sections}
        first = sections[0]
        body[first].extend(users[:1] or ["(no user request recorded)"])
        facts_sec = next((s for s in sections if "fact" in s.lower() or "knowledge" in s.lower() or "decision" in s.lower()), first)
        for f in kept:
            body[facts_sec].append(f.text)
        for s in sections:
            low = s.lower()
            if "file" in low or "artifact" in low:
                body[s].extend(files[-20:])
            elif "error" in low:
                body[s].extend(errors[-10:])
            elif "user message" in low:
                body[s].extend(users[-15:])
            elif "current" in low or "recent" in low or "next" in low:
                tail_users = users[-1:] if users else []
                body[s].extend([f"tools used so far: {json.dumps(tools, sort_keys=True)}", *tail_users])
        lines = ["<summary>"]
        for s in sections:
            lines.append(f"## {s}")
            lines.extend(f"- {x}" for x in body[s] if x)
        lines.append("</summary>")
        return self._fit("\n".join(lines), target, protect=[f.text for f in kept])

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

    # --- other kinds ----------------------------------------------------------------------------
    def judge(self, request: Request, spec: CallSpec) -> str:
        fact = spec.params.get("fact", "")
        whole = "\n".join(m.text for m in request.messages)
        return "yes" if fact and fact in whole else "no"

    def generic(self, request: Request, spec: CallSpec) -> str:
        last = request.messages[-1].text if len(request.messages) else ""
        return f"({spec.kind}) acknowledged: {last[:200]}"

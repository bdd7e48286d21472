"""The cost of forgetting, closed loop: what the simulated agent does when a need at risk is gone.

A replay is open loop (the agent's actions are the log's), so forgetting used to be free. Here,
when a need at risk (``ctxsim.harness.retention.needs``) is **lost** at its probe (a pointer the model did not
follow included: it carried nothing, ``unfollowed``), the agent recovers as real agents do after a compaction: it re-acquires the
fact from where it last saw it —

* the fact was last seen (before the turnover) in a tool result: the agent runs that tool call
  again — a ``Read`` of the same file (an ``Edit``/``Write`` result is recovered by a ``Read`` of its
  file), or the same command, search or fetch. One extra model call emits the tool use, the tool's
  recorded result enters the context, and the call that needed the fact is sent again (kind
  ``recovery``): billed, cached, timed and subject to the window like any call, so it can push the
  session into its next compaction;
* the fact only the user gave (it entered through a user message: the goal, a constraint, a
  preference): nothing can re-read it, the need is counted **violated**, and the loop closes the
  only way it can: the call that needed it is made without it (billed, its answer wasted — the
  work done against a goal or constraint the model no longer has), the user notices and restates
  it (a user message with the fact's text enters the context), and the call is sent again (kind
  ``restate``): one extra model call with the whole context, billed, cached and timed like any. The
  work done against it until the user noticed is ``wasted_calls`` more calls on the request without
  it (issue 43: a parameter with a stated range, 0 to the rest of the turn; 0 by default);
  Whether the user notices is ``restate_probability`` (assumed 1.0, the upper bound: every
  violation is caught at once; a sweep can lower it). The cheaper outcomes a real session can
  also take (the violation goes unnoticed and the work is redone later, or the turn fails) are
  not modelled: a restatement is the least a violated need costs in a closed loop;
* the fact the agent wrote itself (a decision in its own text): not re-acquirable, counted
  ``unrecoverable`` (lost, no cost).

Whether the agent re-acquires a lost fact at all is drawn with the probability of its kind
(``read`` or ``rerun``), fitted on the real compactions by ``ctxsim calibrate-recovery``
(``harness/data/recovery.json``, :func:`default_probability`; see ``ctxsim.harness.calibration.recovery_fit``). One
re-acquisition per source and call; once recovered, the content is in the strategy's history and
later probes find it there (unless the strategy drops it again).

The recorded agent's own recovery is in the log: a call whose tool use re-acquires the very source
a lost need points to *is* the recovery, so none is added (``recorded``). The converse: where the
strategy still holds, verbatim, what a recorded re-acquisition across a turnover returns
(:func:`reacquisitions`: a ``Read`` of a file read before the latest turnover, or the same command
or search run again across it; its recorded result's middle ``SNIPPET_CHARS`` found in the request,
so a file edited since returns new text and stays needed), the real agent only re-read it because
its own context had lost it.
That call is not needed by this strategy: its billed cost is credited (``recovery.credit_usd``;
``cost_with_recovery_usd = cost_usd − credit``), so a strategy that keeps more is not charged the
recorded agent's forgetting. Only the call is credited when every tool use of it is such an
unneeded re-acquisition; the re-read result itself still enters the context (a lower bound on the
saving).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from ctxsim.harness.llm.services import (  # the kinds of the per-call rows a recovery, a restatement add
    RECOVERY,
    RESTATE,
)
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import History
from ctxsim.harness.retention.needs import USER_GIVEN, Needs
from ctxsim.harness.retention.probes import _main_context
from pydantic import BaseModel, ConfigDict, Field, field_validator

DATA = Path(__file__).resolve().parents[1] / "data" / "recovery.json"
FORMAT = "ctxsim-recovery"
VERSION = 1
READ_TOOLS = ("Read", "read_file", "view", "cat")            # tools that read a file (Claude Code, Codex, OpenHands)
FILE_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")  # their result is recovered by a Read of their file
KINDS = ("read", "rerun")
SNIPPET_CHARS = 400  # an earlier result is "held verbatim" when this much of its middle is in the request (assumed)


@cache
def default_probability() -> dict[str, float]:
    """The fitted probability per kind (``harness/data/recovery.json``); 1.0 for a kind the file
    lacks (no data file: every lost need at risk is recovered, the upper bound)."""
    try:
        d = json.loads(DATA.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {k: 1.0 for k in KINDS}
    if d.get("format") != FORMAT or d.get("version") != VERSION:
        raise ValueError(f"{DATA}: not a {FORMAT} v{VERSION} file")
    return {k: float(d["probability"].get(k, 1.0)) for k in KINDS}


class RecoveryParams(BaseModel):
    """The closed loop's knobs (a sweep can vary them)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    enabled: bool = Field(True, description="recover lost needs at risk (False: the open-loop replay of before)")
    probability: dict[str, float] = Field(
        default_factory=default_probability,
        description="chance the agent re-acquires a lost need at risk, per kind (read, rerun): fitted on the real "
        "compactions (ctxsim calibrate-recovery, harness/data/recovery.json)")
    scope: Literal["at_risk", "all"] = Field("at_risk", description=(
        "which lost needs are recovered: at_risk (the issue's rule: only what a turnover took) or all (also what "
        "masking or truncation lost between two turnovers; a sensitivity, assumed)"))
    credit_unneeded: bool = Field(True, description="credit the cost of a recorded re-acquisition the strategy did "
                                  "not need (it still held the content verbatim)")
    restate: bool = Field(True, description=(
        "a violated goal/constraint (user-given need at risk, lost) is restated by the user: the call made without "
        "it is billed and wasted, the restatement enters the context, the call is sent again (kind restate)"))
    wasted_calls: int = Field(0, ge=0, le=1_000, description=(
        "calls of work done against a violated goal/constraint before the user notices, beyond the one the "
        "restatement bills (each billed again on the request that lacks the fact, kind restate). Assumed: 0, "
        "noticed at the next call, the lower bound. Stated range: 0 to the rest of the user turn (the user reads "
        "the agent's answer when the turn ends): from a call, median 10 calls, mean 21.7, p90 52 on the "
        "development population (22,501 calls, 1,897 turns; docs/needs-at-risk.md). Compare prints how many "
        "would change the cost order (break-even)"))
    restate_probability: float = Field(1.0, ge=0.0, le=1.0, description=(
        "chance the user notices a violated goal/constraint and restates it (assumed: 1.0, every violation caught "
        "at once, the upper bound of the restatement cost; below 1 the violation goes unbilled)"))

    @field_validator("probability")
    @classmethod
    def _probabilities(cls, v: dict[str, float]) -> dict[str, float]:
        """Known kinds only, each a probability (issue 44: nan, 7 or a misspelt kind ran)."""
        for k, p in v.items():
            if k not in KINDS:
                raise ValueError(f"unknown kind {k!r} (valid: {', '.join(KINDS)})")
            if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):   # nan compares false
                raise ValueError(f"{k}: {p} is not a probability in [0, 1]")
        return v


@dataclass(frozen=True)
class Source:
    """A tool call whose result held a fact: what a recovery runs again."""

    tool_use_id: str
    name: str
    input: Mapping[str, Any]
    content: str
    is_error: bool
    kind: str  # read | rerun

    def step(self) -> tuple[str, Mapping[str, Any]]:
        """(tool, input) of the re-acquisition: a file tool's result is read again with Read."""
        if self.name in FILE_TOOLS and isinstance(self.input.get("file_path"), str):
            return "Read", {"file_path": self.input["file_path"]}
        return self.name, self.input


def _kind(name: str) -> str:
    return "read" if name in READ_TOOLS or name in FILE_TOOLS else "rerun"


def key_of(name: str, inp: Mapping[str, Any]) -> tuple[str, str] | None:
    """What makes two tool uses the same acquisition: a read of the same file (whatever its offset),
    else the same tool with the same input. None for file edits (an action, not an acquisition)."""
    if name in FILE_TOOLS:
        return None
    if name in READ_TOOLS:
        p = inp.get("file_path") or inp.get("path")
        return ("read", str(p)) if p else None
    return (name, json.dumps(inp, sort_keys=True, ensure_ascii=False, default=str))


def sources(trace: tr.Trace) -> dict[str, Source]:
    """Every main-context tool use with its result, by tool_use id (memoised on the trace)."""
    got = trace.memo.get("recovery_sources")
    if got is not None:
        return got
    uses: dict[str, tr.ToolUseContent] = {}
    out: dict[str, Source] = {}
    main = _main_context(trace.events)
    for i, ev in enumerate(trace.events):
        if not main[i]:
            continue
        if isinstance(ev, tr.AssistantEvent):
            for c in ev.tool_uses():
                uses[c.id] = c
        elif isinstance(ev, tr.ToolResultEvent) and ev.tool_use_id in uses:
            c = uses[ev.tool_use_id]
            out[c.id] = Source(c.id, c.name, dict(c.input), ev.content, ev.is_error, _kind(c.name))
    trace.memo["recovery_sources"] = out
    return out


@dataclass(frozen=True)
class Reacquisition:
    """A recorded tool use that acquires again what an earlier one did."""

    tool_use_id: str
    earlier: str        # the earlier tool use's id
    kind: str           # read | rerun
    call: int           # index of the main call (0-based) that made it
    across: bool        # a turnover point lies between the earlier result and this call


def reacquisitions(trace: tr.Trace, turnovers: Sequence[int]) -> list[Reacquisition]:
    """Every main-context tool use that repeats an earlier acquisition (:func:`key_of`), with whether
    a turnover point (event indices, ``Needs.turnovers``) lies between them. Memoised on the trace
    (a pure function of the trace and the turnovers: a warm replay does not walk the trace again)."""
    memo_key = ("recovery_reacquisitions", tuple(turnovers))
    got = trace.memo.get(memo_key)
    if got is None:
        got = trace.memo[memo_key] = _reacquisitions(trace, turnovers)
    return list(got)


def _reacquisitions(trace: tr.Trace, turnovers: Sequence[int]) -> tuple[Reacquisition, ...]:
    main = _main_context(trace.events)
    srcs = sources(trace)
    seen: dict[tuple[str, str], tuple[str, int]] = {}  # key -> (tool_use id, event index of its result)
    result_at: dict[str, int] = {}
    for i, ev in enumerate(trace.events):
        if isinstance(ev, tr.ToolResultEvent):
            result_at.setdefault(ev.tool_use_id, i)
    turns = sorted(turnovers)
    out: list[Reacquisition] = []
    call = -1
    for i, ev in enumerate(trace.events):
        if not (main[i] and tr.is_call(ev)):
            continue
        call += 1
        for c in ev.tool_uses():
            k = key_of(c.name, c.input)
            if k is None or c.id not in srcs:
                continue
            prev = seen.get(k)
            if prev is not None:
                across = any(prev[1] <= t < i for t in turns)
                out.append(Reacquisition(c.id, prev[0], srcs[c.id].kind, call, across))
            seen[k] = (c.id, result_at.get(c.id, i))
    return tuple(out)


def _holds(messages: Sequence[Any], snippet: str) -> bool:
    """``snippet in "\\n".join(m.text for m in messages)``. A request's history answers it from what
    it found for the requests it extends (``History.text_contains``): a re-acquisition is asked about
    at many calls, and joining the whole request at each was work in proportion to the history."""
    if isinstance(messages, History):
        return messages.text_contains(snippet)
    return snippet in "\n".join(m.text for m in messages)


def _snippet(text: str) -> str:
    if len(text) <= SNIPPET_CHARS:
        return text
    mid = len(text) // 2
    return text[mid - SNIPPET_CHARS // 2: mid + SNIPPET_CHARS // 2]


class Recovery:
    """One per run: asked at each main call which re-acquisitions to inject (:meth:`at_call`)."""

    def __init__(self, trace: tr.Trace, needs: Needs, params: RecoveryParams, rng: np.random.Generator,
                 count) -> None:
        self.needs, self.params, self.rng, self.count = needs, params, rng, count
        self.sources = sources(trace)
        self.recorded = {r.tool_use_id: r for r in reacquisitions(trace, needs.turnovers) if r.across}
        self.calls = 0
        self.tokens = 0
        self.violated = 0
        self.unrecoverable = 0
        self.declined = 0
        self.by_recorded = 0
        self.unneeded = 0
        self.credit_usd = 0.0
        self.by_kind = {k: 0 for k in KINDS}
        self.fact_text = {e.id: e.text for e in trace.events if isinstance(e, tr.FactEvent)}
        self.restated = 0
        self._restate: list[str] = []
        self.restored: dict[str, int] = {}   # fact -> main call at which the loop put it back (needs.headline)

    def take_restatements(self) -> list[str]:
        """The facts' texts the user restates before the call :meth:`at_call` just scored (each
        violated goal/constraint the user noticed), emptied on reading."""
        got, self._restate = self._restate, []
        return got

    def at_call(self, scores: Sequence[Any], answer: Any, call: int = -1) -> list[Source]:
        """The sources to re-acquire before the call whose probes gave ``scores`` (FactScore) and
        whose recorded answer is ``answer`` (a Message); ``call``: that main call's index (what the
        loop puts back is marked restored from it on, :attr:`restored`)."""
        own = {key_of(b.name, b.input) for b in answer.blocks if b.type == "tool_use"}
        chosen: dict[str, Source] = {}
        drawn: set[str] = set()
        for sc in scores:
            nd = self.needs.get(sc.probe, sc.fact_id)
            if nd is None or not (nd.at_risk or self.params.scope == "all"):
                continue
            gone = sc.where in ("lost", "unfollowed")   # a pointer not followed carried nothing (needs.WHERE)
            if not gone:
                continue
            if nd.from_user or (nd.category in USER_GIVEN and nd.source is None):
                self.violated += 1
                text = self.fact_text.get(nd.fact, "")
                if (self.params.restate and text and text not in self._restate
                        and (self.params.restate_probability >= 1.0
                             or self.rng.random() < self.params.restate_probability)):
                    self._restate.append(text)
                    self.restated += 1
                    self.restored.setdefault(nd.fact, call)
                continue
            src = self.sources.get(nd.source) if nd.source else None
            if src is None:
                self.unrecoverable += 1
                continue
            k = key_of(*src.step())
            if k is not None and k in own:   # the recorded agent re-acquires it in this very call
                self.by_recorded += 1
                continue
            if src.tool_use_id in chosen or src.tool_use_id in drawn:
                continue
            drawn.add(src.tool_use_id)
            if self.rng.random() < self.params.probability.get(src.kind, 1.0):
                chosen[src.tool_use_id] = src
                self.restored.setdefault(nd.fact, call)
            else:
                self.declined += 1
        for s in chosen.values():
            self.calls += 1
            self.by_kind[s.kind] += 1
            self.tokens += self.count(s.content)
        return list(chosen.values())

    def unneeded_call(self, messages: Sequence[Any], answer: Any) -> bool:
        """Whether every tool use of the recorded ``answer`` re-acquires, across a turnover, a result
        the strategy's request still holds verbatim (so this call would not have been made): the
        result's snippet is in the request's text (its ``messages``' texts joined by newlines)."""
        uses = [b for b in answer.blocks if b.type == "tool_use"]
        if not uses or not self.params.credit_unneeded or any(b.id not in self.recorded for b in uses):
            return False
        for b in uses:   # what this re-acquisition returns is already in the request: it fetches nothing new
            got = self.sources.get(b.id)   # (a file edited since its earlier read returns new text: needed)
            if got is None or not got.content.strip() or not _holds(messages, _snippet(got.content)):
                return False
        self.unneeded += 1
        return True

    @staticmethod
    def none(params: RecoveryParams, closed_loop: bool = True) -> dict[str, Any]:
        """The ``recovery`` object of a run with no recovery (no facts, the loop disabled, or a
        strategy that re-enacts the log, whose recoveries are the log's own: ``closed_loop`` False)."""
        return {"calls": 0, "tokens": 0, "cost_usd": 0.0, "violated": 0, "restated": 0, "restate_cost_usd": 0.0,
                "unrecoverable": 0, "declined": 0,
                "by_recorded": 0, "by_kind": {k: 0 for k in KINDS}, "recorded_unneeded": 0, "credit_usd": 0.0,
                "probability": dict(params.probability), "enabled": params.enabled and closed_loop}

    def metrics(self, calls) -> dict[str, Any]:
        """The ``recovery`` object of ``run --json`` (``calls``: the run's per-call rows)."""
        rows = calls[calls["kind"] == RECOVERY] if len(calls) else calls
        again = calls[calls["kind"] == RESTATE] if len(calls) else calls
        return {"calls": int(self.calls), "tokens": int(self.tokens),
                "cost_usd": float(rows["cost_usd"].sum()) if len(rows) else 0.0,
                "violated": int(self.violated), "restated": int(self.restated),
                "restate_cost_usd": float(again["cost_usd"].sum()) if len(again) else 0.0,
                "unrecoverable": int(self.unrecoverable),
                "declined": int(self.declined), "by_recorded": int(self.by_recorded),
                "by_kind": dict(self.by_kind), "recorded_unneeded": int(self.unneeded),
                "credit_usd": float(self.credit_usd), "probability": dict(self.params.probability), "enabled": True}

"""Measure what a summariser keeps: per-category fact survival through real compactions.

The simulated summariser (``harness.simllm``) decides which facts survive a summary by category,
by how hard the budget squeezes and compounding over repeated compactions; those are modelling
assumptions. ``ctxsim calibrate`` measures them: it replays traces with a strategy whose
compactions are answered by the live model (or a store of its answers), watches every summary
call (:class:`SummaryTap`), and counts, for every trace fact that was in the text given to the
summariser, whether it is still in the summary (:func:`outcomes`, :func:`calibration`).

The file written has the shape agreed with the simulated summariser (``/work/helpers/coord-BE.md``,
documented in :func:`calibration`). Definitions:

* present: the fact's text (casefolded, whitespace collapsed) is in the request the summariser got
  (every sent block but the final instruction; prior summaries included);
* verbatim: the fact's text is in the summary (same normalisation);
* survived: verbatim, or every key token of the fact (:func:`harness.live.key_tokens`: the numbers
  and identifiers that make it checkable) is in the summary: a paraphrase that keeps the values
  has kept the fact;
* generation: 1 the first time a fact is summarised, k + 1 after it survived k summaries already;
* squeeze: the summary call's input tokens / its output tokens (reported usage when the backend
  gives it, else the run's tokenizer).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from harness.conversation import Request
from harness.live import key_tokens, normalise
from harness.llm import SUMMARY, BackendReply, CallSpec, LLMBackend
from harness.trace import FACT_CATEGORIES, FactEvent

FORMAT = "ctxsim-summary-calibration"
VERSION = 1
SQUEEZE_BINS: tuple[tuple[float, float | None], ...] = ((0.0, 10.0), (10.0, 30.0), (30.0, None))


class EnoughCompactions(Exception):
    """Raised by :class:`SummaryTap` once its limit is reached, to stop a run (spend bound)."""


@dataclass(frozen=True)
class SummaryCall:
    """One observed summary: what the summariser read, what it wrote, and the sizes."""

    run: str
    index: int
    source: str
    summary: str
    input_tokens: int
    output_tokens: int


def request_text(request: Request) -> str:
    """The text a summariser was given: every block that is sent (no thinking: it is not), except
    the final instruction the engine appends."""
    parts = []
    for m in request.messages:
        if m.meta.get("origin") == "instruction":
            continue
        parts.extend(b.payload for b in m.blocks if b.type != "thinking")
    return "\n".join(parts)


@dataclass
class SummaryTap:
    """An :class:`~harness.llm.LLMBackend` wrapper that records every successful summary call.

    ``count`` measures sizes when the backend reports no usage (the simulated one);
    ``limit`` stops the run (:class:`EnoughCompactions`) after that many summaries in all.
    """

    inner: LLMBackend
    count: Callable[[str], int]
    run: str = ""
    limit: int | None = None
    calls: list[SummaryCall] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)  # as sent, for token counting

    @property
    def name(self) -> str:
        return getattr(self.inner, "name", "backend")

    def respond(self, request: Request, spec: CallSpec) -> BackendReply:
        if self.limit is not None and len(self.calls) >= self.limit:
            raise EnoughCompactions(f"{self.limit} summaries measured")
        reply = self.inner.respond(request, spec)
        if spec.kind == SUMMARY:
            source = request_text(request)
            if reply.usage is not None:
                n_in, n_out = reply.usage.input_total, reply.usage.output
            else:
                n_in, n_out = self.count(source), self.count(reply.text)
            self.calls.append(SummaryCall(self.run, len(self.calls), source, reply.text, n_in, n_out))
            self.requests.append(request)
        return reply


@dataclass(frozen=True)
class Outcome:
    fact: str
    category: str
    run: str
    compaction: int
    generation: int
    verbatim: bool
    survived: bool
    squeeze: float


def kept(fact_text: str, summary: str) -> tuple[bool, bool]:
    """(verbatim, survived) of one fact in one summary."""
    s = normalise(summary)
    verbatim = normalise(fact_text) in s
    survived = verbatim or all(normalise(k) in s for k in key_tokens(fact_text))
    return verbatim, survived


def outcomes(calls: Sequence[SummaryCall], facts: Mapping[str, FactEvent]) -> list[Outcome]:
    """Every (fact, summary) pair where the fact was present, in call order, per run."""
    out: list[Outcome] = []
    survived_before: dict[tuple[str, str], int] = {}
    norm = {fid: normalise(f.text) for fid, f in facts.items()}
    for c in calls:
        source = normalise(c.source)
        squeeze = c.input_tokens / max(c.output_tokens, 1)
        for fid, f in facts.items():
            if norm[fid] not in source:
                continue
            gen = 1 + survived_before.get((c.run, fid), 0)
            verbatim, survived = kept(f.text, c.summary)
            if survived:
                survived_before[(c.run, fid)] = gen
            out.append(Outcome(fid, f.category, c.run, c.index, gen, verbatim, survived, squeeze))
    return out


def _cell(os_: Iterable[Outcome]) -> dict[str, Any]:
    os_ = list(os_)
    present = len(os_)
    survived = sum(o.survived for o in os_)
    return {"present": present, "survived": survived, "verbatim": sum(o.verbatim for o in os_),
            "rate": round(survived / present, 4) if present else None}


def _dist(xs: Sequence[int]) -> dict[str, float | None]:
    if not xs:
        return {"median": None, "p90": None}
    s = sorted(xs)
    return {"median": float(statistics.median(s)), "p90": float(s[min(len(s) - 1, int(0.9 * len(s)))])}


def calibration(calls: Sequence[SummaryCall], facts_by_run: Mapping[str, Mapping[str, FactEvent]], *,
                model: str, strategy: str, traces: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """The calibration file's content (format ``ctxsim-summary-calibration`` v1)::

        {format, version, model, strategy, created, traces: [{name, content_hash}], compactions,
         survival: {category: {present, survived, verbatim, rate}} (all categories; rate null when
         nothing was present), overall: {...}, by_squeeze: [{lo, hi, ...}] (hi null: open-ended),
         by_generation: [{generation, ...}], summary_output_tokens: {median, p90},
         summary_input_tokens: {median, p90}}
    """
    outs: list[Outcome] = []
    for run in dict.fromkeys(c.run for c in calls):
        outs += outcomes([c for c in calls if c.run == run], facts_by_run[run])
    gens = sorted({o.generation for o in outs})
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": model,
        "strategy": strategy,
        "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "traces": [dict(t) for t in traces],
        "compactions": len(calls),
        "survival": {cat: _cell(o for o in outs if o.category == cat) for cat in FACT_CATEGORIES},
        "overall": _cell(outs),
        "by_squeeze": [{"lo": lo, "hi": hi, **_cell(o for o in outs if o.squeeze >= lo and (hi is None or o.squeeze < hi))}
                       for lo, hi in SQUEEZE_BINS],
        "by_generation": [{"generation": g, **_cell(o for o in outs if o.generation == g)} for g in gens],
        "summary_output_tokens": _dist([c.output_tokens for c in calls]),
        "summary_input_tokens": _dist([c.input_tokens for c in calls]),
    }


def token_scale(api_counts: Sequence[int], local_counts: Sequence[int], model: str) -> dict[str, Any]:
    """API tokens per local (cl100k, unscaled) token over the same requests: the per-model scale
    the provider model takes (``RunConfig.token_scale``, ``--token-scale``), as a ratio of sums."""
    api, local = sum(api_counts), sum(local_counts)
    if local <= 0:
        raise ValueError("token_scale needs requests with a positive local count")
    return {"model": model, "scale": round(api / local, 4), "requests": len(api_counts), "api_tokens": api,
            "local_tokens": local}

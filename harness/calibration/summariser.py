"""Measure what a summariser keeps: per-category fact survival through real compactions.

The simulated summariser (``ctxsim.harness.llm.simulated``) decides which facts survive a summary by category,
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
* survived: verbatim, or every key token of the fact (:func:`ctxsim.harness.llm.live.key_tokens`: the numbers
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

from ctxsim.harness.llm.live import key_tokens, normalise
from ctxsim.harness.llm.services import SUMMARY, BackendReply, CallSpec, LLMBackend
from ctxsim.harness.llm.survival import features_all, features_of  # noqa: F401 (the fit computes them too)
from ctxsim.harness.model.conversation import Request
from ctxsim.harness.model.trace import FACT_CATEGORIES, FactEvent

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
    """An :class:`~ctxsim.harness.llm.services.LLMBackend` wrapper that records every successful summary call.

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


# --- real compactions: what a real summary kept, and the survival model fitted to it ------------------
#
# A recorded Claude Code session that compacted holds a real pair: the conversation the model read
# and the summary it wrote (the importer's ``compact`` event). For every derived fact
# (harness/retention/probes.py) present in the summarised part, its features (harness/llm/survival.py) and
# whether its text is in the summary are one training row of the logistic model.

# L2 penalty on the kind offsets (log-odds): kinds seen a few times stay near the mean. Chosen among
# 0.1 / 0.3 / 1 / 3 by the pooled leave-one-out error on the bundled compactions (largest error over
# the checked kinds 6.5 / 9.8 / 16.7 / 25.9 points), so that error is slightly optimistic
SURVIVAL_RIDGE = 0.1
SLOPE_RIDGE = 0.01    # a token penalty on the slopes, for a well-posed fit on small data (assumed)
MIN_KIND_CHECK = 10   # the leave-one-out check covers kinds with at least this many held-out facts (assumed)


@dataclass(frozen=True)
class SurvivalRow:
    fact: str
    kind: str
    mentions: int
    uses: int
    from_user: bool
    age: float
    kept: bool


@dataclass(frozen=True)
class RealCompaction:
    """One real compaction: where it happened, its sizes, and one row per fact present."""

    source: str
    trigger: str
    call: int                 # main calls before it
    input_tokens: int | None  # the recorded pre_tokens (the model's own count)
    input_cl100k: int
    summary_chars: int
    summary_cl100k: int
    rows: tuple[SurvivalRow, ...]
    session: str = ""         # the session it belongs to (grouping of leave-one-session-out)


def summarised_messages(trace, upto: int) -> list[tuple[str, bool, str]]:
    """The main-context messages before event ``upto`` since the previous compaction, as the engine
    groups them (consecutive tool results are one user message), each as (role, typed by the user,
    text). A previous compaction's summary opens the list (what the next summariser reads)."""
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.retention import probes

    main = probes._main_context(trace.events)
    start = 0
    prev_summary = None
    for i, ev in enumerate(trace.events[:upto]):
        if isinstance(ev, tr.CompactEvent):
            start, prev_summary = i + 1, ev.summary
    out: list[tuple[str, bool, str]] = []
    if prev_summary:
        out.append(("user", False, prev_summary))
    results: list[str] = []
    for i in range(start, upto):
        ev = trace.events[i]
        if not main[i]:
            continue
        if isinstance(ev, tr.ToolResultEvent):
            results.append(ev.content)
            continue
        if results and isinstance(ev, (tr.UserEvent, tr.AssistantEvent)):
            out.append(("user", False, "\n".join(results)))
            results = []
        if isinstance(ev, tr.UserEvent):
            out.append(("user", not (ev.meta.get("meta_record") or ev.meta.get("origin")), ev.text))
        elif isinstance(ev, tr.AssistantEvent):
            out.append(("assistant", False, probes.seen_text(ev)))
    if results:
        out.append(("user", False, "\n".join(results)))
    return out


def real_compactions(trace, source: str, count: Callable[[str], int], session: str = "",
                     only: set[int] | None = None) -> list[RealCompaction]:
    """Every compaction of ``trace`` that has a summary, measured (facts derived first if the
    trace has none); ``only``: the indices of the main-context compactions to measure (the others
    are copies counted in another log)."""
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.retention import probes

    if not any(isinstance(e, tr.FactEvent) for e in trace.events):
        trace, _ = probes.apply(trace)
    facts = trace.facts()
    main = probes._main_context(trace.events)
    out = []
    calls = 0
    nth = -1
    for i, ev in enumerate(trace.events):
        if tr.is_call(ev) and main[i]:
            calls += 1
        if isinstance(ev, tr.CompactEvent) and main[i]:
            nth += 1
        if not (isinstance(ev, tr.CompactEvent) and ev.summary) or (only is not None and nth not in only):
            continue
        msgs = summarised_messages(trace, i)
        entered = {e.id for e in trace.events[:i] if isinstance(e, tr.FactEvent)}
        cand = [facts[f] for f in sorted(entered)]
        table = [(role, typed, count(text), frozenset(f.id for f in cand if f.text in text))
                 for role, typed, text in msgs]
        present = set().union(*(m[3] for m in table)) if table else set()
        rows = []
        for f in cand:
            if f.id not in present:
                continue
            x = features_of(table, f.id, f.category)
            rows.append(SurvivalRow(f.text, f.category, x.mentions, x.uses, x.from_user, round(x.age, 6),
                                    f.text in ev.summary))
        out.append(RealCompaction(source, ev.trigger, calls, ev.pre_tokens, sum(m[2] for m in table),
                                  len(ev.summary), count(ev.summary), tuple(rows), session or source))
    return out


def _design(rows: Sequence[SurvivalRow], kinds: Sequence[str]):
    import numpy as np
    from ctxsim.harness.llm.survival import FEATURES, Features

    x = []
    for r in rows:
        v = Features(r.kind, r.mentions, r.uses, r.from_user, r.age).vector()
        x.append([1.0, *(v[k] for k in FEATURES), *(1.0 if r.kind == k else 0.0 for k in kinds)])
    return np.array(x, dtype=float), np.array([r.kept for r in rows], dtype=float)


def _logit_penalized():
    """statsmodels' logistic regression with a penalised likelihood (its PenalizedMixin, as its own
    tests and GLMGam use it; statsmodels 0.14-0.15, the [calibrate] extra)."""
    from ctxsim.harness.files.extras import require

    require("calibrate", "statsmodels")
    from statsmodels.base._penalized import PenalizedMixin
    from statsmodels.discrete.discrete_model import Logit

    class LogitPenalized(PenalizedMixin, Logit):
        pass

    return LogitPenalized


def fit_survival_se(rows: Sequence[SurvivalRow], ridge: float = SURVIVAL_RIDGE):
    """Penalised maximum likelihood of the survival model on ``rows`` (statsmodels, Newton's method):
    log-likelihood minus ``0.5 * sum(pen_j * w_j**2)``, pen 0 on the intercept, SLOPE_RIDGE on the
    slopes, ``ridge`` on the kind offsets. Returns the model and each coefficient's standard error
    (from the penalised Hessian; the intercept and the kind offsets are collinear, held apart only
    by the penalty, so theirs are wide)."""
    import numpy as np
    from ctxsim.harness.llm.survival import FEATURES, SurvivalModel
    from statsmodels.base._penalties import L2

    if not ridge > 0:
        raise ValueError(f"ridge={ridge}: the intercept and the kind offsets are collinear, only a positive "
                         "ridge on the offsets identifies them")
    kinds = sorted({r.kind for r in rows})
    a, y = _design(rows, kinds)
    pen = np.array([0.0] + [SLOPE_RIDGE] * len(FEATURES) + [ridge] * len(kinds))
    # statsmodels subtracts pen_weight * sum(weights * w**2): weights = pen / 2 is the penalty above
    model = _logit_penalized()(y, a, penal=L2(weights=pen / 2), pen_weight=1.0)
    res = model.fit(method="newton", start_params=np.zeros(a.shape[1]), maxiter=100, tol=1e-10, disp=0)
    if not res.mle_retvals.get("converged", True):
        raise ValueError(f"the survival fit did not converge in 100 Newton steps on {len(rows)} rows")
    w, se = np.asarray(res.params, dtype=float), np.asarray(res.bse, dtype=float)
    n = len(FEATURES)
    names = ["intercept", *FEATURES, *(f"kind:{k}" for k in kinds)]
    return (SurvivalModel(float(w[0]), {k: float(w[1 + n + j]) for j, k in enumerate(kinds)},
                          {k: float(w[1 + j]) for j, k in enumerate(FEATURES)}),
            {k: float(s) for k, s in zip(names, se)})


def fit_survival(rows: Sequence[SurvivalRow], ridge: float = SURVIVAL_RIDGE):
    """The survival model fitted on ``rows`` (:func:`fit_survival_se` without the standard errors)."""
    return fit_survival_se(rows, ridge)[0]


def _by_kind(rows: Sequence[SurvivalRow], model) -> dict[str, dict[str, Any]]:
    from ctxsim.harness.llm.survival import Features

    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        c = out.setdefault(r.kind, {"n": 0, "kept": 0, "expected": 0.0})
        c["n"] += 1
        c["kept"] += r.kept
        c["expected"] += model.p(Features(r.kind, r.mentions, r.uses, r.from_user, r.age))
    for c in out.values():
        c["real"] = round(c["kept"] / c["n"], 4)
        c["predicted"] = round(c["expected"] / c["n"], 4)
        c["error_points"] = round(100 * (c["predicted"] - c["real"]), 2)
        del c["expected"]
    return dict(sorted(out.items()))


def leave_one_out(comps: Sequence[RealCompaction], ridge: float = SURVIVAL_RIDGE) -> dict[str, Any]:
    """Fit on the other sessions' compactions, predict the survival by kind of each compaction of the
    session left out (leave one session out: a session's compactions share its model, task and
    wording); per compaction and pooled over the held-out predictions."""
    per, pooled = [], {}
    models: dict[str, Any] = {}
    for held in comps:
        key = held.session or held.source
        if key not in models:
            models[key] = fit_survival([r for c in comps if (c.session or c.source) != key for r in c.rows], ridge)
        model = models[key]
        bk = _by_kind(held.rows, model)
        per.append({"left_out": f"{held.source} ({held.trigger}, call {held.call})", "by_kind": bk})
        for k, c in bk.items():
            p = pooled.setdefault(k, {"n": 0, "kept": 0, "predicted_sum": 0.0})
            p["n"] += c["n"]
            p["kept"] += c["kept"]
            p["predicted_sum"] += c["predicted"] * c["n"]
    pooled_out = {}
    for k, p in sorted(pooled.items()):
        real, pred = p["kept"] / p["n"], p["predicted_sum"] / p["n"]
        pooled_out[k] = {"n": p["n"], "real": round(real, 4), "predicted": round(pred, 4),
                         "error_points": round(100 * (pred - real), 2), "checked": p["n"] >= MIN_KIND_CHECK}
    return {"per_compaction": per, "pooled": pooled_out, "min_kind_check": MIN_KIND_CHECK, "sessions": len(models)}


def survival_file(comps: Sequence[RealCompaction], sources: Sequence[Mapping[str, str]],
                  command: str) -> dict[str, Any]:
    """The content of ``harness/data/summary_survival.json`` (format ``ctxsim-summary-survival`` v1)."""
    from ctxsim.harness.llm.survival import FORMAT as SFORMAT
    from ctxsim.harness.llm.survival import VERSION as SVERSION

    rows = [r for c in comps for r in c.rows]
    model, se = fit_survival_se(rows)
    ratios = [c.summary_chars / c.input_tokens for c in comps if c.input_tokens]
    return {
        "format": SFORMAT, "version": SVERSION,
        "source": {"command": command, "logs": [dict(s) for s in sources],
                   "compactions": len(comps), "sessions": len({c.session or c.source for c in comps}),
                   "code": "harness/calibration/summariser.py: real_compactions, fit_survival (statsmodels, penalised "
                           "logit), leave_one_out",
                   "facts": "derived from each session's content (harness/retention/probes.py); kept = the fact's text is "
                            "verbatim in the real summary",
                   "ridge": SURVIVAL_RIDGE, "slope_ridge": SLOPE_RIDGE},
        "compactions": [{"source": c.source, "trigger": c.trigger, "call": c.call, "input_tokens": c.input_tokens,
                         "input_cl100k": c.input_cl100k, "summary_chars": c.summary_chars,
                         "summary_cl100k": c.summary_cl100k, "facts": len(c.rows),
                         "kept": sum(r.kept for r in c.rows)} for c in comps],
        "model": {k: _round(v) for k, v in model.as_dict().items()},
        "standard_errors": _round(se),
        "fit": _by_kind(rows, model),
        "leave_one_out": leave_one_out(comps),
        "length": {"chars_per_input_token": round(statistics.median(ratios), 5) if ratios else None,
                   "chars_per_input_token_range": [round(min(ratios), 5), round(max(ratios), 5)] if ratios else None,
                   "summary_chars_range": [min(c.summary_chars for c in comps), max(c.summary_chars for c in comps)],
                   "input_tokens_range": [min(c.input_tokens or 0 for c in comps), max(c.input_tokens or 0 for c in comps)]},
    }


def _round(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6)
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items()}
    return v

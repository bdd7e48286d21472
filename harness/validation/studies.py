"""Each study's result approached in ctxsim: the setup (sessions, strategies, window, model and prices),
ctxsim's figure, and whether it agrees with the published one, with the reason where it does not.

One function per study, ``fast`` for the quick version a test runs (fewer and shorter sessions,
fewer real logs). Everything is seeded: the same checkout gives the same figures. Agreement is a
stated rule per study (``Finding.rule``), decided on the numbers, never by hand.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxsim.harness.validation import published as pub
from ctxsim.harness.validation import shapes

MODEL_SWE = "claude-sonnet-4-6"   # ratios of cost do not depend on the price level (output aside)


@dataclass
class Finding:
    """One study reproduced: what ctxsim measured against what was published."""

    published: pub.Published
    setup: str
    headline: str                     # ctxsim's figure in a few words (the table's column)
    ctxsim: str                       # ctxsim's figure, in the words of the published one
    agrees: str                       # "yes", "partly" or "no"
    rule: str                         # how agreement was decided
    reason: str = ""                  # why the figures differ, or what the agreement rests on
    difference: str = ""              # "finding" (ctxsim says something the study does not), "setup" (the
    #                                   study's setup is not published), "model" (ctxsim does not model it)
    figures: dict[str, float] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)   # Markdown lines for docs/validation.md


def _replay(trace, strategy, params: dict[str, Any] | None = None, **cfg):
    from ctxsim.harness.replay.engine import RunConfig, replay

    return replay(trace, strategy, params or {}, RunConfig(**cfg))


def _tokens(m: dict) -> int:
    t = m["tokens"]
    return t["input_uncached"] + t["cache_write"] + t["cache_read"] + t["output"]


def _input(m: dict) -> int:
    t = m["tokens"]
    return t["input_uncached"] + t["cache_write"] + t["cache_read"]


def prices(model: str) -> str:
    """A model's prices as the price table has them (harness/provider/models.toml), USD per MTok."""
    from ctxsim.harness.provider.models import load_table

    m = load_table().get(model)
    write = f", cache write ${m.cache_write_5m:g}" if m.cache_write_5m is not None else ""
    long = (f"; past {m.long_context.threshold:,} input ${m.long_context.input:g} / output ${m.long_context.output:g}"
            if m.long_context is not None else "")
    return (f"{model} (${m.input:g} input, ${m.cache_read:g} cache read{write}, ${m.output:g} output per MTok{long}; "
            f"window {m.window:,})")


def pct(x: float) -> str:
    return f"{x:+.1%}"


def _within(x: float, target: float, tol: float) -> bool:
    return abs(x - target) <= tol


# --- The Complexity Trap --------------------------------------------------------------------------

def complexity_trap(fast: bool = False, real: Path | None = None) -> Finding:
    from ctxsim.harness.validation.arms import SweAgentProcessors

    p = pub.COMPLEXITY_TRAP
    shape = shapes.swe_episodes(fast)
    arms = {"raw": ("append_only", {}), "masking": ("observation_masking", {"n": 10}),
            "summary": (SweAgentProcessors, {"summarize_n": 21, "keep_last_m": 10}),
            "hybrid": (SweAgentProcessors, {"summarize_n": 43, "keep_last_m": 10, "mask_n": 10})}
    cost = dict.fromkeys(arms, 0.0)
    cached = dict.fromkeys(arms, 0.0)
    summary_cost = dict.fromkeys(arms, 0.0)
    prompt: dict[str, list[float]] = {a: [] for a in arms}
    retention: dict[str, list[float]] = {a: [] for a in arms}
    for _, _, trace in shape.traces():
        for a, (strategy, params) in arms.items():
            r = _replay(trace, strategy, params, window=200_000, model=MODEL_SWE, cache=False)
            calls = r.calls
            cost[a] += r.metrics["cost_usd"]
            summary_cost[a] += float(calls.loc[calls["kind"] == "summary", "cost_usd"].sum())
            prompt[a] += list(calls.loc[calls["kind"] == "main", "context_tokens"])
            retention[a].append(r.metrics["retention"]["score"])
            with_cache = {**params, "cache_breakpoints": True} if strategy == "append_only" else params
            cached[a] += _replay(trace, strategy, with_cache, window=200_000, model=MODEL_SWE).metrics["cost_usd"]
    f = {"masking_vs_raw": cost["masking"] / cost["raw"] - 1, "summary_vs_raw": cost["summary"] / cost["raw"] - 1,
         "hybrid_vs_masking": cost["hybrid"] / cost["masking"] - 1,
         "hybrid_vs_summary": cost["hybrid"] / cost["summary"] - 1,
         "summary_cost_share": summary_cost["summary"] / cost["summary"],
         "raw_mean_prompt_tokens": statistics.fmean(prompt["raw"]),
         "masking_mean_prompt_tokens": statistics.fmean(prompt["masking"]),
         "cached_masking_vs_raw": cached["masking"] / cached["raw"] - 1,
         "cached_summary_vs_raw": cached["summary"] / cached["raw"] - 1}
    masking_ok = _within(f["masking_vs_raw"], p.figures["masking_vs_raw"], 0.10)
    summary_ok = _within(f["summary_vs_raw"], p.figures["summary_vs_raw"], 0.10)
    same50 = (_within(f["hybrid_vs_masking"], p.figures["hybrid_vs_masking_same50"], 0.05)
              and _within(f["hybrid_vs_summary"], p.figures["hybrid_vs_summary_same50"], 0.05))
    agrees = "yes" if masking_ok and summary_ok and same50 else "partly" if masking_ok or summary_ok else "no"
    details = [
        "| arm | ctxsim cost (no cache) | vs raw | mean prompt tokens/call | retention | with prompt caching, vs raw |",
        "|---|---|---|---|---|---|",
        *(f"| {a} | ${cost[a]:.2f} | {pct(cost[a] / cost['raw'] - 1)} | {statistics.fmean(prompt[a]):,.0f} | "
          f"{statistics.fmean(retention[a]):.3f} | {pct(cached[a] / cached['raw'] - 1)} |" for a in arms),
    ]
    if real is not None:
        details += _swe_real(real)
    return Finding(
        published=p,
        setup=(f"{shape.describe()}, SWE-bench-shaped (one task, one action per step). Arms: raw = `append_only`; "
               "masking = `observation_masking` n=10 (M=10, polling 1); LLM-Summary = SWE-agent's "
               "SummarizeEveryNTurns N=21, M=10 with static checkpointing; hybrid = N=43, M=10 then masking W=10 "
               f"(ctxsim.harness.validation.arms). 200k window, priced on {prices(MODEL_SWE)} without prompt caching "
               "(the study priced every input token: a cost ratio does not depend on the price level); again with "
               "Anthropic prompt caching for the finding (the raw agent then marks its last message, masking SWE-agent's "
               "last two)."),
        headline=(f"masking {pct(f['masking_vs_raw'])} vs raw; hybrid {pct(f['hybrid_vs_masking'])} / "
                  f"{pct(f['hybrid_vs_summary'])}"),
        ctxsim=(f"masking {pct(f['masking_vs_raw'])}, summary {pct(f['summary_vs_raw'])} vs raw; hybrid "
                f"{pct(f['hybrid_vs_masking'])} / {pct(f['hybrid_vs_summary'])} vs masking / summary; with prompt "
                f"caching masking {pct(f['cached_masking_vs_raw'])}"),
        agrees=agrees,
        rule=("masking and summary within 10 points of -52.7% and -50.6% (Qwen3-Coder); hybrid within 5 points of "
              "the study's own same-instance gaps (-10.3%, -23.9%)"),
        reason=(f"Without caching ctxsim reproduces the halving (the raw agent's mean prompt "
                f"{f['raw_mean_prompt_tokens']:,.0f} tokens/call against the study's 22.8k, masking's "
                f"{f['masking_mean_prompt_tokens']:,.0f} against 10.9k) and the hybrid's gaps on the same sessions; "
                "the published 7%/11% compare the hybrid's 50-instance subset with the full 500-instance runs "
                "(-6.3% / -10.2% in the released data; the 50 are costlier than the average instance: raw $2.17 "
                "against $1.29). The "
                f"checkpoint calls are {f['summary_cost_share']:.1%} of the summary arm's cost (study: 7.4%). "
                "Finding: with prompt caching (Anthropic prices, SWE-agent's cache markers) masking at polling 1 "
                "rewrites an old observation on every call, so the cache is written again from there each step: "
                f"masking costs {pct(f['cached_masking_vs_raw'])} against a raw agent that reads its prefix from "
                "the cache. ctxsim's retention model also scores masking below raw, where the study finds equal "
                "solve rates."),
        difference="finding",
        figures=f,
        details=details,
    )


def _swe_real(real: Path) -> list[str]:
    """The bundled SWE-agent trajectory (12 calls): masking acts only past 10 observations."""
    log = real / "swe-agent" / "pydicom__pydicom-1458.traj"
    if not log.is_file():
        return []
    from ctxsim.harness.importers import import_file

    trace = import_file("swe-agent", log).trace
    raw = _replay(trace, "append_only", {}, cache=False).metrics["cost_usd"]
    masked = _replay(trace, "observation_masking", {"n": 10}, cache=False).metrics["cost_usd"]
    return ["", f"On the bundled real SWE-agent log (pydicom__pydicom-1458, 12 calls, as it recorded them, no "
                f"cache): masking n=10 {pct(masked / raw - 1)} against raw (${raw:.2f}): a 12-step episode holds "
                "too few observations for masking to act; the study's savings come from the long episodes."]


# --- OpenHands condenser ---------------------------------------------------------------------------

def _per_turn(calls) -> list[float]:
    """Cost per main call, the side calls made before it (its condensation) included."""
    out, acc = [], 0.0
    for kind, c in zip(calls["kind"], calls["cost_usd"], strict=True):
        acc += float(c)
        if kind == "main":
            out.append(acc)
            acc = 0.0
    return out


def openhands_condenser(fast: bool = False, real: Path | None = None) -> Finding:
    p = pub.OPENHANDS_CONDENSER
    shape = shapes.long_episodes(fast)
    arms = {"baseline": ("append_only", {"cache_breakpoints": True}), "v0": ("openhands", {"release": "v0"}),
            "v1": ("openhands", {})}
    ratios: dict[str, list[float]] = {a: [] for a in arms if a != "baseline"}
    uncached: dict[str, list[float]] = {a: [] for a in arms if a != "baseline"}
    totals: dict[str, list[float]] = {a: [] for a in arms}
    for _, _, trace in shape.traces():
        for cache, into in ((True, ratios), (False, uncached)):
            turns = {}
            for a, (strategy, params) in arms.items():
                r = _replay(trace, strategy, params, window=200_000, model="claude-3-5-sonnet", cache=cache)
                turns[a] = _per_turn(r.calls)
                if cache:
                    totals[a].append(r.metrics["cost_usd"])
            q = len(turns["baseline"]) * 3 // 4
            base = statistics.fmean(turns["baseline"][q:])
            for a in into:
                into[a].append(base / statistics.fmean(turns[a][q:]))
    f = {"per_turn_cost_ratio": statistics.fmean(ratios["v0"]), "per_turn_cost_ratio_v1": statistics.fmean(ratios["v1"]),
         "per_turn_cost_ratio_uncached": statistics.fmean(uncached["v0"]),
         "session_cost_v0": sum(totals["v0"]) / sum(totals["baseline"]) - 1}
    ok = f["per_turn_cost_ratio"] >= p.figures["per_turn_cost_ratio"]
    details = ["| condenser | baseline ÷ condensed, cost per turn over the last quarter (cached) | without caching | "
               "session cost vs baseline (cached) |", "|---|---|---|---|"]
    for a in ratios:
        details.append(f"| openhands {a} | {statistics.fmean(ratios[a]):.2f}x | {statistics.fmean(uncached[a]):.2f}x | "
                       f"{pct(sum(totals[a]) / sum(totals['baseline']) - 1)} |")
    if real is not None:
        details += _openhands_real(real)
    return Finding(
        published=p,
        setup=(f"{shape.describe()}: long single-task sessions. Baseline = `append_only` with a cache marker on the "
               "last message; condensed = `openhands` release v0 (LLMSummarizingCondenser as OpenHands ran it in "
               "2025: 120 events, keep 4; the post's own setting is not published) and v1 (the SDK's default "
               f"agent today: 80 events, keep 4). 200k window, {prices('claude-3-5-sonnet')}, prompt caching on "
               "(OpenHands caches on Anthropic). Cost per turn = the main call and the condensation before it."),
        headline=f"cost per turn {f['per_turn_cost_ratio']:.2f}x lower late in the session",
        ctxsim=(f"the condensed agent's cost per turn over the last quarter is {f['per_turn_cost_ratio']:.2f}x lower "
                f"(v0; v1 {f['per_turn_cost_ratio_v1']:.2f}x); session cost {pct(f['session_cost_v0'])}"),
        agrees="yes" if ok else "no",
        rule="the baseline's cost per turn over the last quarter of the session at least 2x the condensed agent's",
        reason=("The baseline's cost per turn grows with its context while the condenser's stays bounded, so late "
                "in a long session it settles below half, as the post describes; without caching the gap is wider "
                f"({f['per_turn_cost_ratio_uncached']:.2f}x), since the baseline then pays full price for its whole "
                "history on every turn. The post's solve rates (54% vs 53%) have no counterpart in a replay."),
        figures=f,
        details=details,
    )


def _openhands_real(real: Path) -> list[str]:
    log = real / "openhands" / "basic_gui_mode.json"
    if not log.is_file():
        return []
    from ctxsim.harness.importers import import_file

    trace = import_file("openhands", log).trace
    m = _replay(trace, "openhands", {"release": "v0"}).metrics
    calls = sum(1 for e in trace.events if type(e).__name__ == "AssistantEvent")
    return ["", f"The bundled real OpenHands log (basic_gui_mode, V0, {calls} calls) never reaches the condenser's "
                f"120 events ({m['compactions']['succeeded']} condensations): it cannot test the claim."]


# --- Anthropic context editing ---------------------------------------------------------------------

def context_editing(fast: bool = False, real: Path | None = None) -> Finding:
    p = pub.CONTEXT_EDITING
    shape = shapes.web_research(fast)
    full = edited = spent = 0
    full_cost = edited_cost = 0.0
    failed_at: list[int] = []
    peaks: list[int] = []
    per_session: list[float] = []
    details = ["| session (seed) | full history peak | 200k baseline | tokens, cleared vs uncleared | cost |",
               "|---|---|---|---|---|"]
    for _, seed, trace in shape.traces():
        base = _replay(trace, "append_only", {"cache_breakpoints": True}, window=200_000, model="claude-sonnet-4-5").metrics
        failed_at.append(base["failed_at_call"] if base.get("completed") is False else -1)
        spent += _tokens(base)
        whole = _replay(trace, "append_only", {"cache_breakpoints": True}, window=1_000_000,
                        model="claude-sonnet-4-5").metrics
        full += _tokens(whole)
        full_cost += whole["cost_usd"]
        peaks.append(whole["peak_context_tokens"])
        ce = _replay(trace, "context_editing", {}, window=200_000, model="claude-sonnet-4-5").metrics
        edited += _tokens(ce)
        edited_cost += ce["cost_usd"]
        per_session.append(_tokens(ce) / _tokens(whole) - 1)
        details.append(f"| {seed} | {whole['peak_context_tokens']:,} | "
                       f"{'fails at call ' + str(failed_at[-1]) if failed_at[-1] >= 0 else 'completes'} | "
                       f"{pct(_tokens(ce) / _tokens(whole) - 1)} | {pct(ce['cost_usd'] / whole['cost_usd'] - 1)} |")
    f = {"token_reduction": edited / full - 1, "cost_change": edited_cost / full_cost - 1,
         "reduction_min": max(per_session), "reduction_max": min(per_session),
         "baseline_failures": sum(1 for x in failed_at if x >= 0), "sessions": len(failed_at),
         "peak_full_history": statistics.fmean(peaks), "vs_failing_baseline": edited / spent - 1}
    ok = _within(f["token_reduction"], p.figures["token_reduction"], 0.10)
    fails = ", ".join(str(x) for x in failed_at if x >= 0) or "none"
    return Finding(
        published=p,
        setup=(f"{shape.describe()}: 100 turns of research (pages and files; their size assumed, so that the whole "
               "history passes the 200k window). `context_editing` with the API's defaults (trigger 100,000 input "
               "tokens, keep 3 tool uses, per request) at 200k against `append_only` at 200k (it fails) and at 1M "
               f"(the consumption the task needs with nothing cleared). {prices('claude-sonnet-4-5')}, prompt caching on."),
        headline=(f"{pct(f['token_reduction'])} tokens" + (f" ({pct(f['reduction_max'])} to "
                  f"{pct(f['reduction_min'])} by session)" if len(per_session) > 1 else "")),
        ctxsim=(f"{pct(f['token_reduction'])} tokens against the uncleared history; the 200k baseline failed in "
                f"{f['baseline_failures']:.0f} of {f['sessions']:.0f} sessions (calls {fails}); cost {pct(f['cost_change'])}"),
        agrees="yes" if ok else "no",
        rule="token consumption within 10 points of -84% (counted against the same task run with nothing cleared)",
        reason=("The saving grows with how far a session runs past the 100k trigger (after it every request keeps "
                f"only the newest 3 results): per session it runs from {pct(f['reduction_min'])} to "
                f"{pct(f['reduction_max'])} as the full history peaks between {min(peaks):,} and {max(peaks):,} "
                f"tokens (mean {f['peak_full_history']:,.0f}), so the pooled figure rests on the assumed "
                "page sizes; the post's sizes and clearing settings are not published, and what it counts the 84% "
                "against (its baseline fails) is not said. Finding: tokens are not dollars. Each clearing rewrites "
                "the prompt after the system block, so the cache is written again: the same run's cost changes by "
                f"{pct(f['cost_change'])} where its tokens fall by {pct(f['token_reduction'])} (Anthropic's cost "
                "guide advises clearing \"in a few large batches\"), and this against an uncleared run that pays "
                "Sonnet 4.5's long-context rate for every request past 200k."),
        difference="setup",
        figures=f,
        details=details,
    )


# --- PNNL condensers ---------------------------------------------------------------------------------

def pnnl_condensers(fast: bool = False, real: Path | None = None) -> Finding:
    p = pub.PNNL_CONDENSERS
    shape = shapes.discovery_tasks(fast)
    arms = {"noop": ("append_only", {}),
            "llm_v0": ("openhands", {"release": "v0", "max_size": 100, "keep_first": 1}),
            "llm_v1": ("openhands", {}),
            "amortized": ("amortized_forgetting", {"max_size": 100, "keep_first": 1}),
            "masking": ("observation_masking", {"n": 50})}
    tokens = dict.fromkeys(arms, 0)
    by_len: dict[int, dict[str, int]] = {}
    for n, _, trace in shape.traces():
        for a, (strategy, params) in arms.items():
            t = _tokens(_replay(trace, strategy, params, window=128_000, model="gpt-4o").metrics)
            tokens[a] += t
            by_len.setdefault(n, dict.fromkeys(arms, 0))[a] += t
    f = {a: tokens[a] / tokens["noop"] - 1 for a in arms if a != "noop"}
    llm_ok = all(p.figures["llm_tokens_low"] <= f[a] <= p.figures["llm_tokens_high"] for a in ("llm_v0", "llm_v1"))
    mask_ok = _within(f["masking"], p.figures["masking_tokens"], 0.10)
    details = ["| calls | " + " | ".join(a for a in arms if a != "noop") + " |",
               "|---|" + "---|" * (len(arms) - 1)]
    for n, t in by_len.items():
        details.append(f"| {n} | " + " | ".join(pct(t[a] / t["noop"] - 1) for a in arms if a != "noop") + " |")
    return Finding(
        published=p,
        setup=(f"{shape.describe()}: single-task sessions of an OpenHands agent (DiscoveryBench's lengths are not "
               "published; 30-120 calls assumed). Condensers with OpenHands V0's class defaults: LLM summarising "
               "(`openhands` v0, max_size 100, keep_first 1) and the SDK's default today (v1, 80/4), amortized "
               "forgetting (100/1), observation masking (attention window 100 events ≈ `observation_masking` n=50 "
               f"observations); noop = `append_only`. {prices('gpt-4o')}, OpenAI's automatic caching. "
               "Tokens = every token of every call, condensation calls included."),
        headline=f"LLM condensers {pct(f['llm_v0'])} / {pct(f['llm_v1'])} tokens; masking {pct(f['masking'])}",
        ctxsim=(f"LLM condensers {pct(f['llm_v0'])} (v0) and {pct(f['llm_v1'])} (v1) tokens; masking "
                f"{pct(f['masking'])}; amortized forgetting {pct(f['amortized'])}"),
        agrees="yes" if llm_ok and mask_ok else "partly" if llm_ok or mask_ok else "no",
        rule="LLM condensers between +24% and +94% tokens; masking within 10 points of -8.6%",
        reason=("In a replay the agent's steps are the recorded ones: a condenser changes what each request holds "
                "(and the closed loop bills the re-reads and restatements of what it loses, "
                "harness/retention/recovery.py), and its summary calls cost less than the context they remove once "
                "a session is long enough to condense (on sessions too short to condense nothing changes). So ctxsim "
                "cannot produce the study's token "
                "increases, which must come from what the agent did differently after condensing: more steps "
                "(the Complexity Trap measured summary trajectories 13-15% longer, OpenHands' post notes extra "
                "turns to condense) and repeated condensation calls. Finding: the cost of a condenser in the "
                "field is mostly behavioural, and a trace replay does not show it; masking's small net saving is "
                "within reach on these lengths."),
        difference="model",
        figures=f,
        details=details,
    )


# --- ACE context collapse ----------------------------------------------------------------------------

def ace_collapse(fast: bool = False, real: Path | None = None) -> Finding:
    """One monolithic rewrite of an ~18,282-token context by ctxsim's simulated summariser (fitted on real
    Claude Code compactions), then the same rewrite repeated on its own output."""
    from ctxsim.harness.llm.services import SUMMARY, CallSpec
    from ctxsim.harness.llm.simulated import SimulatedLLM
    from ctxsim.harness.model.conversation import History, Message, Request
    from ctxsim.harness.replay.runconfig import RunConfig
    from ctxsim.harness.synth import generate, load_preset

    p = pub.ACE_COLLAPSE
    target = int(p.figures["tokens_before"])
    trace = generate(load_preset("short", ["calls=60", *shapes.ONE_TASK]), seed=1)
    seen: list[tuple[int, int, Request]] = []   # (distance to the target, tokens, request)

    def observer(request, info):
        if request.kind == "main":
            seen.append((abs(info["tokens"] - target), info["tokens"], request))

    _replay(trace, "append_only", {}, window=200_000, model=MODEL_SWE, observer=observer)
    _, before, request = min(seen, key=lambda x: x[:2])   # the request nearest the study's context size
    provider = RunConfig(model=MODEL_SWE).provider(trace)
    facts = trace.facts()
    llm = SimulatedLLM(facts, provider.count_text, seed=0)
    spec = CallSpec(kind=SUMMARY, max_output_tokens=20_000)
    text = "\n".join(m.text for m in request.messages)
    present = {k for k, fct in facts.items() if fct.text in text}
    rounds = 3
    sizes, kept = [], []
    current = request
    for _ in range(rounds):
        out = llm.respond(current, spec).text
        sizes.append(provider.count_text(out))
        kept.append(sum(1 for k in present if facts[k].text in out))
        current = Request(request.system, request.tools, History([Message.user(out, origin="summary")]))
    f = {"tokens_before": before, "tokens_after": sizes[0], "ratio": sizes[0] / before,
         "facts_before": len(present), "facts_after_1": kept[0], f"facts_after_{rounds}": kept[-1]}
    ok = f["ratio"] <= 0.05
    return Finding(
        published=p,
        setup=("A synthetic single-task session (`ctxsim synth short --set calls=60` with the SWE shape's overrides, "
               f"seed 1) replayed as is; its request nearest {target:,} tokens (here {before:,}) rewritten whole by "
               "ctxsim's simulated summariser (length and fact survival fitted on real Claude Code compactions), "
               f"then the rewrite rewritten again, {rounds} rewrites in all. claude-sonnet-4-6 token counts."),
        headline=f"{before:,} -> {sizes[0]:,} tokens in one rewrite",
        ctxsim=(f"{before:,} → {sizes[0]:,} tokens in one rewrite ({f['ratio']:.1%}); facts held "
                f"{len(present)} → {kept[0]} → {kept[-1]} after {rounds}"),
        agrees="partly" if ok else "no",
        rule="one rewrite keeps at most 5% of the tokens (ACE: 122 of 18,282, 0.7%)",
        reason=("Both lose over 95% of the context in one monolithic rewrite: ctxsim's summariser writes 0.087 "
                "characters per input token (fitted on real compactions) with a floor of 2,400 characters (about "
                "600 tokens, assumed), so it stops short of ACE's 122 tokens. Finding: by ACE's measure every "
                "Claude Code compaction is a collapse; a summary's size is a fixed share of its input, not of what "
                "the session needs. A rewrite of a rewrite keeps only its section headings and the facts that pass "
                "their survival draw again: the simulated summariser restates conversation material (the user's "
                "messages, reads, reasoning, errors), not an earlier summary's prose, so the second rewrite is "
                "ctxsim's own collapse, sharper than a real model's would likely be (a limit of the model, shown "
                "here). ACE's accuracy (66.7 → 57.1) has no counterpart but the facts held."),
        difference="finding",
        figures=f,
        details=["| rewrite | tokens | facts held |", "|---|---|---|", f"| 0 | {before:,} | {len(present)} |",
                 *(f"| {i} | {s:,} | {k} |" for i, (s, k) in enumerate(zip(sizes, kept, strict=True), 1))],
    )


# --- Manus: cache hit rate, 100:1 ---------------------------------------------------------------------

# the bundled Claude Code logs, and whether their output counts are whole: 2.1.x writes a partial
# streaming count per record (traces/real/README.md), so those logs' input:output ratios run high
REAL_CLAUDE = (("claude-code/codemie/session-196820da.jsonl", True), ("claude-code/codemie/session-624a4a58.jsonl", True),
               ("claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl", False),
               ("claude-code/spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", False))


def manus_cache(fast: bool = False, real: Path | None = None) -> Finding:
    from ctxsim.harness.provider.models import load_table
    from ctxsim.harness.synth import generate, load_preset

    p = pub.MANUS
    rows = []
    if real is not None:
        from ctxsim.harness.importers import import_file

        for rel, counts in REAL_CLAUDE[:1] if fast else REAL_CLAUDE:
            if (real / rel).is_file():
                m = _replay(import_file("claude-code", real / rel).trace, "recorded").metrics
                rows.append((rel.split("/", 1)[1], _input(m) / m["tokens"]["output"], m["cache_hit_rate"], counts))
    whole = [r[1] for r in rows if r[3]]
    trace = generate(load_preset("long-200k", ["calls=300"] if fast else []), seed=1)
    synth = {}
    for name in ("claude_code", "novacode"):
        m = _replay(trace, name, {}, window=200_000).metrics
        nocache = _replay(trace, name, {}, window=200_000, cache=False).metrics
        synth[name] = (_input(m) / m["tokens"]["output"], m["cache_hit_rate"], nocache["cost_usd"] / m["cost_usd"])
    spec = load_table().get("claude-sonnet-4-6")
    f = {"price_ratio": spec.input / spec.cache_read,
         "real_ratio_median": statistics.median(whole) if whole else float("nan"),
         "synthetic_ratio": synth["claude_code"][0], "synthetic_hit_rate": synth["claude_code"][1],
         "cost_without_cache": synth["claude_code"][2]}
    ratios = whole or [f["synthetic_ratio"]]
    ok = 50 <= statistics.median(ratios) <= 200 and abs(f["price_ratio"] - 10) < 1e-9
    details = ["| session | input : output | cache hit rate |", "|---|---|---|",
               *(f"| {n} (real, recorded{'' if w else '; partial output counts'}) | {r:.0f}:1 | {h:.3f} |"
                 for n, r, h, w in rows),
               *(f"| synthetic long-200k{' (300 calls)' if fast else ''}, `{n}` | {v[0]:.0f}:1 | {v[1]:.3f} |"
                 for n, v in synth.items())]
    real_text = (f"real Claude Code logs {', '.join(f'{r[1]:.0f}:1' + ('' if r[3] else '*') for r in rows)} "
                 f"(* partial output counts; median of the whole ones {f['real_ratio_median']:.0f}:1); "
                 if whole else "")
    return Finding(
        published=p,
        setup=(("The bundled real Claude Code logs replayed as recorded (`recorded`: what their API billed), and "
                if rows else "") +
               f"`claude_code` and `novacode` on `ctxsim synth long-200k{' --set calls=300' if fast else ''}` "
               f"(seed 1) at 200k, {prices('claude-sonnet-4-6')}."),
        headline=(f"input:output {f['real_ratio_median']:.0f}:1 (real, whole counts); cached input "
                  f"{f['price_ratio']:.0f}x cheaper" if whole else
                  f"input:output {f['synthetic_ratio']:.0f}:1 (synthetic); cached input {f['price_ratio']:.0f}x cheaper"),
        ctxsim=(f"{real_text}synthetic {f['synthetic_ratio']:.0f}:1 at a {f['synthetic_hit_rate']:.1%} hit rate; "
                f"without caching the same run costs {f['cost_without_cache']:.1f}x; cached input "
                f"{f['price_ratio']:.0f}x cheaper"),
        agrees="yes" if ok else "partly",
        rule=("median input-to-output ratio between 50:1 and 200:1 on the real logs with whole output counts (the "
              "synthetic run without them); the price table's cached input 10x cheaper"),
        reason=("The ratio follows from a context that grows by tool output while each answer is a short call; "
                "the 2.1.x logs' ratios run higher because their output counts are partial streaming counts "
                "(traces/real/README.md), the 2.0.76 logs' are whole. A cache hit rate this high is what makes "
                "the ratio affordable: the same synthetic run costs several times more without caching, which "
                "is why ctxsim reports the hit rate beside every cost."),
        figures=f,
        details=details,
    )


STUDIES = (complexity_trap, openhands_condenser, context_editing, pnnl_condensers, ace_collapse, manus_cache)


def keys() -> list[str]:
    """The studies by name (their published record's key), in the order they are run."""
    return [p.key for p in pub.ALL]


def run_all(fast: bool = False, real: Path | None = None, only: list[str] | None = None,
            progress=None) -> list[Finding]:
    """Every study (or those named in ``only``), in order; ``real``: the folder of the bundled real logs
    (None: synthetic sessions only); ``progress(key)`` is told before each study starts."""
    by_key = dict(zip(keys(), STUDIES, strict=True))
    unknown = sorted(set(only or ()) - set(by_key))
    if unknown:
        raise ValueError(f"unknown stud{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}; "
                         f"known: {', '.join(by_key)}")
    out = []
    for key, study in by_key.items():
        if only and key not in only:
            continue
        if progress is not None:
            progress(key)
        out.append(study(fast=fast, real=real))
    return out

"""Reports for design reviews: ``report.md`` with PNG figures and a self-contained ``index.html``
(figures embedded), from a sweep's results or from a set of runs (``ctxsim compare --report``).

What a reader can rely on:

* every number is per *configuration* (a strategy with its parameters, at a window): the mean over
  its runs (traces × seeds), never a mean over a grid; a configuration is named by its strategy and
  only the parameters that differ from the strategy's defaults;
* a configuration that did not complete its sessions (a rejected request it did not recover from)
  is marked failed in every table, figure and reading, is listed after every one that completed and
  is never compared by cost with them: its cost is only its spend until it failed;
* the recommendation is the cheapest configuration that completed every run with retention at the
  target (the needs-at-risk share kept, with its interval, when the runs carry it:
  harness/report/needs_sections.py; else ``retention.score``), shown with its own metrics; when there is
  none the report says why;
* an Assumptions section states what the numbers rest on, read from the runs (``provenance``).

The report is a list of sections (:data:`SECTIONS`), each a small function of a :class:`Context`
returning a :class:`Section` (or None); adding one is adding a function to that list. Content is
written once as paragraphs, tables and figures (``harness/report/figures.py``) and rendered to both
Markdown and HTML.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from ctxsim.harness.report import figures as figs
from ctxsim.harness.report import formatting as fmt
from ctxsim.harness.report import needs_sections as nsec
from ctxsim.harness.report import opening
from ctxsim.harness.report import tuning_figures as tfig
from ctxsim.harness.report import tuning_sections as tsec
from ctxsim.harness.report.content import Bullets, Context, Para, Raw, Section, Table
from ctxsim.harness.sweep import analysis, columns, tuning, uncertainty
from ctxsim.harness.sweep.executors import flatten
from ctxsim.strategies.departures import assumption_lines

RET = analysis.RETENTION


# --- content, rendered twice -------------------------------------------------------------------------


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _md(item) -> list[str]:
    from ctxsim.harness.report.mdtext import (
        escape,  # labels and parameters are user text: no raw HTML (issue 31)
    )

    if isinstance(item, Raw):
        return [*map(escape, item.md), ""]
    if isinstance(item, Para):
        return [escape(item.text), ""]
    if isinstance(item, Bullets):
        return [f"- {escape(x)}" for x in item.items] + [""]
    if isinstance(item, Table):
        sep = ["---:" if a == "r" else "---" for a in item.align]
        return (["| " + " | ".join(escape(_md_cell(h)) for h in item.headers) + " |", "| " + " | ".join(sep) + " |"]
                + ["| " + " | ".join(escape(_md_cell(c)) for c in r) + " |" for r in item.rows] + [""])
    return [f"![{escape(item.title)}]({item.file})", "", f"*{escape(item.reading)}*", ""]


CSS = ("body{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 16px;line-height:1.4}"
       "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}"
       "th{background:#f4f4f4}.num{text-align:right;white-space:nowrap}tr.failed td{background:#fbeef3}"
       ".tablewrap{max-width:100%;overflow-x:auto}img{max-width:100%;height:auto}figure{margin:1em 0}"
       ".reading{font-style:italic;color:#333}code{font-size:90%;overflow-wrap:anywhere}"
       ".notice{background:#fff4d6;border-left:4px solid #d99a00;padding:6px 10px}")


def render_markdown(title: str, intro: str, sections: list[Section], notes: Sequence[str] = ()) -> str:
    from ctxsim.harness.report.mdtext import escape

    lines = [f"# {escape(title)}", ""]
    for n in notes:   # what these results are not (partial, damaged): before anything else
        lines += [f"> {escape(n)}", ""]
    lines += [escape(intro), ""]
    for s in sections:
        lines += [f"## {escape(s.title)}", ""]
        for item in s.content:
            lines += _md(item)
    return "\n".join(lines)


def render_html(title: str, intro: str, sections: list[Section], out: Path, notes: Sequence[str] = ()) -> str:
    """The page from harness/report/templates/report.html.j2, Markdown spans by markdown-it (harness/report/html.py)."""
    from ctxsim.harness.report import html as report_html

    return report_html.render(title, intro, sections, out, CSS, notes)


# --- what every section reads ------------------------------------------------------------------------

# --- sections ------------------------------------------------------------------------------------------

def _metrics_rows(r: Any) -> list[list[str]]:
    out = [["window", fmt.count(r["window"])], ["completed", fmt.failed_at(r) or f"yes, {fmt.count(r.get('runs', 1))} of {fmt.count(r.get('runs', 1))} runs"],
           ["cost per session", fmt.money(r["cost_usd"])]]
    for key, label, f in (("cache_hit_rate", "cache hit rate", fmt.share), ("latency_s.p95", "p95 latency (s)", fmt.seconds),
                          ("compactions.succeeded", "compactions", fmt.count), ("rejected_requests", "rejected requests (recovered)", fmt.count),
                          ("peak_context_tokens", "peak context (tokens)", fmt.count), (RET, "retention score (attention model)", fmt.share),
                          ("retention.goal", "goal retention", fmt.share)):
        if key in r and not pd.isna(r[key]):
            out.append([label, f(r[key])])
    return out


def section_recommendation(ctx: Context) -> Section:
    # a sweep that tunes a strategy answers with its tuning section; this is then the cheapest of everything
    what = "needs at risk kept" if tuning.has_needs(ctx.runs) else "retention"  # the headline figure (issue 26)
    title = f"Cheapest of all configurations at {what} ≥ {ctx.target:g}" if ctx.answers else "Recommendation"
    if not ctx.rec:
        return Section(title, [Para(f"**No recommendation**: {nsec.no_recommendation_reason(ctx)}.")])
    r = ctx.rec
    changed = analysis.changed_params(r)
    content: list[Any] = [Para(f"**{r['config']}** at window {fmt.count(r['window'])}: the cheapest configuration that "
                               f"completed every run with {what} ≥ {ctx.target:g}.")]
    content += nsec.rec_lines(ctx)
    content.append(Table(["metric", "value"], _metrics_rows(r), ["l", "r"]))
    if changed:
        content.append(Table(["parameter (changed from the default)", "value"],
                             [[f"`{k}`", f"`{fmt.value(v)}`"] for k, v in sorted(changed.items())], ["l", "r"]))
    else:
        content.append(Para(f"Every parameter of `{r['label']}` at its default (`ctxsim strategies {r.get('strategy', r['label'])}`)."))
    return Section(title, content)


def _provenance(runs: pd.DataFrame, prefix: str) -> pd.DataFrame:
    cols = [c for c in runs.columns if c.startswith(prefix)]
    return runs[cols].rename(columns=lambda c: c[len(prefix):])


_PRICE_FIELDS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output", "long_context.above_tokens",
                 "long_context.input", "long_context.output", "as_of", "source")


def _prices(runs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """{model: {field: value}} from the flattened ``provenance.prices.models.<model>.<field>``
    columns (a model name may hold dots: the field is matched from the end)."""
    out: dict[str, dict[str, Any]] = {}
    fields = sorted(_PRICE_FIELDS, key=len, reverse=True)   # "long_context.input" before "input"
    for col, v in _provenance(runs, "provenance.prices.models.").items():
        f = next((f for f in fields if col.endswith("." + f)), None)
        vals = v.dropna().unique()
        if f is None or not len(vals):
            continue
        out.setdefault(col[: -len(f) - 1], {})[f] = vals[0]
    return out


def _uniq(runs: pd.DataFrame, col: str) -> list[Any]:
    return sorted(runs[col].dropna().unique().tolist(), key=str) if col in runs else []


POPULATION_LISTED = 5   # a group of more sessions than this is stated as a population, in one line


def _trace_lines(t: Any) -> list[str]:
    out = []
    kind = t.get("provenance.trace.kind")
    tname = Path(str(t["trace"])).name
    h = f" (hash {str(t['trace_hash'])[:12]})" if "trace_hash" in t and isinstance(t["trace_hash"], str) else ""
    if kind == "synthetic":
        size = f", {fmt.count(t['provenance.trace.calls'])} calls" if not pd.isna(t.get("provenance.trace.calls")) else ""
        desc = (f"synthetic: `ctxsim synth {t.get('provenance.trace.preset')} --seed {fmt.value(t.get('provenance.trace.seed'))}`"
                f"{size}; sizes, tool mix and gaps fitted to real logs, content generated")
    elif kind == "imported":
        desc = f"imported from a {t.get('provenance.trace.format')} log (`{t.get('provenance.trace.path')}`)"
    elif kind == "hand-built":
        desc = "hand-built (a test or example trace)"
    else:
        desc = "source not recorded"
    out.append(f"**Trace** `{tname}`{h}: {desc}.")
    if t.get("provenance.cache_model.fitted") is True:   # harness/provider/routing.py
        out.append(f"**Cache model** of `{tname}`: fitted on the log: {float(t['provenance.cache_model.share']):.1%} of "
                   "requests routed where the session's cache entries are absent (the log's recurring fall-backs), "
                   "applied to every strategy alike; each call billed at the mean over the router's phases "
                   "(the expected bill, not one draw of where requests strayed).")
    return out


def _population_line(group: str, ts: list[Any]) -> str:
    calls = sorted(int(t["calls"]) for t in ts if "calls" in t and not pd.isna(t.get("calls")))
    size = (f"; {fmt.count(calls[0])}–{fmt.count(calls[-1])} calls (median {fmt.count(calls[len(calls) // 2])})"
            if calls else "")
    kinds = {t.get("provenance.trace.kind") for t in ts}
    if kinds == {"synthetic"}:
        seeds = sorted(int(t["provenance.trace.seed"]) for t in ts if not pd.isna(t.get("provenance.trace.seed")))
        span = f" (seeds {seeds[0]}–{seeds[-1]})" if seeds else ""
        desc = (f"a synthetic population, `ctxsim synth {group} --sessions N`{span}: each session's shape (calls, user "
                "turns, tool mix, where the window turns over) drawn from real Claude Code logs "
                "(harness/synth/population.py), content generated")
    elif kinds == {"imported"}:
        desc = "real sessions, imported logs"
    else:
        desc = "traces of several kinds"
    fallbacks = sum(1 for t in ts if t.get("provenance.cache_model.fitted") is True)
    extra = f"; {fallbacks} with a cache model fitted on the log" if fallbacks else ""
    return f"**Population** `{group}`: {len(ts)} sessions, {desc}{size}{extra}."


def section_assumptions(ctx: Context) -> Section:
    runs = ctx.runs
    items: list[Any] = []
    prices = _prices(runs)
    cache = _uniq(runs, "cache")
    if prices:
        rows = []
        for m, p in sorted(prices.items()):
            lc = (f"above {fmt.count(p['long_context.above_tokens'])}: {fmt.value(p.get('long_context.input'))} / "
                  f"{fmt.value(p.get('long_context.output'))}" if "long_context.above_tokens" in p else "none")
            rows.append([m] + [fmt.value(p.get(k)) for k in ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")]
                        + [lc, str(p.get("as_of") or "undated")])
        items.append(Para("**Models and prices** (USD per million tokens, from `harness/provider/models.toml` or the "
                          f"`--models` file; prompt caching {'on' if cache == [True] else 'off' if cache == [False] else 'on and off'}):"))
        items.append(Table(["model", "input", "5 m write", "1 h write", "cache read", "output", "long context", "prices as of"],
                           rows, ["l", "r", "r", "r", "r", "r", "l", "l"]))
        sources = sorted({str(p["source"]) for p in prices.values() if p.get("source")})
        if sources:
            items.append(Para("Price sources: " + "; ".join(sources) + "."))
    else:
        items.append(Para(f"**Models**: {', '.join(map(str, _uniq(runs, 'model')))}; prices not recorded in these results "
                          "(written by an older ctxsim: run them again to have them stated)."))
    bullets = [f"**Windows**: {', '.join(f'{w:,}' for w in ctx.windows)} tokens; the per-strategy figures use {ctx.window:,}."]
    traces = runs.drop_duplicates("trace") if "trace" in runs else runs.iloc[0:0]
    by_group: dict[str, list[Any]] = {}
    for _, t in traces.iterrows():
        by_group.setdefault(tuning.trace_group(t), []).append(t)
    for group, ts in by_group.items():
        if len(ts) > POPULATION_LISTED:   # a population: one line, not one per session
            bullets.append(_population_line(group, ts))
            continue
        for t in ts:
            bullets += _trace_lines(t)
    seeds = _uniq(runs, "seed")
    per = ctx.cfgs["runs"]
    bullets.append(f"**Seeds**: run seed(s) {', '.join(fmt.value(s) for s in seeds) or '–'}; "
                   f"{fmt.count(per.min())}{'–' + fmt.count(per.max()) if per.max() != per.min() else ''} run(s) per "
                   f"configuration and window (traces × seeds), averaged.")
    kinds = _uniq(runs, "provenance.summariser.kind")
    if kinds == ["simulated"]:
        calib = [c for c in _uniq(runs, "provenance.summariser.calibration") if c]
        consts = _provenance(runs, "provenance.summariser.constants.").iloc[0].dropna()
        parts = []
        for col, v in consts.items():
            if col.endswith(".value"):
                cname = col.removesuffix(".value")
                src = consts.get(f"{cname}.source", "")
                parts.append(f"{cname.replace('_', ' ')} {fmt.value(v)}" + (f" ({src})" if src else ""))
        bullets.append("**Summariser**: simulated (`harness/llm/simulated.py`), no model called"
                       + (f"; {'; '.join(parts)}" if parts else "")
                       + (f"; calibration file {', '.join(f'`{c}`' for c in calib)}" if calib else "; no calibration file")
                       + ".")
    elif kinds:
        models = [m for m in _uniq(runs, "provenance.summariser.model") if m]
        bullets.append(f"**Summariser**: {' and '.join(kinds)} ({', '.join(models) or 'the run model'}).")
    else:
        bullets.append("**Summariser**: not recorded in these results.")
    ret = _provenance(runs, "provenance.retention.")
    if len(ret.columns):
        varies = [c for c in ret.columns if ret[c].astype(str).nunique() > 1]
        bullets.append("**Retention model** (`harness/retention/scoring.py`): attention by position (Lost in the Middle), context "
                       f"rot, summary fidelity {fmt.value(ret.iloc[0].get('summary_fidelity'))}, read-back probability "
                       f"{fmt.value(ret.iloc[0].get('recover_probability'))}; every constant with its source is listed "
                       "with the retention intervals below"
                       + (f"; varies across runs: {', '.join(varies)}" if varies else "") + ".")
    else:
        bullets.append("**Retention model**: parameters not recorded in these results.")
    attempts = _uniq(runs, "provenance.max_attempts_per_call")
    bullets.append("**Rejected requests**: not billed; each costs its round trip. A strategy may react and send the call "
                   f"again ({'at most ' + ', '.join(fmt.value(a) for a in attempts) + ' requests per call' if attempts else 'bounded per call'}); "
                   "one that does not recover fails there: the rest of its trace is not replayed and its later probes score 0. "
                   "A failed configuration's cost is its spend until it failed; it is listed last and never ranked by cost.")
    bullets += assumption_lines(runs)  # where each strategy departs from its source (strategies/departures.py)
    items.append(Bullets(bullets))
    return Section("Assumptions", items)


def summary_table(cfgs: pd.DataFrame, with_window: bool) -> Table:
    cols = [("cache_hit_rate", "hit rate", fmt.share), ("latency_s.p95", "p95 s", fmt.seconds),
            ("compactions.succeeded", "compactions", fmt.count), ("rejected_requests", "rejected", fmt.count),
            ("peak_context_tokens", "peak context", fmt.count), (RET, "retention", fmt.share),
            ("retention.goal", "goal", fmt.share)]
    cols = [c for c in cols if c[0] in cfgs]
    runs = "runs" in cfgs and cfgs["runs"].max() > 1
    headers = ["configuration"] + (["window"] if with_window else []) + ["completed", "cost $"] + [h for _, h, _ in cols]
    headers += ["runs"] if runs else []
    rows, failed = [], []
    for _, r in cfgs.iterrows():
        bad = fmt.failed_at(r)
        cost = fmt.money(r["cost_usd"]).lstrip("$")
        row = [str(r["config"])] + ([fmt.count(r["window"])] if with_window else [])
        row += [f"**{bad}**" if bad else "yes", f"({cost} until it failed)" if bad else cost]
        row += [f(r[k]) for k, _, f in cols] + ([fmt.count(r["runs"])] if runs else [])
        rows.append(row)
        failed.append(bool(bad))
    align = ["l"] + (["r"] if with_window else []) + ["l"] + ["r"] * (len(headers) - 2 - (1 if with_window else 0))
    return Table(headers, rows, align, failed)


def section_summary(ctx: Context) -> Section:
    content: list[Any] = []
    for w in ctx.windows:
        d = ctx.cfgs[ctx.cfgs["window"] == w]
        n_bad = int((~d["completed"]).sum())
        content.append(Para(f"**Window {w:,}**: {len(d) - n_bad} of {len(d)} configurations completed"
                            + (f"; {n_bad} failed (listed last, cost = spend until the failure)." if n_bad else ".")))
        content.append(summary_table(d, with_window=False))
    return Section("Summary", content)


def section_sensitivity(ctx: Context) -> Section | None:
    sens = analysis.sensitivity(ctx.runs)
    if sens.empty:
        return None
    top = sens.drop_duplicates(["label", "parameter"]).sort_values("cost_spread", ascending=False).head(10)
    rows = []
    for _, t in top.iterrows():
        vals = sens[(sens["label"] == t["label"]) & (sens["parameter"] == t["parameter"])]
        per = "; ".join(f"{fmt.value(v['value'])}: {fmt.money(v['cost_usd'])}" + (f" ({v['failed']} failed)" if v["failed"] else "")
                        for _, v in vals.iterrows())
        rows.append([t["label"], f"`{t['parameter']}`", per, fmt.money(t["cost_spread"])])
    return Section("Sensitivity", [Para("Mean cost per value of each swept parameter, over the runs that completed "
                                        "(failed runs counted, not averaged in); the ten widest spreads."),
                                   Table(["strategy", "parameter", "cost per value", "spread"], rows, ["l", "l", "l", "r"])])


def section_retention_noise(ctx: Context) -> Section | None:
    """Retention with its interval per configuration, what is within noise, what the seed alone
    reorders, and every retention constant with its source (harness/sweep/uncertainty.py, issue #16)."""
    failed = {(int(r["window"]), r["config"]): fmt.failed_at(r).split(" (")[0]
              for _, r in ctx.cfgs.iterrows() if not r["completed"]}
    last: dict[int, set[str]] = {}
    for w, config in failed:
        last.setdefault(w, set()).add(config)
    lines = uncertainty.report_section(ctx.runs, ctx.probes, last, tsec.noise_pairs(ctx))
    if not lines:
        return None
    title = lines[0].removeprefix("## ").strip() if lines[0].startswith("## ") else "Retention"
    body, window = [], None
    for line in lines[1:] if lines[0].startswith("## ") else lines:
        if line.startswith("### Window "):
            window = int(line.removeprefix("### Window ").replace(",", ""))
        elif line.startswith("## "):  # a sub-part of this section, not a section of the report
            line = "### " + ("The constants behind these retention figures" if "Assumptions" in line else line[3:])
        for (w, config), bad in failed.items():
            if w == window and line.startswith(f"- `{config}`:"):
                line = line.replace(f"- `{config}`:", f"- `{config}` (**{bad}**; probes after it score 0):", 1)
        body.append(line)
    return Section(title, [Raw(body, "")])  # rendered from its Markdown (harness/report/html.py)


def section_errors(ctx: Context) -> Section | None:
    if ctx.errors.empty:
        return None
    return Section(f"Runs that raised an error ({len(ctx.errors)})", [Bullets(
        [f"{r['label']} on {Path(str(r.get('trace', ''))).name}: `{str(r['error']).splitlines()[0]}`"
         for _, r in ctx.errors.iterrows()])])


SECTIONS: list[Callable[[Context], Section | None]] = [
    opening.section,
    opening.population_section,
    tsec.section_tuning,
    lambda ctx: ctx.figure(tfig.fig_front(ctx)) if ctx.answers else None,
    lambda ctx: ctx.figures_section("Response to the swept parameters", tfig.fig_response(ctx)) if ctx.answers else None,
    tsec.section_peers,
    tsec.section_grid_checks,
    section_recommendation,
    section_assumptions,
    section_summary,
    lambda ctx: ctx.figure(figs.fig_cost(ctx)),
    lambda ctx: ctx.figure(figs.fig_sawtooth(ctx)),
    lambda ctx: ctx.figure(figs.fig_cache(ctx)),
    lambda ctx: ctx.figure(figs.fig_latency(ctx)),
    lambda ctx: ctx.figure(figs.fig_retention(ctx)),
    lambda ctx: ctx.figure(tfig.fig_front(ctx)) if not ctx.answers else None,
    lambda ctx: ctx.figure(figs.fig_windows(ctx)),
    lambda ctx: ctx.figure(tfig.fig_grid_ledger(ctx) if ctx.grid_ledger is not None and len(ctx.grid_ledger)
                           else figs.fig_ledger(ctx)),
    tsec.section_ledger,
    nsec.section_needs,
    section_retention_noise,
    lambda ctx: tsec.section_sensitivity(ctx) if ctx.answers else section_sensitivity(ctx),
    section_errors,
]


def default_title(ctx: Context) -> str:
    """What the report answers, from its runs: the swept strategies and parameters, or the strategies
    compared, and the windows."""
    wins = " and ".join(f"{w // 1000:,}k" if w < 1_000_000 else f"{w / 1e6:g}M" for w in ctx.windows)
    if ctx.answers:
        swept = {}
        for a in ctx.answers:
            swept.setdefault(a.label, set()).update(a.swept)
        what = "; ".join(f"{label} {', '.join(sorted(ps))}" for label, ps in swept.items())
        return f"Which settings to ship: {what} at {wins} window{'s' if len(ctx.windows) > 1 else ''}"
    labels = list(dict.fromkeys(ctx.cfgs["label"]))
    return (f"{len(labels)} strategies compared at {wins} window{'s' if len(ctx.windows) > 1 else ''}: cost, cache, "
            "latency and retention")


# --- assembling ----------------------------------------------------------------------------------------

def rows_from_results(results: Sequence[Any]) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """RunResults (from ``compare``) -> the same flat rows a sweep writes, and their call tables."""
    rows, calls = [], {}
    for i, r in enumerate(results):
        m = dict(r.metrics)
        params = m.pop("params", {})
        key = f"run{i}"
        row = {"key": key, "label": r.strategy, "strategy": r.strategy, "error": "",
               "model_setting": r.model_setting}
        # a configuration is the parameters the caller set, as a sweep's rows have them (``param.``): one read
        # from a session's own log (``log.``: claude_code's release, a cache TTL) or left at its default is the
        # session's, so a strategy over sessions of several Claude Code releases is one configuration
        for k, v in params.items():
            if k in r.from_log or k in r.params_set:
                row[f"{'log' if k in r.from_log else 'param'}.{k}"] = json.dumps(v) if isinstance(v, (list, dict)) else v
        row.update({k: v for k, v in flatten(m).items() if k not in row})
        rows.append(row)
        calls[key] = r.calls
    return pd.DataFrame(rows), calls


def write_report(results: Sequence[Any] | pd.DataFrame, out_dir: str | Path, *,
                 calls: dict[str, pd.DataFrame] | None = None, ledger: pd.DataFrame | None = None,
                 target: float = 0.7, title: str | None = None,
                 probes: dict[str, pd.DataFrame] | None = None, notes: Sequence[str] = ()) -> Path:
    """``probes``: run key -> per-probe scores (from the sweep's store), for the retention intervals;
    ``notes``: what these results are not (harness/sweep/coverage.py), the report's first lines."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(results, pd.DataFrame):
        df, calls = results.copy(), calls or {}
    else:
        df, calls = rows_from_results(results)
        probes = {f"run{i}": r.probes for i, r in enumerate(results)}
    errors = df[df["error"].fillna("") != ""] if "error" in df else df.iloc[0:0]
    runs = analysis.with_outcome(analysis.ok_runs(df))
    if runs.empty:
        raise ValueError("no successful runs to report")
    runs = runs.assign(config=[analysis.config_name(r) for _, r in runs.iterrows()])
    cfgs = analysis.by_config(runs)
    cfgs = pd.concat([analysis.ranked(cfgs[cfgs["window"] == w]) for w in sorted(cfgs["window"].unique())])
    ctx = Context(runs, cfgs.reset_index(drop=True), calls, ledger, target, out, errors, probes or {})
    ctx.sets = tuning.settings(runs, probes or {})
    ctx.answers = tuning.answers(ctx.sets)
    ctx.pooled = nsec.pooled(ctx)
    ctx.rec, ctx.rec_setting = nsec.recommend(ctx)  # on needs at risk when the runs have it (issue 26)
    ctx.grid_warnings = tsec.warnings_for(ctx.sets)
    ctx.grid_ledger = tuning.ledger(ctx.answers, calls)
    ctx.retention_method, ctx.cost_column = tuning.retention_method(runs), tuning.cost_column(runs)
    if title is None:
        title = default_title(ctx)
    sections = [s for s in (f(ctx) for f in SECTIONS) if s is not None]
    n_runs = len(runs)
    intro = (f"Generated by `ctxsim report` from {n_runs} run(s). Every number is per configuration (a strategy, "
             "its parameters, a window): the mean over its runs, never over a grid. A configuration is named by its "
             "strategy and only the parameters that differ from the defaults. **Failed** means a request the API "
             "rejected was not recovered from: the session stopped there.")
    from ctxsim.harness.files import atomic

    atomic.write_text(out / "report.md", render_markdown(title, intro, sections, notes))
    atomic.write_text(out / "index.html", render_html(title, intro, sections, out, notes))
    atomic.write(out / "runs.parquet", lambda p: columns.encode(runs).to_parquet(p, index=False))  # one type per column (harness/sweep/columns.py)
    return out

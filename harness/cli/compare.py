"""ctxsim compare TRACE|FOLDER... --strategies a,b,...: every strategy on every trace, one table.

Parameters are set per strategy with ``--set name.key=value`` (``--set codex.auto_compact_fraction=0.8``);
the provider options (``--model``, ``--window``, ``--no-cache``...) apply to every run, so the rows
differ only by strategy (and trace).

Given several sessions (a folder of imported logs, a synthetic population from ``ctxsim synth PRESET
--sessions N``), the answer is about the population (issue 42): one row per strategy over the
sessions (cost per session and needs at risk kept, with 95% intervals over sessions), then every
strategy against the reference paired by session, with n sessions, n needs, the detection limit and
where a difference reverses: the same sentences as the report's (harness/report/opening.py).
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import replace
from pathlib import Path

from ctxsim.harness.cli.options import add_provider_args, run_config, warn_overrides
from ctxsim.harness.report import formatting as fmt

MAX_SEEDS = 1000   # assumed: more seeds than this is a typo (each seed is a full replay per strategy)


def register(sub) -> None:
    p = sub.add_parser(
        "compare", help="several strategies side by side on one or more traces",
        description="Replay each trace through each strategy with the same provider settings and print one "
        "table: cost, tokens by kind, cache hit rate, p50/p95 latency, compactions, overflows, pairing "
        "violations, peak context and retention.")
    p.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (.jsonl), or folders of them (every .jsonl "
                   "under it: an imported folder, a population from synth --sessions)")
    p.add_argument("--strategies", "-s", required=True,
                   help="comma-separated strategy names (`ctxsim strategies`) or MODULE:CLASS of your own")
    p.add_argument("--set", action="append", default=[], metavar="NAME.KEY=VALUE",
                   help="a parameter of one strategy (repeatable), e.g. codex.auto_compact_fraction=0.8")
    add_provider_args(p)
    p.add_argument("--seeds", type=int, default=None, metavar="N",
                   help="run each strategy with N seeds (--seed, --seed + 1, ...; default 3 on one trace, 1 on several: "
                   "the sessions are then the sample) and report retention with a 95%% interval")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="replay on N processes (default: all cores; 1 with --llm live)")
    p.add_argument("--target", type=float, default=0.7, help="on several sessions: the reference is the cheapest "
                   "strategy that completed every session with needs at risk kept >= this (default 0.7)")
    p.add_argument("--json", dest="json_out", default=None, metavar="PATH|-",
                   help="write a list of run metrics (one object per trace × strategy: one row per session, averaged "
                   "over the seeds, with retention.ci95 and per_seed) as JSON")
    p.add_argument("--report", default=None, metavar="DIR", help="write a Markdown/HTML report of the runs to DIR")
    p.add_argument("--quiet", "-q", action="store_true", help="no table on the terminal")
    p.set_defaults(func=run)


def parse_strategy_sets(items: list[str], names: list[str]) -> dict[str, dict[str, str]]:
    """``["codex.max_retries=2"]`` → ``{"codex": {"max_retries": "2"}}``; the name must be one of
    the compared strategies."""
    from ctxsim.harness.cli import BadInput

    out: dict[str, dict[str, str]] = {n: {} for n in names}
    for item in items:
        key, sep, value = item.partition("=")
        name, dot, param = key.strip().partition(".")
        if not sep or not dot or not name or not param:
            raise BadInput(f"--set expects NAME.KEY=VALUE (a strategy name, a dot, a parameter), got {item!r}")
        if name not in out:
            raise BadInput(f"--set {item!r}: {name!r} is not among --strategies ({', '.join(names)})")
        out[name][param.strip()] = value.strip()
    return out


def seed_summary(groups: dict[tuple[int, str], list], cfg) -> tuple[list[dict], list[str]]:
    """One metrics object per trace × strategy (``groups``: (trace number, strategy) -> its runs),
    averaged over its seeds, with the retention interval (harness/sweep/uncertainty.py), and the lines
    saying which strategies are within noise, per trace."""
    from ctxsim.harness.retention.scoring import RetentionParams
    from ctxsim.harness.sweep import uncertainty as un

    weights = RetentionParams(**dict(cfg.retention)).category_weights
    rows, noise = [], []
    by_trace: dict[int, dict[str, list]] = {}
    outcomes: dict[int, dict[str, dict]] = {}  # the same keys: each configuration's seed_outcome, worked out once
    for (ti, name), runs in groups.items():
        row = un.mean_metrics([r.metrics for r in runs])
        outcome = seed_outcome([r.metrics for r in runs])
        row.update(outcome)
        row["seeds"] = [r.seed for r in runs]
        row["per_seed"] = [{"seed": r.seed, "cost_usd": r.metrics["cost_usd"], "completed": r.metrics.get("completed"),
                            "retention": r.metrics["retention"]["score"]} for r in runs]
        blocks = un.blocks_by_config(runs, weights=weights).get(name)
        if blocks:
            est, lo, hi = un.interval(blocks)
            row["retention"] = {**row["retention"], "score": est, "ci95": [lo, hi], "interval": un.METHOD}
        if all("needs_at_risk" in r.metrics for r in runs):   # summed over seeds (harness/retention/needs.py)
            from ctxsim.harness.retention import needs as nd

            row["needs_at_risk"] = nd.pooled([r.metrics["needs_at_risk"] for r in runs], len(runs))
        rows.append(row)
        by_trace.setdefault(ti, {})[name] = runs
        outcomes.setdefault(ti, {})[name] = outcome
    for ti, per in by_trace.items():
        blocks = un.blocks_by_config([r for runs in per.values() for r in runs], weights=weights)
        if len(blocks) >= 2:
            trace = next(iter(per.values()))[0].trace
            failed = outcomes[ti]
            last = {n for n, o in failed.items() if not o["completed"]}
            noise += ["", f"{Path(str(trace)).name}:",
                      *(mark_failed(line, failed) for line in un.noise_lines(blocks, last))]
    return rows, noise


def seed_outcome(runs: list[dict]) -> dict:
    """How the seeds of one configuration ended: ``completed`` only if every seed completed,
    ``failed_at_call`` the earliest failure (an average of call indices, or the first seed's
    ``None`` when a later seed failed, would name a call no run failed at), ``runs`` and
    ``runs_failed``."""
    bad = [m for m in runs if m.get("completed") is False]
    at = [m["failed_at_call"] for m in bad if m.get("failed_at_call") is not None]
    return {"completed": not bad, "failed_at_call": min(at) if at else None, "runs": len(runs), "runs_failed": len(bad)}


def mark_failed(line: str, outcome: dict[str, dict]) -> str:
    """A retention bullet ``- `name`: ...`` of a configuration that failed, marked as the report
    marks it (its later probes score 0, which is part of that number)."""
    for name, o in outcome.items():
        if not o["completed"] and line.startswith(f"- `{name}`:"):
            return line.replace(f"- `{name}`:", f"- `{name}` ({fmt.failed_at(o)}; probes after it score 0):", 1)
    return line


def _report_module():
    try:
        return importlib.import_module("ctxsim.harness.report.build")
    except ModuleNotFoundError as e:
        if e.name == "ctxsim.harness.report.build":
            return None
        raise


def run(args) -> int:
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.cli.run import write_json
    from ctxsim.harness.model import trace as tr
    from ctxsim.strategies import registry

    names = [n.strip() for n in args.strategies.split(",") if n.strip()]
    if not names:
        raise BadInput("--strategies: give at least one strategy name")
    if len(set(names)) != len(names):
        raise BadInput(f"--strategies: a name is repeated in {args.strategies!r}")
    classes = {n: registry.load_class(n) for n in names}   # a name or MODULE:CLASS, as `run` takes
    sets = parse_strategy_sets(args.set, names)
    for n, cls in classes.items():
        registry.make_config(cls, sets[n])  # fail on bad parameters before any work
    report = None
    if args.report:
        report = _report_module()
        if report is None or not hasattr(report, "write_report"):
            print("ctxsim compare: error: report module not available (ctxsim.harness.report.build.write_report)", file=sys.stderr)
            return 2
    paths = expand_traces(args.traces)
    n_seeds = args.seeds if args.seeds is not None else (3 if len(paths) == 1 else 1)
    if not 1 <= n_seeds <= MAX_SEEDS:
        raise BadInput(f"--seeds {n_seeds}: run between 1 and {MAX_SEEDS} seeds")
    if args.workers is not None and args.workers < 1:
        raise BadInput("--workers must be at least 1")
    from ctxsim.harness.cli import checks

    checks.fraction(args.target, "--target")
    checks.output("--json", args.json_out, sources=args.traces)
    checks.output("--report", args.report, sources=args.traces, folder=True)
    traces = [tr.load(p) for p in paths]
    for p, t in zip(paths, traces, strict=True):
        for cls in classes.values():
            checks.strategy_fits(cls, t, p, "--strategies")
    cfg = run_config(args)
    warn_overrides("compare", cfg, traces)
    seeds = [cfg.seed + i for i in range(n_seeds)]
    jobs = [(ti, n, seed) for ti in range(len(traces)) for n in classes for seed in seeds]
    workers = 1 if cfg.backend is not None else (args.workers or os.cpu_count() or 1)
    done = _replay_all(traces, classes, sets, cfg, jobs, workers)
    groups: dict[tuple[int, str], list] = {}  # (trace number, strategy) -> its runs, one per seed
    for (ti, n, _), r in zip(jobs, done, strict=True):
        groups.setdefault((ti, n), []).append(r)
    results = [r for runs in groups.values() for r in runs]
    if len(traces) > 1:
        return _population(args, names, results, paths, traces, groups, classes, cfg, report)
    rows, noise = seed_summary(groups, cfg)
    if args.json_out:
        write_json(rows, args.json_out)
    if not args.quiet and args.json_out != "-":
        from ctxsim.harness.cli.table import print_table

        first = results[0]
        caching = "no prompt caching" if args.no_cache else "prompt caching on"
        where = Path(paths[0]).name
        print_table(rows, title=f"{len(names)} strategies on {where} ({first.model}, window {first.window:,}, {caching}; "
                    f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''})")
        for line in noise:
            print(line)
        from ctxsim.harness.retention import needs as nd

        for line in nd.compare_lines(groups):
            print(line)
    _bill_notes(traces, groups, classes, cfg, args)
    if report is not None:
        from ctxsim.harness.files import atomic

        with atomic.staged_folder(args.report) as stage:   # a new folder appears whole or not at all
            report.write_report(results, stage)
    return 0


def expand_traces(items: list[str]) -> list[str]:
    """Each argument as trace paths: a folder gives every .jsonl under it (sorted)."""
    from ctxsim.harness.cli import BadInput

    out: list[str] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(str(x) for x in p.rglob("*.jsonl"))
            if not found:
                raise BadInput(f"{item}: a folder with no .jsonl trace in it")
            out.extend(found)
        else:
            out.append(item)
    return out


_JOB: dict = {}   # what a forked worker replays from (set before the pool forks)


def _one(i: int):
    from ctxsim.harness.replay.engine import replay

    traces, classes, sets, cfg, jobs = _JOB["args"]
    ti, n, seed = jobs[i]
    return replay(traces[ti], classes[n], sets[n], replace(cfg, seed=seed))


def _chunk(idx: list[int]) -> list[tuple[int, object]]:
    """On a worker: the jobs ``idx``, each its result or None when it raised (run again where the
    error can surface whole)."""
    out = []
    for i in idx:
        try:
            out.append((i, _one(i)))
        except Exception:  # noqa: BLE001 - the parent runs it again, in its own process, to raise it there
            out.append((i, None))
    return out


def _replay_all(traces, classes, sets, cfg, jobs, workers: int) -> list:
    """Every (trace, strategy, seed) of ``jobs``, in order; on ``workers`` forked processes when
    there is more than one job, in chunks of consecutive jobs (a trace's runs kept together, so each
    worker counts its tokens once). A job that raised in a worker is run again here, where its error
    surfaces with its own frames (the strategy's file and line)."""
    _JOB["args"] = (traces, classes, sets, cfg, jobs)
    import multiprocessing as mp

    if workers <= 1 or len(jobs) <= 1 or "fork" not in mp.get_all_start_methods():
        return [_one(i) for i in range(len(jobs))]
    from concurrent.futures import ProcessPoolExecutor

    per = max(1, len(jobs) // (4 * workers))
    chunks = [list(range(a, min(a + per, len(jobs)))) for a in range(0, len(jobs), per)]
    got: dict[int, object] = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork")) as ex:
        for part in ex.map(_chunk, chunks):
            got.update(part)
    return [got[i] if got.get(i) is not None else _one(i) for i in range(len(jobs))]


def _population(args, names, results, paths, traces, groups, classes, cfg, report) -> int:
    """Several sessions: one row per strategy over them, then each against the reference, paired by
    session (the report's own sentences: harness/report/opening.py)."""
    from ctxsim.harness.cli.run import write_json
    from ctxsim.harness.report import opening
    from ctxsim.harness.report.build import rows_from_results
    from ctxsim.harness.sweep import tuning

    df, _ = rows_from_results(results)
    probes = {f"run{i}": r.probes for i, r in enumerate(results)}
    sets = tuning.settings(df.assign(window=[r.window for r in results]), probes)
    lines = opening.population_lines(sets, args.target)
    rows = [_population_row(s) for s in sorted(sets, key=lambda s: (s.window, s.group, not s.completed, s.cost))]
    if args.json_out:   # one object per session (trace) and strategy, as for one trace: results keep a row per session
        write_json(seed_summary(groups, cfg)[0], args.json_out)
    if not args.quiet and args.json_out != "-":
        first = results[0]
        caching = "no prompt caching" if args.no_cache else "prompt caching on"
        seeds = len({r.seed for r in results})
        print(f"{len(names)} strategies on {len(traces)} traces ({first.model}, window {first.window:,}, {caching}; "
              f"{seeds} seed{'s' if seeds != 1 else ''} each; per strategy over its sessions, 95% intervals over "
              "sessions)")
        _print_population(rows)
        print()
        for line in lines:
            print(line.replace("**", "").replace("`", ""))
    _bill_notes(traces, groups, classes, cfg, args)
    if report is not None:
        from ctxsim.harness.files import atomic

        with atomic.staged_folder(args.report) as stage:
            report.write_report(results, stage, target=args.target)
    return 0


def _population_row(s) -> dict:
    r = s.retention
    from ctxsim.harness.sweep import tuning

    cost_lo, cost_hi = tuning.cost_interval(s)
    goal = (sum(v.goal_kept for v in s.needs.values()), sum(v.goal_n for v in s.needs.values()))
    cons = (sum(v.constraints_kept for v in s.needs.values()), sum(v.constraints_n for v in s.needs.values()))
    return {"strategy": s.config, "window": s.window, "sessions": s.n_sessions, "group": s.group,
            "completed": s.completed, "cost_usd": s.cost, "cost_ci95": [cost_lo, cost_hi],
            "needs_at_risk": {"n": r.n, "kept": r.k, "share": r.est, "ci95": [r.lo, r.hi], "sessions": r.sessions},
            "goal": {"n": goal[1], "kept": goal[0]}, "constraints": {"n": cons[1], "kept": cons[0]},
            "per_session": [{"trace": s.names.get(t, t), "cost_usd": c, "needs_at_risk": s.needs[t].n if t in s.needs else None,
                             "kept": s.needs[t].kept if t in s.needs else None} for t, c in s.by_session.items()]}


def _print_population(rows: list[dict]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for h, j in (("strategy", "left"), ("sessions", "left"), ("cost $ per session [95%]", "right"),
                 ("needs kept [95%]", "right"), ("kept/at risk", "right"), ("goal", "right"), ("constraints", "right")):
        t.add_column(h, justify=j, no_wrap=True)  # type: ignore[arg-type]
    for r in rows:
        n = r["needs_at_risk"]
        cost = fmt.money(r["cost_usd"]).lstrip("$")
        ci = r["cost_ci95"]
        cost_cell = f"({cost} until it failed)" if not r["completed"] else (
            f"{cost} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci[0] == ci[0] and ci[1] != ci[0] else cost)
        share = "–" if n["share"] != n["share"] else (
            f"{n['share']:.3f}" + (f" [{n['ci95'][0]:.3f}, {n['ci95'][1]:.3f}]" if n["ci95"][0] == n["ci95"][0] else ""))
        t.add_row(r["strategy"], f"{r['sessions']}" + ("" if r["completed"] else " FAILED"), cost_cell, share,
                  f"{n['kept']:.0f}/{n['n']:.0f}" if n["n"] == n["n"] else "–",
                  f"{r['goal']['kept']:.0f}/{r['goal']['n']}", f"{r['constraints']['kept']:.0f}/{r['constraints']['n']}",
                  style="magenta" if not r["completed"] else None)
    Console(width=160).print(t)


def _bill_notes(traces, groups, classes, cfg, args) -> None:
    """The cache-model line and the >5% bill warning of each imported trace (harness/fidelity/billcheck.py);
    the recorded replay is run for the check when the comparison did not include it."""
    from ctxsim.harness.fidelity.billcheck import bill_warning, cache_model_line
    from ctxsim.harness.replay.engine import replay

    for ti, trace in enumerate(traces):
        lines = [cache_model_line(trace)]
        if trace.header.usage == "per_call" and trace.header.recorded is not None and cfg.cache and not cfg.overrides():
            run = groups[(ti, "recorded")][0] if "recorded" in classes else replay(trace, "recorded", {}, cfg)
            w = bill_warning(trace, run.calls, run.metrics["cost_usd"], args.models_file)
            lines.append(f"warning: {w}" if w else None)
        for line in filter(None, lines):
            print(f"ctxsim compare: {traces[ti].path or ti}: {line}", file=sys.stderr)

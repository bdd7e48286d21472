"""ctxsim calibrate [SOURCE ...]: measure the live summariser's per-category fact survival over
real compactions and write the calibration file the simulated summariser loads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

DEFAULT_SOURCES = ("long-200k", "subagent")  # presets that compact 4 and 1 times under NovaCode at 200k
DEFAULT_WINDOW = 200_000  # the window the bundled long presets are built to cross
DEFAULT_OUT = "traces/calibration/summariser.json"


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="measure the live summariser's fact survival; write a calibration file",
        description="Replay traces with a strategy whose compaction summaries are written by the live model "
        "(--llm live, ANTHROPIC_API_KEY; or --llm replay from a recorded store, no network), and measure, per "
        "fact category, how many of the facts given to the summariser survive in its summary (verbatim, or "
        "with every number and identifier kept). Writes the calibration file the simulated summariser loads "
        "(format ctxsim-summary-calibration v1). A live run costs real money: about one full-window request "
        "per compaction; bound it with --max-compactions.")
    p.add_argument("sources", nargs="*", metavar="SOURCE",
                   help=f"trace files (.jsonl) or synth preset names (default: {' '.join(DEFAULT_SOURCES)})")
    p.add_argument("--strategy", "-s", default="novacode", help="whose summary prompt to measure (default novacode)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a strategy parameter (repeatable)")
    p.add_argument("--llm", choices=["live", "replay", "simulated"], default="live",
                   help="who writes the summaries: the live API (default), a recorded store, or the simulated "
                   "summariser (a self-check of its documented assumptions)")
    p.add_argument("--llm-store", default=None, metavar="PATH", help="response store: recorded (live) or read (replay)")
    p.add_argument("--model", default=None, help="model of the run and of the live summariser (default: "
                   "CTXSIM_LIVE_MODEL, else claude-sonnet-4-6)")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW, help=f"context window (default {DEFAULT_WINDOW:,})")
    p.add_argument("--seed", type=int, default=0, help="seed of the runs and of generated presets")
    p.add_argument("--max-compactions", type=int, default=None, metavar="N", help="stop after N summaries in all")
    p.add_argument("--no-token-scale", action="store_true",
                   help="skip measuring the tokenizer scale (messages.count_tokens on each summary request "
                   "vs the local tokenizer; live and replay only)")
    p.add_argument("-o", "--output", default=DEFAULT_OUT, help=f"calibration file to write (default {DEFAULT_OUT})")
    p.add_argument("--quiet", "-q", action="store_true", help="no table on the terminal")
    p.set_defaults(func=run)


def _load_source(src: str, seed: int):
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.model import trace as tr

    path = Path(src)
    if path.suffix == ".jsonl" or path.exists():
        return tr.load(path), path.stem
    from ctxsim.harness.synth import PresetError, generate, load_preset

    try:
        return generate(load_preset(src), seed), src
    except PresetError as e:
        raise BadInput(f"{src}: neither a trace file nor a preset ({e})") from None


def run(args) -> int:
    from ctxsim.harness.calibration.summariser import EnoughCompactions, SummaryTap, calibration
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.llm.live import LiveError, make_backend
    from ctxsim.harness.llm.response_store import StoreError, StoreMiss
    from ctxsim.harness.replay.engine import RunConfig, replay
    from ctxsim.strategies import registry

    if args.window <= 0:
        raise BadInput("--window must be a positive number of tokens")
    if args.max_compactions is not None and args.max_compactions < 1:
        raise BadInput("--max-compactions must be >= 1")
    cls = registry.load_class(args.strategy)
    params = registry.parse_sets(args.set)
    registry.make_config(cls, params)
    sources = [_load_source(s, args.seed) for s in (args.sources or DEFAULT_SOURCES)]
    base = RunConfig(**({"model": args.model} if args.model else {}), window=args.window, seed=args.seed)
    count = base.provider().count_text
    store = Path(args.llm_store) if args.llm_store else None
    try:
        inner = None if args.llm == "simulated" else make_backend(
            args.llm, store, **({"model": args.model} if args.model else {}))
    except (ValueError, LiveError, StoreError) as e:
        raise BadInput(str(e)) from None

    calls, facts_by_run, traces, models, requests = [], {}, [], set(), []
    for i, (trace, name) in enumerate(sources):
        run_id = f"{i}:{name}"
        facts_by_run[run_id] = trace.facts()
        if not facts_by_run[run_id]:
            raise BadInput(f"{name}: the trace has no fact events: nothing to measure")
        backend = inner
        if backend is None:
            from ctxsim.harness.llm.simulated import SimulatedLLM

            backend = SimulatedLLM(trace.facts(), count, args.seed)
        limit = None if args.max_compactions is None else args.max_compactions - len(calls)
        tap = SummaryTap(backend, count, run_id, limit)
        traces.append({"name": name, "content_hash": trace.content_hash})
        try:
            replay(trace, cls, params, RunConfig(model=base.model, window=args.window, seed=args.seed, backend=tap))
            stop = False
        except EnoughCompactions:
            stop = True
        except (LiveError, StoreMiss) as e:
            raise BadInput(str(e)) from None
        calls += tap.calls
        requests += tap.requests
        models |= {getattr(backend, "model_for", lambda _r: "simulated")(_probe_request(base.model))}
        if not args.quiet:
            print(f"{name}: {len(tap.calls)} summaries measured", file=sys.stderr)
        if stop:
            break
    if not calls:
        raise BadInput(f"no compaction happened in {', '.join(t['name'] for t in traces)} at window "
                       f"{args.window:,}: use longer traces or a smaller --window")
    model = ", ".join(sorted(models))
    cal = calibration(calls, facts_by_run, model=model, strategy=cls.name, traces=traces)
    if inner is not None and not args.no_token_scale:
        from ctxsim.harness.calibration.summariser import token_scale
        from ctxsim.harness.provider import Provider

        raw = Provider(base.model, window=args.window, token_scale=1.0)
        try:
            api = [inner.count_tokens(r) for r in requests]
        except (LiveError, StoreMiss) as e:
            raise BadInput(str(e)) from None
        cal["token_scale"] = token_scale(api, [raw.layout(r).total() for r in requests], model)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(cal, indent=2) + "\n", encoding="utf-8")
    if not args.quiet:
        _print(cal, out)
    return 0


def _probe_request(model: str):
    from ctxsim.harness.model.conversation import History, Request, SystemPrompt, ToolSet

    return Request(SystemPrompt(), ToolSet(), History(), model=model)


def _print(cal: dict, out: Path) -> None:
    try:
        from ctxsim.harness.llm.simulated import DEFAULT_SURVIVAL
    except ImportError:  # the simulated summariser's defaults are only shown when available
        DEFAULT_SURVIVAL = {}
    print(f"{cal['compactions']} summaries by {cal['model']} ({cal['strategy']}'s prompt) on "
          f"{', '.join(t['name'] for t in cal['traces'])}")
    print(f"{'category':<12}{'present':>9}{'survived':>10}{'verbatim':>10}{'rate':>8}{'simulated':>11}")
    for cat, c in [*cal["survival"].items(), ("overall", cal["overall"])]:
        rate = "-" if c["rate"] is None else f"{c['rate']:.2f}"
        sim = DEFAULT_SURVIVAL.get(cat)
        print(f"{cat:<12}{c['present']:>9}{c['survived']:>10}{c['verbatim']:>10}{rate:>8}"
              f"{'' if sim is None else f'{sim:.2f}':>11}")
    if "token_scale" in cal:
        ts = cal["token_scale"]
        print(f"token scale: {ts['scale']:.3f} API tokens per local token ({ts['api_tokens']:,} / "
              f"{ts['local_tokens']:,} over {ts['requests']} requests; use --token-scale {ts['scale']})")
    print(f"wrote {out}")

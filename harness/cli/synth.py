"""ctxsim synth PRESET [--seed N] [--set key=value ...] -o TRACE: write a synthetic session;
ctxsim synth PRESET --sessions N [--window W] -o FOLDER: a population of N sessions, each with its own
shape drawn from real logs (harness/synth/population.py) and its own seed."""

from __future__ import annotations

MAX_SESSIONS = 10_000   # assumed: more is a typo (each session is a file of up to ~10 MB)


def register(sub) -> None:
    p = sub.add_parser("synth", help="generate a synthetic session, or a population of them (--sessions N)",
                       description="Generate a synthetic session from a preset (a name in traces/presets/ or a path "
                       "to a TOML file). The same preset, overrides and seed give byte-identical output. With "
                       "--sessions N, a population: N sessions whose shapes (calls, user turns, tool mix, where the "
                       "window turns over) are drawn from what real logs show, session i with seed SEED + i, written "
                       "to the folder -o.")
    p.add_argument("preset", help="preset name (short, long-200k, long-1m, spill-heavy, multi-session, subagent) or .toml path")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: the preset's, 0; a population's first "
                   "session: 1)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset field; nested fields by dotted path (result_chars.read.median=3000)")
    p.add_argument("--sessions", type=int, default=None, metavar="N",
                   help="a population of N sessions (written to the folder -o)")
    p.add_argument("--window", type=int, default=None, metavar="TOKENS",
                   help="with --sessions: the window the population is for (default 200000; above 200000 every "
                   "session turns it over at least twice)")
    p.add_argument("--workers", type=int, default=None, help="with --sessions: processes that generate (default: all "
                   "cores)")
    p.add_argument("-o", "--output", required=True, help="trace file to write (.jsonl); with --sessions, a folder")
    p.set_defaults(func=run)


def run(args) -> int:
    from ctxsim.harness.cli import BadInput, checks
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.synth import PresetError, generate, load_preset

    checks.seed(args.seed)
    if args.sessions is not None:
        return _population(args)
    if args.window is not None or args.workers is not None:
        raise BadInput("--window and --workers go with --sessions N (a population)")
    checks.output("-o", args.output)
    try:
        cfg = load_preset(args.preset, args.overrides)
    except PresetError as e:
        raise BadInput(str(e)) from None
    trace = generate(cfg, args.seed)
    tr.write(trace, args.output)
    facts = trace.facts()
    probes = sum(1 for e in trace.events if isinstance(e, tr.ProbeEvent))
    print(f"{args.output}: {trace.calls} model calls, {len(trace.events)} events, {len(facts)} facts, "
          f"{probes} probes; hash {trace.content_hash}")
    return 0


def _population(args) -> int:
    import os

    from ctxsim.harness.cli import BadInput, checks
    from ctxsim.harness.model.trace import MAX_TOKENS
    from ctxsim.harness.synth import PresetError, load_preset
    from ctxsim.harness.synth import population as pop

    if not 1 <= args.sessions <= MAX_SESSIONS:
        raise BadInput(f"--sessions {args.sessions}: give between 1 and {MAX_SESSIONS:,} sessions")
    if args.window is not None and not 40_000 <= args.window <= MAX_TOKENS:
        raise BadInput(f"--window {args.window}: give a window between 40,000 and {MAX_TOKENS:,} tokens")
    if args.workers is not None and args.workers < 1:
        raise BadInput("--workers must be at least 1")
    checks.output("-o", args.output, folder=True)
    try:
        load_preset(args.preset, args.overrides)
    except PresetError as e:
        raise BadInput(str(e)) from None
    window = args.window or pop.DEFAULT_WINDOW
    seed = 1 if args.seed is None else args.seed
    made = pop.generate_population(args.preset, args.sessions, seed, args.output, window, args.overrides,
                                   args.workers or os.cpu_count() or 1)
    calls = sorted(s.calls for _, s in made)
    turns = {}
    for _, s in made:
        turns[s.turnovers] = turns.get(s.turnovers, 0) + 1
    print(f"{args.output}: {len(made)} sessions of {args.preset} for a {window:,} window (seeds {seed}-"
          f"{seed + len(made) - 1}): {calls[0]}-{calls[-1]} calls (median {calls[len(calls) // 2]}); turnovers "
          + ", ".join(f"{k}: {n}" for k, n in sorted(turns.items()))
          + f"; shapes drawn from {pop.FITTED.source}")
    return 0

"""ctxsim synth PRESET [--seed N] [--set key=value ...] -o TRACE: write a synthetic session."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("synth", help="generate a synthetic session",
                       description="Generate a synthetic session from a preset (a name in traces/presets/ or a path "
                       "to a TOML file). The same preset, overrides and seed give byte-identical output.")
    p.add_argument("preset", help="preset name (short, long-200k, long-1m, spill-heavy, multi-session, subagent) or .toml path")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: the preset's, 0)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a preset field; nested fields by dotted path (result_chars.read.median=3000)")
    p.add_argument("-o", "--output", required=True, help="trace file to write (.jsonl)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ctxsim.harness.cli import BadInput, checks
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.synth import PresetError, generate, load_preset

    checks.seed(args.seed)
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

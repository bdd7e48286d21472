"""ctxsim calibrate-recovery [LOG ...]: find what the recorded agent re-acquired after each compaction
of real Claude Code logs (its own recovery, beyond the session's background re-read rate), fit the
closed loop's recovery probability per kind to it, and write the data file the replay loads
(harness/data/recovery.json by default)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ctxsim.harness.cli.calibrate_summariser import (
    default_output,
    each_compacting,
    gather,
    log_arguments,
    source_row,
)


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate-recovery", help="fit the recovery model to what real agents re-read after a compaction",
        description="Read Claude Code session logs or traces imported from them (files, or folders searched for "
        "*.jsonl outside subagents/), find every compaction (a conversation copied under several session ids "
        "counted once), count the re-reads and re-runs in the calls after it, up to the next compaction, beyond "
        "the session's background rate (the recorded agent's own recovery), and fit the probability that the "
        "simulated agent re-acquires a lost need at risk, per kind (read, rerun); report the fit and its "
        "leave-one-session-out error. A log that cannot be read is named and skipped (exit 2 after the data "
        "file is written). Offline; no model is called.")
    log_arguments(p, "recovery.json")
    p.add_argument("--window-calls", type=int, default=None, metavar="N",
                   help="calls after a compaction in which re-reads count as its recovery (default 30)")
    p.add_argument("--models", dest="models_file", default=None,
                   help="extra TOML price table for models models.toml lacks (same shape), for raw logs")
    p.add_argument("--no-lost-check", dest="lost_check", action="store_false",
                   help="skip the check of what claude_code marks lost against what the recorded agent re-acquired "
                   "(a claude_code replay of each log)")
    p.add_argument("--quiet", "-q", action="store_true", help="no table on the terminal")
    p.set_defaults(func=run)


def run(args) -> int:
    from ctxsim.harness.calibration import lost_check as lc
    from ctxsim.harness.calibration import recovery_fit as rf
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.replay.engine import RunConfig
    from ctxsim.harness.retention import needs as nd
    from ctxsim.harness.retention import recovery

    window = args.window_calls or rf.WINDOW_CALLS
    if window < 1:
        raise BadInput(f"--window-calls {window}: give at least 1")
    found, keep, skipped = gather(args, "calibrate-recovery")
    comps, sources, items = [], [], []

    def observe(trace, log, k):
        return rf.observe(trace, nd.for_run(trace, RunConfig(models_file=args.models_file).provider(trace)),
                          log.label, window, log.session, k)

    for i, log, trace, got in each_compacting(found, keep, skipped, "calibrate-recovery", observe):
        comps += got
        sources.append(source_row(log, got))
        if args.lost_check:
            try:
                items += lc.items_of(trace, log.session, keep[i], args.models_file, window)
            except Exception as e:  # noqa: BLE001
                sys.stderr.write(f"ctxsim calibrate-recovery: warning: {log.path}: no lost check "
                                 f"({type(e).__name__}: {e})\n")
    if len(comps) < 2 or len({c.session for c in comps}) < 2:
        raise BadInput(f"{len(comps)} compaction(s) in {len({c.session for c in comps})} session(s) of "
                       f"{', '.join(args.logs or ['the default logs'])}: the fit and its leave-one-session-out check "
                       "need at least 2 sessions")
    cmd = "ctxsim calibrate-recovery" + ("" if not args.logs else " " + " ".join(args.logs))
    data = rf.data_file(comps, sources, cmd, window)
    if items:
        data["lost_check"] = lc.report(items)
    from ctxsim.harness.files import atomic

    out = Path(args.output) if args.output else default_output(recovery.DATA)   # never the installed package
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out, json.dumps(data, indent=1) + "\n")   # a full disk is exit 2, no partial file
    if not args.quiet:
        _print(data, out)
    if skipped:
        sys.stderr.write(f"ctxsim calibrate-recovery: {len(skipped)} log(s) skipped (named above); "
                         f"fitted on the other {len(sources)} with compactions\n")
        return 2
    return 0


def _print(d: dict, out: Path) -> None:
    w = sys.stdout.write
    many = len(d["compactions"]) > 12
    if not many:
        w(f"{'compaction':<62}{'kind':<7}{'uses':>5}{'rep':>5}{'bg':>7}{'excess':>8}{'lost':>6}{'LOO pred':>9}\n")
        for c, r in zip(d["compactions"], d["leave_one_out"]["per_compaction"], strict=True):
            for k in ("read", "rerun"):
                w(f"{c['source'][:40] + ' (' + c['trigger'] + ', call ' + str(c['call']) + ')':<62}{k:<7}{c['uses'][k]:>5}"
                  f"{c['repeats'][k]:>5}{c['background'][k]:>7.2f}{c['excess'][k]:>8.2f}{c['lost'][k]:>6}"
                  f"{r[k]['predicted']:>9.2f}\n")
    src = d["source"]
    w(f"{src['compactions']} compactions in {src['sessions']} sessions ({len(src['logs'])} logs)\n")
    w("fitted p: " + ", ".join(f"{k} {v:.3f}" for k, v in d["probability"].items()) + "\n")
    for k, v in d["leave_one_out"]["pooled"].items():
        ratio = f"{v['ratio']:.2f}" if v["ratio"] is not None else "n/a"
        w(f"leave-one-session-out pooled {k}: predicted {v['predicted']:.2f} vs observed excess {v['observed']:.2f} "
          f"(ratio {ratio})\n")
    w("leave-one-session-out mean abs error per compaction: "
      + ", ".join(f"{k} {v:.2f}" for k, v in d["leave_one_out"]["mean_abs_error"].items()) + "\n")
    if "lost_check" in d:
        from ctxsim.harness.calibration.lost_check import lines

        w("\n".join(lines(d["lost_check"])) + "\n")
    w(f"wrote {out}\n")

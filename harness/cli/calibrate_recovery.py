"""ctxsim calibrate-recovery [LOG ...]: find what the recorded agent re-acquired after each compaction
of real Claude Code logs (its own recovery, beyond the session's background re-read rate), fit the
closed loop's recovery probability per kind to it, and write the data file the replay loads
(harness/data/recovery.json by default)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from ctxsim.harness.cli.calibrate_summariser import _default_logs, _logs, default_output, log_arguments


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate-recovery", help="fit the recovery model to what real agents re-read after a compaction",
        description="Import Claude Code session logs (files, or folders searched for *.jsonl outside subagents/), "
        "find every compaction, count the re-reads and re-runs in the calls after it beyond the session's "
        "background rate (the recorded agent's own recovery), and fit the probability that the simulated agent "
        "re-acquires a lost need at risk, per kind (read, rerun); report the fit and its leave-one-out error. "
        "Offline; no model is called.")
    log_arguments(p, "recovery.json")
    p.add_argument("--window-calls", type=int, default=None, metavar="N",
                   help="calls after a compaction in which re-reads count as its recovery (default 30)")
    p.add_argument("--quiet", "-q", action="store_true", help="no table on the terminal")
    p.set_defaults(func=run)


def run(args) -> int:
    from ctxsim.harness.calibration import recovery_fit as rf
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.importers import import_file
    from ctxsim.harness.replay.engine import RunConfig
    from ctxsim.harness.retention import needs as nd
    from ctxsim.harness.retention import probes, recovery

    window = args.window_calls or rf.WINDOW_CALLS
    if window < 1:
        raise BadInput(f"--window-calls {window}: give at least 1")
    items = args.logs or _default_logs()   # the shared logs only beside a checkout (issue 32)
    comps, sources = [], []
    for path, root in _logs(items):
        trace, _ = probes.apply(import_file("claude-code", path).trace)   # as `ctxsim import` derives them
        name = str(path.relative_to(root))
        found = rf.observe(trace, nd.for_run(trace, RunConfig().provider(trace)), name, window)
        if found:
            comps += found
            sources.append({"log": name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
                            "compactions": len(found)})
    if len(comps) < 2:
        raise BadInput(f"{len(comps)} compaction(s) in {', '.join(items)}: the fit and its leave-one-out check "
                       "need at least 2")
    cmd = "ctxsim calibrate-recovery" + ("" if not args.logs else " " + " ".join(args.logs))
    data = rf.data_file(comps, sources, cmd, window)
    from ctxsim.harness.files import atomic

    out = Path(args.output) if args.output else default_output(recovery.DATA)   # never the installed package
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out, json.dumps(data, indent=1) + "\n")   # a full disk is exit 2, no partial file
    if not args.quiet:
        _print(data, out)
    return 0


def _print(d: dict, out: Path) -> None:
    w = sys.stdout.write
    w(f"{'compaction':<62}{'kind':<7}{'uses':>5}{'rep':>5}{'bg':>7}{'excess':>8}{'lost':>6}{'LOO pred':>9}\n")
    loo = {r["source"] + str(i): r for i, r in enumerate(d["leave_one_out"]["per_compaction"])}
    for i, c in enumerate(d["compactions"]):
        r = loo[c["source"] + str(i)]
        for k in ("read", "rerun"):
            w(f"{c['source'][:40] + ' (' + c['trigger'] + ', call ' + str(c['call']) + ')':<62}{k:<7}{c['uses'][k]:>5}"
              f"{c['repeats'][k]:>5}{c['background'][k]:>7.2f}{c['excess'][k]:>8.2f}{c['lost'][k]:>6}"
              f"{r[k]['predicted']:>9.2f}\n")
    w("fitted p: " + ", ".join(f"{k} {v:.3f}" for k, v in d["probability"].items()) + "\n")
    for k, v in d["leave_one_out"]["pooled"].items():
        ratio = f"{v['ratio']:.2f}" if v["ratio"] is not None else "n/a"
        w(f"leave-one-out pooled {k}: predicted {v['predicted']:.2f} vs observed excess {v['observed']:.2f} "
          f"(ratio {ratio})\n")
    w("leave-one-out mean abs error per compaction: "
      + ", ".join(f"{k} {v:.2f}" for k, v in d["leave_one_out"]["mean_abs_error"].items()) + "\n")
    w(f"wrote {out}\n")

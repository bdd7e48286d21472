"""ctxsim calibrate-summariser [LOG ...]: fit the simulated summariser's fact survival to real
compactions (the conversation a real agent summarised and the summary it wrote) and write the data
file the simulated summariser loads (``--summariser survival_file=PATH``; the committed
harness/data/summary_survival.json when run from a checkout with no -o)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

DEFAULT_LOGS = "../shared/traces/real/claude-code"  # the project's Claude Code logs, beside a checkout


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate-summariser", help="fit the simulated summariser to real compactions in Claude Code logs",
        description="Read Claude Code session logs or traces imported from them (files, or folders searched for "
        "*.jsonl outside subagents/; a log that cannot be read is named and skipped, exit 2 after the data file "
        "is written), find every compaction with its summary (a conversation copied under several session ids "
        "counted once), derive the session's facts (as `ctxsim probes` does), and fit "
        "the logistic survival model (kind, uses, mentions, typed by the user, age) to which facts the real "
        "summary kept; report the fit and its leave-one-session-out error by kind, and the summary length per input "
        "token. Offline; no model is called.")
    log_arguments(p, "summary_survival.json")
    p.add_argument("--models", dest="models_file", default=None,
                   help="extra TOML price table for models models.toml lacks (same shape), for raw logs")
    p.add_argument("--quiet", "-q", action="store_true", help="no table on the terminal")
    p.set_defaults(func=run)


def log_arguments(p, data_name: str) -> None:
    """The LOG... and -o arguments every calibrate-* command shares (``data_name``: its data file)."""
    p.add_argument("logs", nargs="*", metavar="LOG", help=f"session logs or folders (default, only when run from a ctxsim checkout: {DEFAULT_LOGS})")
    p.add_argument("-o", "--output", default=None,
                   help=f"data file to write (default: from a checkout, its harness/data/{data_name}; "
                   f"installed, {data_name} in the user data folder, e.g. ~/.local/share/ctxsim)")


def _default_logs() -> list[str]:
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.files import bundled

    real = bundled.shared_logs("claude-code")
    if real is None:
        raise BadInput(f"no LOG given: name the Claude Code session logs (files or folders) to fit on; the default "
                       f"{DEFAULT_LOGS} applies only when run from a ctxsim checkout that has it beside it")
    return [str(real)]


def default_output(packaged: Path) -> Path:
    """From a checkout: the committed data file (``make calibration`` refits it). Installed: the user's
    data folder, never the installed package."""
    from ctxsim.harness.files import bundled

    if bundled.in_checkout():
        return packaged
    import platformdirs

    return Path(platformdirs.user_data_dir("ctxsim")) / packaged.name


def gather(args, fit_name: str):
    """(logs that compacted, which of their compactions count, how many were skipped): the shared
    reading of calibrate-recovery and calibrate-summariser."""
    from ctxsim.harness.calibration import logs as lg
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.model import trace as tr

    items = args.logs or _default_logs()   # the shared logs only beside a checkout (issue 32)
    skipped: list[str] = []

    def warn(msg: str) -> None:
        skipped.append(msg)
        sys.stderr.write(f"ctxsim {fit_name}: warning: {msg}\n")

    try:
        found = list(lg.load(items, args.models_file, warn,
                             keep=lambda t: any(isinstance(e, tr.CompactEvent) for e in t.events)))
    except FileNotFoundError as e:
        raise BadInput(str(e)) from None
    return found, lg.distinct(found), skipped


def each_compacting(found, keep, skipped: list[str], command: str, observe):
    """``(index, log, trace, compactions)`` of each gathered log in which ``observe(trace, log, keep)`` finds
    compactions, on the facts as `ctxsim import` derives them now; a log that fails is named on
    stderr and added to ``skipped`` (the others' work stands)."""
    from ctxsim.harness.retention import probes

    for i, log in enumerate(found):
        try:
            trace, _ = probes.apply(log.trace)
            got = observe(trace, log, keep[i])
        except Exception as e:  # noqa: BLE001  (one log's failure is named; the others' work stands)
            sys.stderr.write(f"ctxsim {command}: warning: {log.path}: skipped ({type(e).__name__}: {e})\n")
            skipped.append(str(log.path))
            continue
        if got:
            yield i, log, trace, got


def source_row(log, got: list) -> dict:
    """What a fitted data file says of a log it drew compactions from (its provenance, never its content)."""
    return {"log": log.label, **log.provenance, "compactions": len(got),
            "version": (log.trace.header.source or {}).get("version")}


def run(args) -> int:
    from ctxsim.harness.calibration import summariser as cal
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.llm import survival
    from ctxsim.harness.provider.tokenizer import get_tokenizer

    count = get_tokenizer().count
    found, keep, skipped = gather(args, "calibrate-summariser")
    comps, sources = [], []
    for _, log, _, got in each_compacting(found, keep, skipped, "calibrate-summariser",
                                       lambda trace, log, k: cal.real_compactions(trace, log.label, count, log.session, k)):
        comps += got
        sources.append(source_row(log, got))
    if len(comps) < 2 or len({c.session for c in comps}) < 2:
        raise BadInput(f"{len(comps)} compaction(s) with a summary in {len({c.session for c in comps})} session(s): "
                       "the fit and its leave-one-session-out check need at least 2 sessions")
    cmd = "ctxsim calibrate-summariser" + ("" if not args.logs else " " + " ".join(args.logs))
    data = cal.survival_file(comps, sources, cmd)
    from ctxsim.harness.files import atomic

    out = Path(args.output) if args.output else default_output(survival.DATA)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out, json.dumps(data, indent=1) + "\n")
    if not args.quiet:
        _print(data, out)
    if skipped:
        sys.stderr.write(f"ctxsim calibrate-summariser: {len(skipped)} log(s) skipped (named above); "
                         f"fitted on the other {len(sources)} with compactions\n")
        return 2
    return 0


def _print(d: dict, out: Path) -> None:
    from ctxsim.harness.llm import survival

    w = sys.stdout.write
    for c in d["compactions"] if len(d["compactions"]) <= 12 else ():
        w(f"{c['source']} ({c['trigger']}, call {c['call']}): {c['input_tokens'] or 0:,} tokens in, "
          f"{c['summary_chars']:,} chars out; {c['kept']} of {c['facts']} facts kept\n")
    w(f"{d['source']['compactions']} compactions in {d['source']['sessions']} sessions ({len(d['source']['logs'])} logs)\n")
    m = d["model"]
    w("model: logit p = {:+.3f}".format(m["intercept"]) + "".join(f" {v:+.3f}·{k}" for k, v in m["coef"].items())
      + " + kind[" + ", ".join(f"{k} {v:+.3f}" for k, v in m["kinds"].items()) + "]\n")
    w("standard errors: " + ", ".join(f"{k} {v:.3f}" for k, v in d["standard_errors"].items()) + "\n")
    w(f"{'kind':<12}{'n':>6}{'real':>8}{'fit':>8}{'LOO n':>8}{'LOO real':>10}{'LOO pred':>10}{'err pts':>9}\n")
    loo = d["leave_one_out"]["pooled"]
    for k, c in d["fit"].items():
        lo = loo.get(k, {})
        flag = "" if lo.get("checked") else "  (too few to check)"
        w(f"{k:<12}{c['n']:>6}{c['real']:>8.2f}{c['predicted']:>8.2f}{lo.get('n', 0):>8}{lo.get('real', 0):>10.2f}"
          f"{lo.get('predicted', 0):>10.2f}{lo.get('error_points', 0):>9.1f}{flag}\n")
    L = d["length"]
    w(f"summary length: {L['chars_per_input_token']} chars per input token (range "
      f"{L['chars_per_input_token_range'][0]}–{L['chars_per_input_token_range'][1]})\n")
    w(f"wrote {out}\n")
    if out.resolve() != survival.DATA.resolve():
        w(f"use it: ctxsim run ... --summariser survival_file={out}\n")

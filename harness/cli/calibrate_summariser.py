"""ctxsim calibrate-summariser [LOG ...]: fit the simulated summariser's fact survival to real
compactions (the conversation a real agent summarised and the summary it wrote) and write the data
file the simulated summariser loads (``--summariser survival_file=PATH``; the committed
harness/data/summary_survival.json when run from a checkout with no -o)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

DEFAULT_LOGS = "../shared/traces/real/claude-code"  # the project's Claude Code logs, beside a checkout


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate-summariser", help="fit the simulated summariser to real compactions in Claude Code logs",
        description="Import Claude Code session logs (files, or folders searched for *.jsonl outside subagents/), "
        "find every compaction with its summary, derive the session's facts (as `ctxsim probes` does), and fit "
        "the logistic survival model (kind, uses, mentions, typed by the user, age) to which facts the real "
        "summary kept; report the fit and its leave-one-out error by kind, and the summary length per input "
        "token. Offline; no model is called.")
    log_arguments(p, "summary_survival.json")
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


def _logs(items: list[str]) -> list[tuple[Path, Path]]:
    """(log file, root it is named relative to)."""
    from ctxsim.harness.cli import BadInput

    out = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            out += [(f, p) for f in sorted(p.rglob("*.jsonl")) if "subagents" not in f.parts]
        elif p.is_file():
            out.append((p, p.parent))
        else:
            raise BadInput(f"{item}: no such file or folder")
    return out


def run(args) -> int:
    from ctxsim.harness.calibration import summariser as cal
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.importers import import_file
    from ctxsim.harness.llm import survival
    from ctxsim.harness.provider.tokenizer import get_tokenizer

    count = get_tokenizer().count
    items = args.logs or _default_logs()
    comps, sources = [], []
    for path, root in _logs(items):
        trace = import_file("claude-code", path).trace
        found = cal.real_compactions(trace, str(path.relative_to(root)), count)
        if found:
            comps += found
            sources.append({"log": str(path.relative_to(root)),
                            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
                            "compactions": len(found)})
    if len(comps) < 2:
        raise BadInput(f"{len(comps)} compaction(s) with a summary in {', '.join(items)}: the fit and its "
                       "leave-one-out check need at least 2")
    cmd = "ctxsim calibrate-summariser" + ("" if not args.logs else " " + " ".join(args.logs))
    data = cal.survival_file(comps, sources, cmd)
    out = Path(args.output) if args.output else default_output(survival.DATA)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    if not args.quiet:
        _print(data, out)
    return 0


def _print(d: dict, out: Path) -> None:
    from ctxsim.harness.llm import survival

    w = sys.stdout.write
    for c in d["compactions"]:
        w(f"{c['source']} ({c['trigger']}, call {c['call']}): {c['input_tokens'] or 0:,} tokens in, "
          f"{c['summary_chars']:,} chars out; {c['kept']} of {c['facts']} facts kept\n")
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

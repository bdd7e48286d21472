"""ctxsim import FORMAT SRC -o OUT: third-party agent logs to traces (the module is not named
``import``: that is a keyword).

SRC is one log (OUT is then the trace file) or a folder of them (``ctxsim.harness.importers.folders``:
a Claude Code project folder or the whole ``~/.claude/projects`` root, a Codex ``~/.codex/sessions``
tree; OUT is then a folder, one trace per session). A folder import prints one row per session —
project, session, start, calls, models, input, cache write, cache read, output, recorded cost,
compactions: what ccusage shows — as text or
``--json``; a session that cannot be imported is reported with its file and line and skipped, and
the exit status says some failed (2; 1 if one failed on an internal error). A corrupt or half-written
line of a Claude Code log is skipped with a warning naming its file and line, the session still
imports, and the exit status is 2 (0 only when nothing of the logs was lost). The import summary of
one log — calls, tool uses, compactions, every record kind ignored or repaired, with counts — is
printed and kept in the trace header's notes.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxsim.harness.importers import FORMATS

if TYPE_CHECKING:
    from ctxsim.harness.fidelity.recorded import BilledCall


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD, got {text!r}") from None


def register(sub) -> None:
    p = sub.add_parser(
        "import", help="third-party logs → traces (a file, or a folder of sessions)",
        description="Convert recorded agent sessions into ctxsim traces. Formats: claude-code (a session .jsonl "
        "with its <session>/subagents/, a project folder ~/.claude/projects/<project>/, or the projects root "
        "~/.claude/projects/), codex (a rollout .jsonl or a ~/.codex/sessions/ tree), swe-agent (.traj), "
        "openhands (event stream .json). A truncated or foreign file fails with its path, line and reason; in a "
        "folder it is reported and skipped (exit 2 when some failed).")
    p.add_argument("format", choices=list(FORMATS), help="log format")
    p.add_argument("src", help="the log file, or a folder of sessions")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="trace file to write (.jsonl); for a folder of sessions, the folder to write them to")
    p.add_argument("--json", dest="json_out", action="store_true",
                   help="print the import summary (a folder: the per-session table) as JSON")
    p.add_argument("--since", type=_date, default=None, metavar="YYYY-MM-DD",
                   help="only sessions that started on or after this date (UTC)")
    p.add_argument("--until", type=_date, default=None, metavar="YYYY-MM-DD",
                   help="only sessions that started on or before this date (UTC)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (none either when stderr is not a terminal)")
    p.add_argument("--models", dest="models_file", default=None,
                   help="extra TOML price table for models models.toml lacks (same shape)")
    p.add_argument("--no-probes", action="store_true",
                   help="do not derive facts and probes from the content (`ctxsim probes` does it later)")
    p.set_defaults(func=run)


def import_one(fmt: str, src: Path, out: Path, args) -> tuple[Any, dict[str, Any], Any, list[str]]:
    """Import, derive probes, write and re-load one session; returns (trace, summary, derived,
    warnings: what was lost on the way, e.g. a corrupt line skipped, one line each)."""
    from ctxsim.harness.importers import import_file
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.retention import probes

    result = import_file(fmt, src, models_file=args.models_file)
    trace, derived = (result.trace, None) if args.no_probes else probes.apply(result.trace)
    _check_header(trace, src)   # refused before anything is written, naming the log
    tr.write(trace, out)
    try:
        tr.load(out)  # what was written must load: an importer bug fails here, not at replay
    except BaseException:
        out.unlink(missing_ok=True)   # a trace that does not load is not left behind
        raise
    return trace, result.summary, derived, result.warnings


def _check_header(trace, src: Path) -> None:
    """The header as ``tr.load`` will check it (a fitted token scale out of its bounds is a log
    whose usage does not fit its content: shuffled, edited, or another session's)."""
    from ctxsim.harness.model import trace as tr
    from pydantic import ValidationError

    try:
        tr.Header.model_validate(trace.header.model_dump())
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(map(str, err["loc"]))
        hint = (": the log's recorded usage does not fit its content (shuffled or edited?)"
                if where.endswith("token_scale") else "")
        raise tr.TraceError(src, None, f"header.{where} would be {err.get('input')!r}: "
                            f"{err['msg'].removeprefix('Value error, ')}{hint}; nothing written") from None


TOKEN_KINDS = ("input", "cache_write", "cache_read", "output")


def _counted(calls: list[BilledCall]) -> dict[str, Any]:
    """A row's calls, tokens (ccusage's columns) and cost over the calls it counts."""
    usages = [c.usage for c in calls]
    return {"calls": len(calls),
            "tokens": {"input": sum(u.input for u in usages),
                       "cache_write": sum(u.cache_write_5m + u.cache_write_1h for u in usages),
                       "cache_read": sum(u.cache_read for u in usages), "output": sum(u.output for u in usages)},
            "recorded_cost_usd": round(sum(c.cost_usd for c in calls), 4)}


def session_row(project: str, src: Path, out: Path, trace,
                models_file: str | None) -> tuple[dict[str, Any], list[BilledCall], list[BilledCall]]:
    """One row of the per-session table, the calls it counts and the copies of an earlier session's
    calls it holds (``BilledCall``: request id, usage, cost), for :func:`count_once`."""
    from ctxsim.harness.fidelity.recorded import priced_calls
    from ctxsim.harness.model import trace as tr

    rec = trace.header.recorded
    models = {m: sum(r.values()) for m, r in (rec.models if rec else {}).items()}
    per_call = trace.header.usage == "per_call"
    # calls: every API call the log billed (its compaction calls too), as the cost and models count them
    calls = priced_calls(trace, models_file) if per_call else []
    copies = priced_calls(trace, models_file, copied=True) if per_call else []
    cwd = (trace.header.source or {}).get("cwd")   # a Codex session names its project by its working folder
    project = Path(cwd).name or project if isinstance(cwd, str) and cwd else project
    # None: the log records no per-call usage
    counted = _counted(calls) if per_call else {"calls": trace.calls, "tokens": None, "recorded_cost_usd": None}
    return {"project": project, "session": src.stem, "start": (trace.header.source or {}).get("start"),
            **counted, "models": models,
            "compactions": sum(1 for e in trace.events if isinstance(e, tr.CompactEvent)),
            "route": (trace.header.source or {}).get("route"),   # who served the calls (Claude Code logs)
            **({"thread": thread} if isinstance(thread := (trace.header.source or {}).get("thread"), str) else {}),
            "source": str(src), "trace": str(out)}, calls, copies


def count_once(rows: list[dict[str, Any]], calls: list[list[BilledCall]],
               copied: list[list[BilledCall]] | None = None) -> list[str]:
    """Each API call counted in one row only, as ccusage counts it (ryoppippi/ccusage
    ``data-loader.ts``: one entry per ``message.id:requestId`` over all files, files in the order of
    their earliest timestamp): a conversation resumed into a new session file (Claude Code 1.0.x)
    carries copies of the calls it continues, with their usage, and they were billed once, in the
    session that made them. The importer marks the copies it recognises (``AssistantEvent.copied``:
    ``copied[i]``, never counted here); a row whose other calls were made in an earlier session loses
    them from its calls, tokens and cost. A row with copies says how many, what they cost and where
    they were made (``copied_calls``); returns one note per such row. Mutates ``rows``; ``calls[i]``
    are row i's (:func:`session_row`)."""
    seen: dict[tuple, str] = {}
    notes = []
    copied = copied or [[] for _ in rows]

    def key(c: BilledCall) -> tuple | None:   # a copy carries the call's usage too: a proxy's reused id is no copy
        return (c.request_id, c.usage) if c.request_id else None

    found: dict[int, list[BilledCall]] = {}
    for i in sorted(range(len(rows)), key=lambda i: (rows[i]["start"] or "", i)):
        row, mine, here = rows[i], calls[i], f"{rows[i]['project']}/{rows[i]['session']}"
        again = [c for c in mine if key(c) in seen]
        for c in mine:
            if key(c) is not None:
                seen.setdefault(key(c), here)
        if again:
            row.update(_counted([c for c in mine if key(c) is None or seen[key(c)] == here]))
        if copied[i] or again:
            found[i] = copied[i] + again
    # a forked Codex thread's copies name the thread they were copied from (no request id to match): its row
    threads = {r["thread"]: f"{r['project']}/{r['session']}" for r in rows if isinstance(r.get("thread"), str)}
    for i, copies in sorted(found.items()):   # where each was made: any session of the folder (a copy can be stamped before it)
        row = rows[i]
        made_in = sorted({seen[key(c)] for c in copies if key(c) in seen}
                         | {threads[c.copied_from] for c in copies if c.copied_from in threads})
        row["copied_calls"] = {"calls": len(copies), "cost_usd": round(sum(c.cost_usd for c in copies), 4),
                               "made_in": made_in}
        forked = sorted({c.copied_from for c in copies if c.copied_from})
        where = ", ".join(made_in) if made_in else (
            f"thread {', '.join(forked)}, which this folder does not hold" if forked
            else "an earlier session this folder does not hold")
        why = "a forked thread copies its parent's history" if forked else "a resumed conversation copies them"
        counted = "counted there, once" if made_in else "billed there, not counted here"
        notes.append(f"{row['source']}: {len(copies)} of its calls are copies of calls made in "
                     f"{where} ({why}): {counted} (${row['copied_calls']['cost_usd']:.2f})")
    return notes


def _progress(total: int, enabled: bool):
    if not enabled or total < 2 or not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("import"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    TextColumn("{task.fields[name]}"), console=Console(stderr=True), transient=True)


def print_table(rows: list[dict[str, Any]]) -> None:
    kinds = TOKEN_KINDS
    cols = ["project", "session", "start", "calls", "models", "input", "cache write", "cache read", "output",
            "recorded $", "compactions"]
    cells = [[r["project"], r["session"], (r["start"] or "?")[:19].replace("T", " "), f"{r['calls']:,}",
              ", ".join(f"{m} ×{n}" for m, n in r["models"].items()),
              *(("?",) * 4 if r.get("tokens") is None else (f"{r['tokens'][k]:,}" for k in kinds)),
              "?" if r["recorded_cost_usd"] is None else f"{r['recorded_cost_usd']:.2f}", str(r["compactions"])]
             for r in rows]
    right = {3, 5, 6, 7, 8, 9, 10}
    widths = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(cols)]
    fmt = lambda xs: "  ".join(x.rjust(w) if i in right else x.ljust(w) for i, (x, w) in enumerate(zip(xs, widths)))  # noqa: E731
    print(fmt(cols).rstrip())
    for x in cells:
        print(fmt(x).rstrip())
    if rows:
        total = sum(r["recorded_cost_usd"] or 0 for r in rows)
        tok = {k: sum((r.get("tokens") or {}).get(k, 0) for r in rows) for k in kinds}
        print(f"{len(rows)} sessions, {sum(r['calls'] for r in rows):,} calls, input {tok['input']:,}, cache write "
              f"{tok['cache_write']:,}, cache read {tok['cache_read']:,}, output {tok['output']:,}, recorded ${total:.2f}")


def run(args) -> int:
    from ctxsim.harness.cli import BadInput, checks
    from ctxsim.harness.importers.folders import find, in_range, session_start
    from ctxsim.harness.model.trace import NoModelCalls
    from ctxsim.harness.provider.models import UnknownModelError

    src, out = Path(args.src), Path(args.output)
    if out.exists() and src.exists() and out.resolve() == src.resolve():
        raise BadInput(f"-o {args.output}: that is the source log; write the trace elsewhere")
    if args.since and args.until and args.since > args.until:
        raise BadInput(f"--since {args.since} is after --until {args.until}: no session can be in that range")
    if args.models_file:
        checks.price_table(args.models_file)
    found = find(args.format, src)
    sessions, folder = found.sessions, found.folder
    if not folder and out.is_dir():
        raise BadInput(f"-o {args.output}: a folder; for one log, give the trace file to write")
    if folder and out.exists() and not out.is_dir():
        raise BadInput(f"-o {args.output}: a file; a folder of sessions is written to a folder")
    # the output is never a log read here (a session, its subagents/ folder, a folder imported)
    checks.output("-o", out, sources=[src] + [s.path for s in sessions] + [s.path.with_suffix("") for s in sessions],
                  folder=folder)
    if not folder:
        return _single(args, sessions[0].path, out)
    chosen = [s for s in sessions if in_range(session_start(s.path), args.since, args.until)]
    rows: list[dict[str, Any]] = []
    calls: list[list[BilledCall]] = []   # each row's billed calls, for count_once
    copied: list[list[BilledCall]] = []  # each row's copies of an earlier session's calls (AssistantEvent.copied)
    failed: list[dict[str, Any]] = []
    unknown: dict[str, int] = {}   # model id no price covers -> sessions that name it (one --models file for all)
    empty: list[str] = []   # sessions with no model call: nothing billed, nothing lost (noted, left out)
    lossy: list[str] = []   # sessions imported with something lost (each said in a warning)
    left_out = 0            # ... of them, with more lost than skipped lines (a sub-agent's billed calls)
    internal = False
    bar = _progress(len(chosen), not args.no_progress)
    task = bar.add_task("sessions", total=len(chosen), name="") if bar else None
    if bar:
        bar.start()
    try:
        for s in chosen:
            if bar:
                bar.update(task, name=f"{s.project}/{s.path.stem}"[:60])
            dest = out / s.out
            try:
                trace, _, _, warned = import_one(args.format, s.path, dest, args)
                row, billed, copies = session_row(s.project, s.path, dest, trace, args.models_file)
                rows.append(row)
                calls.append(billed)
                copied.append(copies)
                if warned:
                    rows[-1]["warnings"] = warned
                    lossy.append(str(s.path))
                    if not all(_line_skipped(w) for w in warned):
                        left_out += 1
            except NoModelCalls as e:
                empty.append(str(e))
            except (ValueError, KeyError, OSError) as e:   # TraceError, an unknown model, a bad file: its input
                for name in e.names if isinstance(e, UnknownModelError) else ():
                    unknown[name] = unknown.get(name, 0) + 1
                # an unpriced model: its ids, not the whole table each time (the folder's last line names them all)
                msg = e.short if isinstance(e, UnknownModelError) else str(e).strip('"')
                failed.append({"source": str(s.path), "kind": "bad input",
                               "error": msg if msg.startswith(str(s.path)) else f"{s.path}: {msg}"})
            except Exception as e:  # an importer bug: said, and the other sessions still imported
                internal = True
                failed.append({"source": str(s.path), "kind": "internal",
                               "error": f"{s.path}: internal error: {type(e).__name__}: {e}"})
            if bar:
                bar.advance(task)
    finally:
        if bar:
            bar.stop()
    status = 0 if not failed and not lossy and not found.orphans else 1 if internal else 2
    notes = count_once(rows, calls, copied)
    if args.json_out:
        sys.stdout.write(json.dumps({"output": str(out), "sessions": rows, "failed": failed, "no_model_calls": empty,
                                     "outside_dates": len(sessions) - len(chosen), "duplicates": found.duplicates,
                                     "orphaned_subagents": found.orphans,
                                     "unknown_models": unknown, "exit_status": status},
                                    indent=2) + "\n")
    else:
        print_table(rows)
        if len(chosen) < len(sessions):
            print(f"{len(sessions) - len(chosen)} sessions outside --since/--until left out")
        print(f"traces in {out}/")
    for w in found.duplicates:   # a session reached twice: read once, the other copy named
        print(f"ctxsim import: warning: {w}", file=sys.stderr)
    for w in found.orphans:   # billed calls not imported: said, and the status says so
        print(f"ctxsim import: warning: {w}", file=sys.stderr)
    for r in rows:
        for w in r.get("warnings", ()):
            print(f"ctxsim import: warning: {w}", file=sys.stderr)
    for e in empty:
        print(f"ctxsim import: note: {e} (no model call was made: nothing billed, session left out)", file=sys.stderr)
    for n in notes:
        print(f"ctxsim import: note: {n}", file=sys.stderr)
    for f in failed:
        print(f"ctxsim import: error: {f['error']} (session skipped)", file=sys.stderr)
    if unknown:   # every unpriced id of the folder in one line: one --models file prices them all
        ids = ", ".join(f"{m!r} ({n} session{'s' * (n > 1)})" for m, n in sorted(unknown.items(), key=lambda x: (-x[1], x[0])))
        print(f"ctxsim import: unknown models across the folder: {ids}; price them all in one TOML file of models.toml's "
              "shape and import again with --models FILE", file=sys.stderr)
    if failed or lossy or found.orphans:
        said = [f"{len(failed)} of {len(chosen)} sessions failed"] if failed else []
        said += [f"{len(lossy) - left_out} imported with lines skipped"] if len(lossy) > left_out else []
        said += [f"{left_out} imported with calls left out"] if left_out else []
        said += [f"{len(empty)} without a model call left out"] if empty else []
        n = len(found.orphans)
        said += [f"{n} sub-agent folder{'s' * (n > 1)} without {'their' if n > 1 else 'its'} session left out"] if n else []
        print(f"ctxsim import: {'; '.join(said)} (exit {status})", file=sys.stderr)
    return status


def _single(args, src: Path, out: Path) -> int:
    trace, summary, derived, warned = import_one(args.format, src, out, args)
    for w in warned:
        print(f"ctxsim import: warning: {w}", file=sys.stderr)
    if args.json_out:
        extra = {"probes": derived.summary()} if derived else {}
        sys.stdout.write(json.dumps({**summary, **extra, "output": str(out)}, indent=2, default=str) + "\n")
    else:
        from ctxsim.harness.importers.common import ImportResult

        print(f"{src} → {out}")
        for line in ImportResult(trace, summary).summary_lines():
            if not line.startswith(("source:", "format:")):
                print(f"  {line}")
        if derived:
            print(f"  derived: {derived.facts} facts, {derived.probes} probes at {derived.calls} calls")
    if warned:   # the trace is written, but something of the log is not in it: said, and the status says so
        import re

        where = [m.group(1) for w in warned if (m := re.match(r"(.+?:\d+): ", str(w)))]
        first = f" ({where[0]}{' and more' if len(where) > 1 else ''})" if where else ""
        what = (f"{len(warned)} line(s) skipped" if all(_line_skipped(w) for w in warned)
                else f"{len(warned)} warning(s) of what is not in the trace")
        print(f"ctxsim import: {src}: imported with {what}{first} (exit 2)", file=sys.stderr)
        return 2
    return 0


def _line_skipped(warning) -> bool:
    """Whether an importer's warning is a skipped line (the rest say what else of the log is not in the trace)."""
    return str(warning).endswith("(line skipped)")

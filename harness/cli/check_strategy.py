"""ctxsim check-strategy MODULE:CLASS: the property suite (ctxsim.harness.testing) on any strategy, a
user's own included; prints the violated rules one per line (with the request, the session's state
and, for a crash, the file and line), writes the minimal failing session hypothesis found as a
trace file, and prints the commands that replay it.

The sessions do not depend on the strategy's name: first the corpus (the sessions of the kit's
fixed seed, the same for every strategy), then a random sample whose seed is printed (``--seed``
replays it). A registered strategy's known findings (harness/testing/known.py) are reported with
their owner and do not fail the check.

Exit status: 0 every invariant held on every generated session; 1 an invariant failed (the
failing trace is written); 2 bad input.
"""

from __future__ import annotations

import shlex
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "check-strategy", help="property suite on any strategy (pairing, window, stable prefixes...)",
        description="Drive a strategy through generated agent sessions (parallel tool calls, results up to "
        "megabytes, thinking, errors, sub-agents, restarts, crashes and resumes) and check its invariants "
        "after every step. On failure, print the minimal session hypothesis found and write it as a trace.")
    p.add_argument("strategy", help="MODULE:CLASS (e.g. mypkg.strategies:KeepRecent) or a registered name")
    p.add_argument("--profile", choices=["default", "ci", "deep"], default=None,
                   help="default: under a minute per strategy, deterministic; ci: its first few sessions; deep: "
                   "many long random ones (default: $HYPOTHESIS_PROFILE if it names one, else default)")
    p.add_argument("-o", "--output", default=None, metavar="FAILING_TRACE.jsonl",
                   help="where to write the failing session (default: check-<name>-failure.jsonl)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a strategy parameter (repeatable); overrides what the kit would use at its window")
    p.add_argument("--window", type=int, default=None, help="context window of the generated sessions, in tokens")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="seed of the random sample run after the corpus (default: a new one, printed)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="sessions of the random sample (default: the profile's: default 8, ci 0, deep 100)")
    p.add_argument("--shrink-examples", type=int, default=None, metavar="N",
                   help="sessions hypothesis may replay while shrinking a failure (default: ci 40, default 150, "
                   "deep 1000)")
    p.add_argument("--shrink-seconds", type=float, default=None, metavar="S",
                   help="a safety bound on the time spent shrinking (default: far above what the example budget takes)")
    p.add_argument("--no-crashes", action="store_true", help="no crashed sessions (unanswered calls, then a resume)")
    p.add_argument("--no-twin", action="store_true",
                   help="replay each session once (faster; skips the check that a second run sends the same requests)")
    p.add_argument("--replay", default=None, metavar="TRACE",
                   help="instead of generating: check the strategy on this trace (a failure this command wrote "
                   "replays with the same window, parameters and injected failures)")
    p.set_defaults(func=run)


def _load(spec: str):
    from ctxsim.strategies import registry

    return registry.load_class(spec)


def _params(cls, args, window: int) -> dict:
    from ctxsim.harness.testing.params import params_for
    from ctxsim.strategies import registry

    params = params_for(cls, window)
    params.update(registry.parse_sets(args.set))
    registry.make_config(cls, params)  # fail on bad parameters before any work
    return params


def run(args) -> int:
    from ctxsim.harness.cli import BadInput
    from ctxsim.harness.testing import selected_profile
    from ctxsim.harness.testing.invariants import promises
    from ctxsim.harness.testing.params import CHECK_WINDOW

    cls = _load(args.strategy)
    if args.window is not None and args.window <= 0:
        raise BadInput("--window must be a positive number of tokens")
    if args.replay:
        from ctxsim.harness.testing.clock import pinned_zone

        with pinned_zone():  # the local time zone the kit ran the session in
            return _replay(cls, args)
    window = args.window or CHECK_WINDOW
    params = _params(cls, args, window)
    profile = selected_profile(args.profile)
    held = sorted(promises(cls))
    print(f"checking {cls.__module__}:{cls.__qualname__} (name {cls.name!r}) — profile {profile}, window {window:,}")
    print(f"  invariants: {', '.join(held)}")
    if params:
        print(f"  parameters: {', '.join(f'{k}={v}' for k, v in params.items())}")
    try:
        lines = _declared_lines(cls, params, window)
    except ValueError as e:   # a declaration hook that returns what the kit cannot hold it to
        raise BadInput(f"{args.strategy}: {e}") from None
    for line in lines:
        print(f"  declares: {line}")
    import os
    import time

    from ctxsim.harness.testing import CORPUS_SEED, LIMITS, selected_settings
    from ctxsim.harness.testing.known import KNOWN_FINDINGS, known_base, known_for
    from ctxsim.harness.testing.machine import find_failure

    if args.shrink_seconds is not None and args.shrink_seconds < 0:
        raise BadInput("--shrink-seconds must be >= 0")
    for opt in ("sample", "shrink_examples"):
        if getattr(args, opt) is not None and getattr(args, opt) < 0:
            raise BadInput(f"--{opt.replace('_', '-')} must be >= 0")
    base = known_base(cls)   # the registered strategy it is or derives from: its known findings are this class's too
    known = known_for(base)
    seen: list = []
    n = selected_settings(profile).max_examples
    sample = args.sample if args.sample is not None else LIMITS[profile]["sample"]
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    runs = [("corpus", CORPUS_SEED, n)] + ([("random sample", seed, sample)] if sample else [])
    kw = dict(window=window, crashes=not args.no_crashes, profile=profile, shrink_seconds=args.shrink_seconds,
              shrink_examples=args.shrink_examples, twin=not args.no_twin, known=known, seen_known=seen)
    from hypothesis import settings as hsettings

    for what, s, count in runs:
        print(f"  {what}: {count} sessions, seed {s}" + (f" (replay it: --seed {s})" if what != "corpus" else ""),
              flush=True)
        t0 = time.perf_counter()
        failure = find_failure(cls, params, settings=hsettings(selected_settings(profile), max_examples=count),
                               seed=s, **kw)
        took = time.perf_counter() - t0
        if failure is not None:
            _print_known(base, seen)
            return _report(cls, args, failure, what)
        print(f"  ok: every invariant held on the {what} ({took:.0f} s)", flush=True)
    _print_known(base, seen)
    left = len(KNOWN_FINDINGS.get(base, ()))
    of = base if base == cls.name else f"{base}, which it derives from"
    print(f"ok: every invariant held on {sum(c for _, _, c in runs)} generated sessions"
          + (f" ({left} known finding(s) listed for {of}, reported to their owners)" if left else ""))
    return 0


def _declared_lines(cls, params, window: int) -> list[str]:
    """What the strategy declares it keeps, as the kit holds it (ctxsim.harness.testing.declared), on the
    kit's model at ``window``."""
    from ctxsim.harness.provider.models import load_table
    from ctxsim.harness.testing.clock import own_edges
    from ctxsim.harness.testing.declared import declared
    from ctxsim.harness.testing.params import CHECK_MODEL

    d = declared(cls, params, window, load_table().get(CHECK_MODEL).max_output)
    out = []
    if d.summary_items:
        out.append(f"every summary keeps {', '.join(d.summary_items)}")
    if d.clear_minimum is not None:
        out.append(f"a clearing frees at least {d.clear_minimum[0]:,} tokens per {d.clear_minimum[1]}")
    if d.rewrites_also:
        out.append(f"a rewrite may change the {' and the '.join(sorted(d.rewrites_also))} too")
    if d.result_limits:
        out.append("every tool result is cut to at most " + " and ".join(f"{n:,} {unit}" for n, unit in d.result_limits))
    for tools, n, share in d.result_cuts:
        out.append(f"a result of {', '.join(tools) if tools else 'any other tool'} past {n:,} characters is cut to "
                   f"{share:.0%} from its start and the rest from its end")
    if d.head_at_most:
        out.append("a cut result keeps at most " + " and ".join(f"{n:,} {unit}" for n, unit in d.head_at_most)
                   + " of the output's start")
    if d.whole_under is not None:
        out.append(f"a result within {d.whole_under[0]:,} characters, in a message whose results total at most "
                   f"{d.whole_under[1]:,}, enters whole")
    if d.whole_left is not None:
        cap, cpt, tools = d.whole_left
        room = "" if cpt is None else f" and {cpt:g} characters a token of the room the window had left"
        out.append(f"a result of {', '.join(tools) if tools else 'any tool'} within {cap:,} characters{room} enters whole")
    if d.reinjects:
        out.append(f"a compaction sends again, on the next request, what the conversation had of: {', '.join(d.reinjects)}")
    if d.across_launches is not None:
        out.append(f"keeps from one launch to the next: {d.across_launches} (checked as one instance across launches)")
    if d.largest_first:
        out.append("a message over its budget gives up its largest results first")
    if d.recent_kept:
        out.append(f"the newest {d.recent_kept} tool uses keep their results as they entered")
    if d.clears_all_but is not None and d.recent_kept:
        out.append(f"a clearing clears every result older than the newest {d.recent_kept} tool uses"
                   + (f" ({', '.join(d.clears_all_but)} apart)" if d.clears_all_but else ""))
    if d.clears_beyond is not None:
        turns, chars, tools = d.clears_beyond
        out.append(f"a clearing takes every result before the newest {turns} user turns and the newest {chars:,} characters "
                   "of tool output before them" + (f" ({', '.join(tools)} apart)" if tools else ""))
    if d.clears_above is not None:
        out.append(f"past {d.clears_above:,} tokens of the whole prompt (nothing cleared), every request clears all but "
                   f"the newest {d.recent_kept} tool uses")
    if d.recent_turns:
        out.append(f"the newest {d.recent_turns} user turns keep their tool results as they entered")
    if d.superseded:
        out.append("a read is replaced only while a later read of its file goes whole")
    if d.writes_every is not None:
        kind, n, tool = d.writes_every
        out.append(f"a {kind} call comes every {n} answered main requests (sooner after a typed message), until the log "
                   f"calls {tool}")
    if d.estimates_whole is not None:
        cpt, unit = d.estimates_whole
        out.append(f"every main request is estimated whole: its {'JSON characters' if unit == 'json_chars' else 'characters'} "
                   f"over {cpt:g} a token")
    if d.from_usage is not None:
        out.append("a main request that continues the last answered one is estimated at its usage (input and output) "
                   f"and what came after the answer at {d.from_usage:g} characters a token")
    if d.recent_reads:
        n, tools, least = d.recent_reads
        if d.reads_to is not None:
            out.append(f"a request that replaces reads leaves them within {d.reads_to:,} tokens (or replaces all but the newest)")
        if n:
            out.append(f"the newest {n} results of {', '.join(tools) if tools else 'any tool'} of {least:,} characters or "
                       "more keep as they entered")
    if d.recent_chars:
        out.append(f"the newest {d.recent_chars:,} characters of tool output keep their results as they entered")
    if d.idle_clear is not None:
        gap, tools = d.idle_clear
        out.append(f"idle over {gap:,.0f} s, the next request clears the old results of "
                   f"{', '.join(tools) if tools else 'every tool'}")
    if d.cold_only is not None:
        out.append(f"a result sent before changes only after {d.cold_only:,.0f} s idle")
    if d.compacts_above is not None and d.above_finished:
        out.append(f"no summary is asked for before the finished messages pass {d.compacts_above:,} tokens")
    elif d.compacts_above is not None:
        out.append(f"a request it estimates past {d.compacts_above:,} tokens is summarised first")
    if d.above_events is not None:
        out.append(f"a request of more than {d.above_events} events (each tool call and result one) is summarised first")
    if d.before_prompt:
        out.append("... unless nothing but a summary stands before the user's latest message and the tail it keeps")
    if d.breaker is not None:
        out.append(f"... until {d.breaker} summaries in a row failed")
    if d.reads_above is not None:
        out.append(f"once idle, reads sent whole past {d.reads_above:,} tokens lose their oldest to a round of replacing")
    if d.restores is not None:
        out.append(f"a compaction restores the {d.restores[0]} files read most recently, the last one read among them")
        if d.restore_chars:
            out.append(f"... each as its last read returned it, at least its first {d.restore_chars:,} characters")
    if d.on_usage is not None:
        out.append(f"once the last answered request's usage (input and output) reaches {d.on_usage:,} tokens, the next "
                   f"request{' that begins a user turn' if d.only_at_turns else ''} is summarised first")
    if d.compacts_at_turns is not None:
        out.append(f"a user turn that begins past {d.compacts_at_turns:,} tokens is summarised first")
    if d.summarises_dropped:
        out.append("what leaves the main window goes into a summary first")
    for least, most, unit in d.tail:
        if d.tail_walked:
            out.append(f"a compaction keeps the newest finished messages a walk takes while under {_tail_amount(least, unit)} "
                       "(they and the one before them reach it)")
            continue
        bounds = ([f"exactly {_tail_amount(least, unit)} (fewer where more would pass a cap)"]
                  if least and least == most else
                  [f"at {side} {_tail_amount(x, unit)}" for side, x in (("least", least), ("most", most)) if x])
        out.append(f"a compaction (or a cut) keeps its newest messages verbatim, {' and '.join(bounds)}")
    if d.tail_under_window:
        out.append("... while the conversation fits the window (past it, cut to fit)")
    if d.tail_shortest:
        out.append("... and no more than the shortest tail that holds every least")
    if d.tail_calibrated:
        out.append("... its tokens counted at no more characters a token than the conversation measured on its last "
                   "answered request")
    if d.cut_share is not None:
        share, head, over, under = d.cut_share
        out.append(f"a cut keeps at least {share:.0%} of the messages after the first {head}"
                   + (f" while the conversation is within {over:,.0f} tokens" if over is not None else "")
                   + f", unless that share still leaves {under:,.0f} or more")
    if d.only_at_turns:
        out.append("the main conversation is summarised only as a user turn begins (or after a refused request)")
    if d.cache_marks:
        out.append(f"every request carries a cache breakpoint on: {', '.join(d.cache_marks)}"
                   + (f", each at a TTL of {d.marks_ttl}" if d.marks_ttl else ""))
    for kind, model in d.call_models:
        out.append(f"{kind} calls go to {model}")
    if getattr(cls, "keeps_latest_request", False):
        out.append("every compaction keeps the user's latest message as written")
    if getattr(cls, "keeps_user_messages", False):
        out.append("the user messages a compaction keeps are the user's own")
    if d.newest_users:
        out.append("... the newest the user wrote, in order")
    for e in own_edges(d.epochs):
        out.append(f"its own clock: the sessions also cross {e.label} (t = {e.t:,.0f} s)")
    return out


def _tail_amount(x: float, unit: str) -> str:
    """An amount of a declared tail (``compaction_tail``), in its unit."""
    return f"{x:.0%} of the conversation" if unit == "share" else f"{x:,.0f} {unit}"


def _print_known(base: str, seen) -> None:
    from ctxsim.harness.testing.known import owner_of

    shown: set[str] = set()
    for v in seen:
        owner = owner_of(base, v.invariant, v.detail)
        key = f"{v.invariant}:{owner}"
        if owner is None or key in shown:
            continue
        shown.add(key)
        print(f"  known finding (reported to {owner}), not failed on: {v}")


def _report(cls, args, failure, what: str = "corpus") -> int:
    from ctxsim.harness.model import trace as tr

    out = Path(args.output or f"check-{cls.name or cls.__name__}-failure.jsonl")
    tr.write(failure.trace, out)
    print(f"FAILED: {', '.join(sorted(failure.invariants))}")
    print(str(failure))
    print(f"\nfound on the {what} (seed {failure.seed}) at session {failure.first_session} "
          f"({failure.first_events} events); shrunk over {failure.shrink_runs} replayed sessions")
    print(f"minimal failing session ({len(failure.trace.events)} events, {failure.trace.calls} model calls) "
          f"written to {out}")
    s = failure.settings
    print("replay it:")
    print(f"  ctxsim check-strategy {shlex.quote(args.strategy)} --replay {shlex.quote(str(out))}")
    from ctxsim.strategies import registry

    registered = bool(cls.name) and cls.name in registry.names() and registry.get(cls.name) is cls
    name = cls.name if registered else f"{cls.__module__}:{cls.__qualname__}"
    sets = " ".join(f"--set {shlex.quote(f'{k}={v}')}" for k, v in s.get("params", {}).items())
    print(f"  ctxsim run {shlex.quote(str(out))} --strategy {shlex.quote(name)} --window {s['window']} {sets}".rstrip())
    return 1


def _replay(cls, args) -> int:
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.replay.engine import RunConfig
    from ctxsim.harness.testing.declared import fresh_at_launches
    from ctxsim.harness.testing.determinism import Canon, first_difference
    from ctxsim.harness.testing.inputs import InputGuard
    from ctxsim.harness.testing.invariants import Checker, Violation, promises
    from ctxsim.harness.testing.params import CHECK_MODEL, CHECK_WINDOW
    from ctxsim.harness.testing.recording import Stepper, relaunched_note
    from ctxsim.strategies import registry

    trace = tr.load(args.replay)
    meta = trace.header.meta.get("check_strategy") or {}
    window = args.window or int(meta.get("window") or CHECK_WINDOW)
    params = dict(meta.get("params") or {}) if meta else _params(cls, args, window)
    params.update(registry.parse_sets(args.set))
    registry.make_config(cls, params)
    fail_calls = {k: tuple(v) for k, v in (meta.get("fail_calls") or {}).items()}
    cfg = RunConfig(model=meta.get("model") or CHECK_MODEL, window=window, seed=0, fail_calls=fail_calls)
    held = promises(cls)
    if meta.get("dense"):  # as the kit held it: no estimate judged on text dense in tokens
        held = held - {"estimate"}
    guard = InputGuard(trace.header)
    guard.add(trace.events)
    stepper = Stepper(trace.header, cls, params, cfg)
    fresh = fresh_at_launches(cls, params, window)
    other = Stepper(trace.header, cls, params, cfg, twin_of=stepper, fresh_launches=fresh) if not args.no_twin else None
    checker = Checker.for_recording(held, stepper.recording)
    try:
        try:
            stepper.feed(list(trace.events))
            stepper.flush()
        except Exception as e:  # the strategy raised on this session: report it as the kit does
            from ctxsim.harness.testing.crash import crash_site

            found = checker.feed(stepper.recording.entries)
            reqs = stepper.recording.requests
            at = crash_site(e)
            found.append(Violation("crash", reqs[-1].call if reqs else -1, "", f"{type(e).__name__}: {e}"
                                   + (f" at {at}" if at else ""), checker.where()))
            if other is not None:
                other.close()
                other = None
            return _print_replay(args, window, stepper, meta, found)
        found = checker.feed(stepper.recording.entries)
        found += [Violation("inputs", -1, "", d) for d in guard.changes()]
        if other is not None:
            other.feed(list(trace.events))
            other.flush()
            found_diff = first_difference(stepper.recording.requests, other.recording.requests, Canon(),
                                          Canon(str(other.session_dir), str(stepper.session_dir)))
            if found_diff is not None:
                at, diff = found_diff
                note = relaunched_note(stepper.recording.entries, at) if fresh and at is not None else ""
                found.append(Violation("deterministic", at.call if at is not None else -1, at.kind if at is not None else "",
                                       diff + note))
    finally:
        stepper.close()
        if other is not None:
            other.close()
    if not found and any("two processes" in v for v in meta.get("violations") or ()):
        # found by the two-process replay: replayed the same way (another hash seed, another time zone)
        from ctxsim.harness.testing.crossprocess import difference

        diff = difference(trace, f"{cls.__module__}:{cls.__qualname__}", params, window,
                          {k: list(v) for k, v in fail_calls.items()})
        if diff:
            found.append(Violation("deterministic", -1, "", diff))
    return _print_replay(args, window, stepper, meta, found, cls)


def _print_replay(args, window, stepper, meta, found, cls=None) -> int:
    print(f"replayed {args.replay} (window {window:,}, {len(stepper.recording.requests)} requests)")
    if meta.get("violations"):
        print("recorded violations:\n" + "\n".join(f"  {v}" for v in meta["violations"]))
    if not found:
        print("ok: every invariant held")
        return 0
    print("violations now:\n" + "\n".join(f"  {v}" for v in found))
    return 1

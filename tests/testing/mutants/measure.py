"""Count how many mutants of the corpus a profile of the property kit catches, and how long it
takes: ``python -m tests.testing.mutants.measure [--profile default] [--only NAME,...] [--twins]``.

A mutant is *caught* when the kit reports a failure, *named* when the failure names one of the
invariants the case lists (``Case.catches``); a twin *passes* when the kit finds nothing. Shrinking
is skipped (it does not change whether a failure is found), so times are those of the search, in
CPU seconds of this process (the machine is shared: wall time depends on who else runs). The
known findings of the strategy a mutant is built on (tests/testing/known_findings.py) are not
counted as failures, as in the registry test.
"""

from __future__ import annotations

import argparse
import time

from ctxsim.harness.testing import selected_settings
from ctxsim.harness.testing.machine import find_failure
from hypothesis import Phase, settings

from tests.testing.known_findings import known_for
from tests.testing.mutants import CORPUS

NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]


def run(cls, profile: str, shrink: bool = False, cross_process: bool = True):
    s = selected_settings(profile) if shrink else settings(selected_settings(profile), phases=NO_SHRINK)
    c0 = time.process_time()
    f = find_failure(cls, settings=s, profile=profile, known=known_for(cls.name), cross_process=cross_process)
    return f, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="default")
    ap.add_argument("--only", default="")
    ap.add_argument("--twins", action="store_true", help="also run every twin (must pass)")
    ap.add_argument("--kit29", action="store_true", help="only the cases of issue #29 (KIT29)")
    ap.add_argument("--shrink", action="store_true", help="shrink too: print the first and the minimal session sizes")
    args = ap.parse_args()
    only = {x for x in args.only.split(",") if x}
    from tests.testing.mutants import KIT29

    cases = [c for c in (KIT29 if args.kit29 else CORPUS) if not only or c.id in only]
    caught = named = 0
    for c in cases:
        f, dt = run(c.mutant, args.profile, args.shrink)
        got = sorted(f.invariants) if f else []
        size = (f"session {f.first_session}, {f.first_events}->{len(f.trace.events)} events "
                f"({f.shrink_runs} shrink runs)") if f else ""
        ok = bool(set(got) & c.catches)
        caught += f is not None
        named += ok
        first = str(f.violations[0]) if f and f.violations else ""
        print(f"{'NAMED ' if ok else 'caught' if f else 'MISSED'} {c.id:28s} {dt:6.1f}s {','.join(got):24s} {size} "
              f"{first[:150]}", flush=True)
    print(f"profile {args.profile}: {named} of {len(cases)} named ({caught} caught)")
    if args.twins:
        bad = 0
        for t in dict.fromkeys(c.twin for c in cases):
            if only and not any(c.twin is t for c in cases):
                continue
            f, dt = run(t, args.profile)
            bad += f is not None
            print(f"{'ok    ' if f is None else 'FAILS '} twin {t.__module__}.{t.__name__:28s} {dt:6.1f}s "
                  f"{str(f.violations[0])[:150] if f else ''}", flush=True)
        print(f"twins failing: {bad}")


if __name__ == "__main__":
    main()

"""Same sessions, two processes, two hash seeds and two time zones: the same requests (the ``deterministic`` invariant
across processes).

The state machine replays each session twice in one process, so both runs share Python's string
hash seed: a strategy that orders tool results, files or memories by iterating a ``set`` of strings
(or anything keyed on ``hash``) sends the same order twice and passes, then sends another order in
the next process, on a user's machine, in a sweep worker. This replays one session in two fresh
interpreters with ``PYTHONHASHSEED`` set to two values and compares the requests, one digest each
(their canonical API form, :class:`ctxsim.harness.testing.determinism.Canon`, with the run directory's
name replaced, so two scratch directories compare equal).

The two processes also run in two local time zones whose dates differ (:mod:`ctxsim.harness.testing.clock`):
a strategy that stamps the machine's local date or time sends other bytes on another machine. When
they differ, a third process (the second's hash seed, the first's zone) names which it is.

Run as a module it is the child: ``python -m ctxsim.harness.testing.crossprocess TRACES_JSON SPEC
PARAMS_JSON WINDOW`` (TRACES_JSON: a list of [path, injected failures]) prints ``trace-index digest``, one line per request.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxsim.harness.model import trace as tr

HASH_SEEDS = ("1", "2")  # two string-hash seeds of the two processes  # assumed: any two differ
TIMEOUT_S = 600.0  # a child that runs longer than this is reported as such  # assumed


def request_digests(trace: tr.Trace, spec: str, params: Mapping[str, Any], window: int,
                    fail_calls: Mapping[str, list[int]]) -> list[str]:
    """One digest per request the strategy ``spec`` sends on ``trace`` (in this process)."""
    from ctxsim.harness.replay.engine import RunConfig
    from ctxsim.harness.testing.determinism import Canon
    from ctxsim.harness.testing.params import CHECK_MODEL
    from ctxsim.harness.testing.recording import record
    from ctxsim.strategies import registry

    cls = registry.load_class(spec)
    cfg = RunConfig(model=CHECK_MODEL, window=window, seed=0, fail_calls={k: tuple(v) for k, v in fail_calls.items()})
    rec = record(trace, cls, dict(params), cfg)
    try:
        canon = Canon(str(rec.session_dir), "<run-dir>")
        out = []
        for s in rec.requests:
            body = canon.head(s.request) + "".join(canon.message(m) for m in s.request.messages)
            out.append(hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16])
        return out
    finally:
        import shutil

        shutil.rmtree(rec.session_dir, ignore_errors=True)


def _paths(spec: str) -> list[str]:
    """The import path of this process, and the directory of the strategy's module when it is a
    top-level module loaded from a file (a user's module, the guide's example)."""
    paths = [p for p in sys.path if p]
    mod = sys.modules.get(spec.split(":")[0])
    f = getattr(mod, "__file__", None)
    if f and "." not in spec.split(":")[0]:
        paths.insert(0, str(Path(f).resolve().parent))
    return paths


def _run(paths: list[tuple[str, dict]], spec: str, params: Mapping[str, Any], window: int,
         hash_seed: str, tz: str) -> list[list[str]] | str:
    """The digests of each trace's requests in a fresh process, or why there are none."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "TZ": tz, "PYTHONPATH": os.pathsep.join(_paths(spec))}
    try:
        p = subprocess.run([sys.executable, "-m", "ctxsim.harness.testing.crossprocess",
                            json.dumps(paths), spec, json.dumps(dict(params)), str(window)],
                           capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"the replay with PYTHONHASHSEED={hash_seed} TZ={tz} ran over {TIMEOUT_S:.0f} s"
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1]
        return f"the replay with PYTHONHASHSEED={hash_seed} TZ={tz} failed: {tail}"
    out: list[list[str]] = [[] for _ in paths]
    for line in p.stdout.splitlines():
        i, digest = line.split()
        out[int(i)].append(digest)
    return out


def _first_difference(a: list[list[str]], b: list[list[str]]) -> tuple[int, str] | None:
    """(trace, how) of the first difference between two processes' digests, or None."""
    for t, (x, y) in enumerate(zip(a, b)):
        k = next((k for k, (u, v) in enumerate(zip(x, y)) if u != v), None)
        if k is not None:
            return t, f"request {k}"
        if len(x) != len(y):
            return t, f"the number of requests ({len(x)} vs {len(y)})"
    return None


def difference_at(traces: list[tuple[tr.Trace, Mapping[str, list[int]]]], spec: str, params: Mapping[str, Any],
                  window: int) -> tuple[int, str] | None:
    """The first of ``traces`` (each with its injected failures: side-call kind -> call numbers) on
    which two processes send other requests, with how and why, or None.

    The two processes differ in their string-hash seed and their local time zone
    (:data:`clock.KIT_TZ`, and :func:`clock.other_zone`: one whose date differs from it as the check
    runs); when they differ, a third (the second's hash seed, the first's zone) says which of the two
    the strategy depends on."""
    from ctxsim.harness.testing import clock

    (s1, s2), z1 = HASH_SEEDS, clock.KIT_TZ
    z2, z2_name = clock.other_zone()
    with tempfile.TemporaryDirectory(prefix="ctxsim-xproc-") as d:
        paths = []
        for i, (trace, fail_calls) in enumerate(traces):
            path = Path(d) / f"session-{i}.jsonl"
            tr.write(trace, path)
            paths.append((str(path), {k: list(v) for k, v in (fail_calls or {}).items()}))
        a = _run(paths, spec, params, window, s1, z1)
        if isinstance(a, str):
            return 0, a
        b = _run(paths, spec, params, window, s2, z2)
        if isinstance(b, str):
            return 0, b
        first = _first_difference(a, b)
        if first is None:
            return None
        c = _run(paths, spec, params, window, s2, z1)
        if isinstance(c, str):
            return 0, c
    t, at = first
    by_hash = _first_difference(a, c)
    if by_hash is not None:
        t, at = by_hash
        return t, (f"{at} differs between two processes (PYTHONHASHSEED={s1} and {s2}, the same time zone): the "
                   "strategy depends on the string hash seed (a set or a hash() ordering what it sends)")
    return t, (f"{at} differs between two processes whose local time zones differ (TZ={z1}, {clock.ZONE}, and "
               f"TZ={z2}, {z2_name}, another date; the same hash seed): the strategy reads the machine's local "
               "time or date (datetime.fromtimestamp, time.localtime, date.today() or astimezone() without a zone), "
               "so a run depends on where and when it runs")


def difference(trace: tr.Trace, spec: str, params: Mapping[str, Any], window: int,
               fail_calls: Mapping[str, list[int]] | None = None) -> str:
    """How the requests of two processes (other hash seed, other time zone) differ on ``trace``, or ``""``."""
    found = difference_at([(trace, fail_calls or {})], spec, params, window)
    return found[1] if found else ""


def main(argv: list[str]) -> int:
    traces, spec, params, window = argv
    for i, (path, fail) in enumerate(json.loads(traces)):
        for digest in request_digests(tr.load(path), spec, json.loads(params), int(window), fail):
            print(i, digest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

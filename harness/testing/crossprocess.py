"""Same session, two processes, two hash seeds: the same requests (the ``deterministic`` invariant
across processes).

The state machine replays each session twice in one process, so both runs share Python's string
hash seed: a strategy that orders tool results, files or memories by iterating a ``set`` of strings
(or anything keyed on ``hash``) sends the same order twice and passes, then sends another order in
the next process, on a user's machine, in a sweep worker. This replays one session in two fresh
interpreters with ``PYTHONHASHSEED`` set to two values and compares the requests, one digest each
(their canonical API form, :class:`ctxsim.harness.testing.determinism.Canon`, with the run directory's
name replaced, so two scratch directories compare equal).

Run as a module it is the child: ``python -m ctxsim.harness.testing.crossprocess TRACE SPEC PARAMS_JSON
WINDOW FAIL_JSON`` prints one digest per request.
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

from ctxsim.harness import trace as tr

HASH_SEEDS = ("1", "2")  # two string-hash seeds of the two processes  # assumed: any two differ
TIMEOUT_S = 600.0  # a child that runs longer than this is reported as such  # assumed


def request_digests(trace: tr.Trace, spec: str, params: Mapping[str, Any], window: int,
                    fail_calls: Mapping[str, list[int]]) -> list[str]:
    """One digest per request the strategy ``spec`` sends on ``trace`` (in this process)."""
    from ctxsim.harness.engine import RunConfig
    from ctxsim.harness.testing.determinism import Canon
    from ctxsim.harness.testing.machine import CHECK_MODEL
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


def difference(trace: tr.Trace, spec: str, params: Mapping[str, Any], window: int,
               fail_calls: Mapping[str, list[int]] | None = None) -> str:
    """How the requests of two processes with different hash seeds differ on ``trace``, or ``""``."""
    fail_calls = dict(fail_calls or {})
    with tempfile.TemporaryDirectory(prefix="ctxsim-xproc-") as d:
        path = Path(d) / "session.jsonl"
        tr.write(trace, path)
        runs = []
        for seed in HASH_SEEDS:
            env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.pathsep.join(_paths(spec))}
            try:
                p = subprocess.run([sys.executable, "-m", "ctxsim.harness.testing.crossprocess", str(path), spec,
                                    json.dumps(dict(params)), str(window), json.dumps(fail_calls)],
                                   capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                return f"the replay with PYTHONHASHSEED={seed} ran over {TIMEOUT_S:.0f} s"
            if p.returncode != 0:
                tail = (p.stderr.strip().splitlines() or ["?"])[-1]
                return f"the replay with PYTHONHASHSEED={seed} failed: {tail}"
            runs.append(p.stdout.split())
    a, b = runs
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return (f"request {k} differs between two processes (PYTHONHASHSEED={HASH_SEEDS[0]} and "
                    f"{HASH_SEEDS[1]}): the strategy depends on the string hash seed (a set or a hash() "
                    "ordering what it sends)")
    if len(a) != len(b):
        return f"{len(a)} requests with PYTHONHASHSEED={HASH_SEEDS[0]}, {len(b)} with {HASH_SEEDS[1]}"
    return ""


def main(argv: list[str]) -> int:
    trace_path, spec, params, window, fail = argv
    digests = request_digests(tr.load(trace_path), spec, json.loads(params), int(window), json.loads(fail))
    print("\n".join(digests))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

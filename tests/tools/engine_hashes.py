"""Hash-identity check of the replay engine (issue 30): a digest of the metrics, the per-call rows
and the per-probe rows of every registered strategy on small synthetic sessions (and, where the
real logs are present, two imported Claude Code sessions), so a speed-up or a refactor of the
engine can be shown to change no number.

    python -m tests.tools.engine_hashes --write          # regenerate tests/data/engine_hashes.json
    python -m tests.tools.engine_hashes                  # compare; exit 1 and list what differs
    python -m tests.tools.engine_hashes --full --write   # the larger set (minutes), kept apart

The small set is what tests/core/test_engine_identity.py checks; the full set adds 900-call sessions,
1M windows, multi-session and sub-agent presets and failure injection. A behaviour change that
legitimately moves numbers regenerates the file with ``--write`` (``make engine-hashes``).

Paths of the run directory (``/tmp/ctxsim000123/run-000004/...``) appear in probe rows and are
normalised: which free run directory a process gets is not part of a run's numbers (every one has
the same token count, harness/replay/rundirs.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SMALL_FILE = DATA / "engine_hashes.json"
FULL_FILE = DATA / "engine_hashes_full.json"
REAL = ROOT / ".." / "shared" / "traces" / "real" / "claude-code" / "spotter"
RUN_DIR = re.compile(r"ctxsim\d{6}/run-\d{6}")
NEEDS_IMPORTED = {"recorded"}   # replays a recorded agent's decisions: only on an imported log


@dataclass(frozen=True)
class Case:
    name: str
    preset: str | None = None        # a synth preset, or
    real: str | None = None          # a file under REAL (imported as claude-code)
    seed: int = 1
    sets: tuple[str, ...] = ()
    window: int | None = 200_000
    config: dict[str, Any] = field(default_factory=dict)


SMALL = [
    Case("short-200k", "short", seed=11),
    Case("short-1m", "short", seed=12, window=1_000_000),
    Case("long150-40k", "long-200k", seed=13, sets=("calls=150",), window=40_000),
    Case("real-tool-heavy", real="tool_heavy.jsonl", window=None),
]

FULL = [
    *SMALL,
    Case("short-200k-s2", "short", seed=2),
    Case("long-200k", "long-200k", seed=3),
    Case("long400-1m", "long-200k", seed=4, sets=("calls=400",), window=1_000_000),
    Case("multi-session", "multi-session", seed=5, sets=("calls=120",)),
    Case("subagent", "subagent", seed=6),
    Case("spill-heavy", "spill-heavy", seed=7),
    Case("long150-40k-fail", "long-200k", seed=8, sets=("calls=150",), window=40_000,
         config={"failure_rates": {"summary": 0.3, "memory_select": 0.2}, "seed": 3}),
    Case("real-short", real="short.jsonl", window=None),
]


# the real log is imported from this fixed path: the trace records where it came from (its hash
# too), so importing it where the checkout happens to be would tie the hashes to one directory
FIXED = Path("/tmp/ctxsim-engine-hashes")


def _trace(case: Case):
    if case.real is not None:
        import shutil

        from ctxsim.harness.importers import import_file

        FIXED.mkdir(parents=True, exist_ok=True)
        src = FIXED / case.real
        shutil.copyfile(REAL / case.real, src)
        return import_file("claude-code", src).trace
    from ctxsim.harness.synth import generate, load_preset

    return generate(load_preset(case.preset, list(case.sets)), case.seed)


def _norm(x: Any) -> Any:
    if isinstance(x, str):
        return RUN_DIR.sub("ctxsimUID/run-N", x)
    if isinstance(x, float):
        return "nan" if math.isnan(x) else repr(x)
    if isinstance(x, dict):
        return {str(k): _norm(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_norm(v) for v in x]
    if hasattr(x, "item"):          # numpy scalars
        return _norm(x.item())
    return x


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(_norm(obj), sort_keys=True, default=str).encode()).hexdigest()[:16]


def _frame(df) -> dict[str, list]:
    return {c: df[c].tolist() for c in df.columns}


def run_case(case: Case, strategies: list[str] | None = None) -> Iterator[tuple[str, dict[str, str]]]:
    from ctxsim.harness.replay.engine import RunConfig, replay
    from ctxsim.strategies.registry import names

    if case.real is not None and not (REAL / case.real).exists():
        return
    trace = _trace(case)
    for s in strategies or names():
        if s in NEEDS_IMPORTED and case.real is None:
            continue
        res = replay(trace, s, None, RunConfig(window=case.window, **case.config))
        yield f"{case.name}/{s}", {"metrics": _digest(res.metrics), "calls": _digest(_frame(res.calls)),
                                   "probes": _digest(_frame(res.probes)), "n_calls": int(len(res.calls))}


def compute(cases: list[Case], strategies: list[str] | None = None, log=None) -> dict[str, dict[str, str]]:
    out = {}
    for c in cases:
        for key, h in run_case(c, strategies):
            out[key] = h
            if log:
                log(f"{key}: {h}")
    return out


def compare(expected: dict, got: dict) -> list[str]:
    diffs = []
    for k in sorted(set(expected) | set(got)):
        if expected.get(k) != got.get(k):
            diffs.append(f"{k}: expected {expected.get(k)}, got {got.get(k)}")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write the hashes instead of comparing")
    ap.add_argument("--full", action="store_true", help="the larger set (tests/data/engine_hashes_full.json)")
    ap.add_argument("--strategy", action="append", help="only these strategies (compare only)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    path = FULL_FILE if a.full else SMALL_FILE
    got = compute(FULL if a.full else SMALL, a.strategy, log=print if a.verbose else None)
    if a.write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(got)} hashes to {path}")
        return 0
    expected = json.loads(path.read_text())
    if a.strategy:
        expected = {k: v for k, v in expected.items() if k.split("/")[1] in a.strategy}
    diffs = compare(expected, got)
    print("\n".join(diffs) if diffs else f"identical: {len(got)} runs")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())

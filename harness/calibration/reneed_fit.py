"""Re-need distances fitted on real logs: the data the synthetic generator draws long-range needs from
(harness/data/reneed.json, :class:`ctxsim.harness.synth.recurrence.Reneed`; issue 43).

``python -m ctxsim.harness.calibration.reneed_fit TRACE_OR_DIR ... [-o harness/data/reneed.json]``

For every imported Claude Code trace of at least ``MIN_CALLS`` calls, the needs are derived from its own
content (harness/retention/probes.py, the rule ``ctxsim import`` applies) and, per need, the re-need
distance D (cl100k tokens of main-context content since its fact was last seen) and the position of the
using call (tokens since the session started) are measured with the one function real and synthetic
traces share (:func:`ctxsim.harness.synth.recurrence.distances`). Goals apart (a goal is last seen where
the session opened: its D is its position), the mixture of :class:`Reneed` is fitted by maximum
likelihood with each D truncated at its position, D under ``FLOOR`` tokens censored to [0, FLOOR]
(a result acted on at once is 0 to a few tokens back: no density there). scipy (the ``[calibrate]``
extra) minimises the negative log-likelihood (Nelder–Mead). The file keeps the fitted parameters,
the observed and fitted P(D > d | position ≥ d) at round distances, the goal share, and the logs'
provenance (repository, commit, an opaque digest): no log text, no path, no session id.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FLOOR = 50.0            # tokens: a shorter D is censored (assumed: the log-normals need no mass at 0)
MIN_CALLS = 30          # as recurrence.MIN_CALLS: shorter logs say little about distances
CHECK = (1_000, 10_000, 40_000, 100_000, 200_000)
START = (25.0, 0.5, 3_000.0, 2.3, 0.31, 0.68)   # adjacent median, σ, recent median, σ, their weights (a start)


def rows_of(trace) -> list[tuple[str, int, int]]:
    """(category, D, position) of each need of ``trace``, facts derived from its content."""
    from ctxsim.harness.retention import probes
    from ctxsim.harness.synth import recurrence as rc

    t, _ = probes.apply(trace)
    s = rc.stream(t)
    return [(d.category, d.last_tokens, d.use_start) for d in rc.distances(s, rc.probe_uses(t, s))]


def fit(rows: Sequence[tuple[str, int, int]]) -> dict[str, Any]:
    """The mixture's parameters on the non-goal rows (see the module docstring)."""
    import numpy as np
    from ctxsim.harness.files.extras import require

    require("calibrate", "scipy")
    from scipy import optimize, stats

    x = [(d, p) for c, d, p in rows if c != "goal"]
    D = np.array([min(d, p) for d, p in x], dtype=float) + 1.0
    P = np.array([p for _, p in x], dtype=float) + 1.0
    low = D < FLOOR

    def part(mu: float, s: float) -> np.ndarray:
        v = np.where(low, stats.lognorm.cdf(FLOOR, s, scale=math.exp(mu)), stats.lognorm.pdf(D, s, scale=math.exp(mu)))
        return v / np.maximum(stats.lognorm.cdf(P, s, scale=math.exp(mu)), 1e-300)

    def unpack(th):
        m1, l1, m2, l2, a1, a2 = th
        e = np.exp(np.array([0.0, a1, a2]) - max(0.0, a1, a2))
        w = e / e.sum()
        return w, (m1, math.exp(l1)), (m2, math.exp(l2))

    def nll(th) -> float:
        w, (m1, s1), (m2, s2) = unpack(th)
        f = w[0] * part(m1, s1) + w[1] * part(m2, s2) + w[2] * np.where(low, FLOOR / P, 1.0 / P)
        return float(-np.sum(np.log(f + 1e-300)))

    th0 = [*(math.log(v) for v in START[:4]), math.log(START[5] / START[4]), math.log(0.01 / START[4])]
    res = optimize.minimize(nll, th0, method="Nelder-Mead",
                            options={"maxiter": 20_000, "maxfev": 20_000, "xatol": 1e-7, "fatol": 1e-7})
    w, (m1, s1), (m2, s2) = unpack(res.x)
    return {"w": [round(float(v), 6) for v in w], "adjacent": [round(math.exp(m1), 3), round(s1, 6)],
            "recent": [round(math.exp(m2), 3), round(s2, 6)], "neg_log_likelihood": round(res.fun, 3),
            "converged": bool(res.success), "needs": len(x)}


def check(rows: Sequence[tuple[str, int, int]], model: dict[str, Any]) -> list[dict[str, Any]]:
    """Observed and fitted P(D > d) over the non-goal needs at positions ≥ d."""
    from ctxsim.harness.synth.recurrence import Reneed

    r = Reneed(tuple(model["w"]), tuple(model["adjacent"]), tuple(model["recent"]))
    out = []
    for d in CHECK:
        at = [(dd, p) for c, dd, p in rows if c != "goal" and p >= d]
        if not at:
            continue
        obs = sum(dd > d for dd, _ in at) / len(at)
        fit_ = sum(r.sf(d, p + 1.0) for _, p in at) / len(at)
        out.append({"d": d, "needs": len(at), "observed": round(obs, 5), "fitted": round(fit_, 5)})
    return out


def main(argv: list[str] | None = None) -> int:
    from ctxsim.harness.calibration import provenance as pv
    from ctxsim.harness.model import trace as tr

    ap = argparse.ArgumentParser(prog="reneed_fit", description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", help="imported Claude Code traces (files or folders)")
    ap.add_argument("-o", "--output", default=None, help="data file (default: print only)")
    ap.add_argument("--population", default=None, help="dev.tsv naming each log's repository and commit")
    a = ap.parse_args(argv)
    tsv = Path(a.population) if a.population else pv.default_tsv()
    rows: list[tuple[str, int, int]] = []
    logs = []
    for item in a.traces:
        p = Path(item)
        for f in sorted(p.rglob("*.jsonl")) if p.is_dir() else [p]:
            try:
                t = tr.load(f)
            except Exception as e:  # noqa: BLE001  (skipped, named: the rest is still measured)
                sys.stderr.write(f"warning: {f}: skipped ({e})\n")
                continue
            if t.calls < MIN_CALLS:
                continue
            got = rows_of(t)
            rows += got
            src = (t.header.source or {}).get("path")
            logs.append({**pv.provenance(src or f, tsv), "needs": len(got)})
    model = fit(rows)
    goals = sum(c == "goal" for c, _, _ in rows)
    data = {"format": "ctxsim-reneed", "version": 1,
            "source": {"command": "python -m ctxsim.harness.calibration.reneed_fit " + " ".join(a.traces),
                       "code": "harness/calibration/reneed_fit.py (fit), harness/synth/recurrence.py (Reneed, distances)",
                       "facts": "derived from each log's content (harness/retention/probes.py)",
                       "repositories": pv.repositories(logs), "logs": logs},
            "model": {k: model[k] for k in ("w", "adjacent", "recent")},
            "fit": {k: model[k] for k in ("neg_log_likelihood", "converged", "needs")},
            "goal_share": round(goals / max(1, len(rows)), 5), "needs": len(rows), "sessions": len(logs),
            "check": check(rows, model)}
    text = json.dumps(data, indent=1) + "\n"
    if a.output:
        from ctxsim.harness.files import atomic

        atomic.write_text(Path(a.output), text)
    print(json.dumps({k: data[k] for k in ("model", "fit", "goal_share", "needs", "sessions", "check")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

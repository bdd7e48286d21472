"""The re-need fit (harness/calibration/reneed_fit.py) recovers a mixture it is given, and the
provenance of a population log names its repository and commit, never its path (issue 43)."""

import numpy as np
import pytest
from ctxsim.harness.calibration import provenance, reneed_fit
from ctxsim.harness.synth.reneed import Reneed

pytest.importorskip("scipy")


def test_the_fit_recovers_a_known_mixture():
    truth = Reneed((0.3, 0.68, 0.02), (25.0, 0.5), (3_000.0, 2.0))
    rng = np.random.default_rng(7)
    rows = []
    for _ in range(4_000):
        pos = float(rng.uniform(50_000, 300_000))
        # a draw of D at pos: beyond 0 is the whole (truncated) mixture
        d = truth.sample_beyond(rng, 1e-9, pos)
        rows.append(("identifier", int(d), int(pos)))
    rows.append(("goal", 60_000, 60_000))   # goals are left out of the fit
    got = reneed_fit.fit(rows)
    assert got["converged"] and got["needs"] == 4_000
    w = got["w"]
    assert w[0] == pytest.approx(0.3, abs=0.03) and w[1] == pytest.approx(0.68, abs=0.03) and w[2] < 0.05
    assert got["recent"][0] == pytest.approx(3_000, rel=0.2) and got["recent"][1] == pytest.approx(2.0, abs=0.15)
    chk = {c["d"]: c for c in reneed_fit.check(rows, got)}
    assert abs(chk[10_000]["observed"] - chk[10_000]["fitted"]) < 0.02


def test_provenance_names_repository_and_commit_and_an_opaque_digest(tmp_path):
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("kind\trepo\tcommit\tpath\tcalls\tcompact_boundaries\tnote\n"
                   "claude\towner/name\tabc1234567\tprojects/x/s1.jsonl\t10\t1\t\n")
    log = tmp_path / "claude" / "owner+name" / "s1.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(b'{"type": "user"}\n')
    got = provenance.provenance(log, tsv)
    assert got["repo"] == "owner/name" and got["commit"] == "abc1234567" and len(got["digest"]) == 16
    assert "s1" not in str(got)   # no path, no session id
    assert provenance.provenance(tmp_path / "other" / "s2.jsonl", tsv)["repo"] is None
    assert provenance.repositories([got, got]) == [{"repo": "owner/name", "commit": "abc1234567", "sessions": 2}]

"""Per-configuration numbers over several runs, failed configurations named in figure readings, and
report text rendered as HTML."""

import pandas as pd
from ctxsim.harness.report.figures import _failed_names
from ctxsim.harness.report.html import inline
from ctxsim.harness.sweep import analysis


def test_per_session_counts_are_means_over_seeds():
    """Three seeds of one configuration: 900 calls each, 2, 4 and 6 rejected requests. The row reads
    "4 rejected of 900 calls" (a sum, 12 of 900, would describe no session)."""
    df = pd.DataFrame({"label": ["truncate"] * 3, "window": [200_000] * 3, "seed": [0, 1, 2],
                       "cost_usd": [1.0, 2.0, 3.0], "completed": [True] * 3, "calls": [900] * 3,
                       "rejected_requests": [2, 4, 6], "retries": [2, 4, 6], "overflows": [1, 1, 4]})
    row = analysis.by_config(df).iloc[0]
    assert (row["runs"], row["calls"], row["rejected_requests"], row["retries"]) == (3, 900, 4, 4)
    assert row["overflows"] == 2 and row["cost_usd"] == 2.0 and row["runs_failed"] == 0


def test_inline_markdown_becomes_html_and_the_rest_is_escaped():
    assert inline("**failed at call 15** in `append_only` <b>") == (
        "<strong>failed at call 15</strong> in <code>append_only</code> &lt;b&gt;")


def test_a_reading_names_every_failed_configuration():
    """Seven of eight configurations fail (the demo at 200k has more than five): each is named with
    its call, none hidden behind an ellipsis."""
    d = pd.DataFrame({"config": [f"s{i}" for i in range(8)], "completed": [False] * 7 + [True],
                      "failed_at_call": [10 * i for i in range(1, 8)] + [None]})
    assert _failed_names(d) == ", ".join(f"s{i} (failed at call {10 * (i + 1)})" for i in range(7))
    many = pd.DataFrame({"config": [f"s{i}" for i in range(33)], "completed": [False] * 33, "failed_at_call": 5})
    assert _failed_names(many).endswith("s29 (failed at call 5) and 3 more")


def test_a_failed_configuration_is_listed_last_in_the_retention_ranking_and_the_pair_reads_true():
    """Three seeds × ten probes (weight 1). ``kept`` completes and scores 0.5 on every probe; ``lost``
    failed late and scores 0.9 (its last probe unreached: 0): 0.9 × 9 / 10 = 0.81, above 0.5 unless a
    resample draws the unreached probe 5 times of 10 (p ≈ 0.002). It is listed after ``kept`` and the
    pair says ``below``, not ``above``."""
    import numpy as np
    from ctxsim.harness.sweep.uncertainty import Block, noise_lines

    def block(row):
        return [Block(np.array([row] * 3, dtype=float), np.ones(10), (0, 1, 2))]

    blocks = {"lost": block([0.9] * 9 + [0.0]), "kept": block([0.5] * 10)}
    assert [ln for ln in noise_lines(blocks) if ln.startswith("- `")][0].startswith("- `lost`: 0.810")
    lines = [ln for ln in noise_lines(blocks, failed={"lost"}) if ln.startswith("- `")]
    assert lines[0] == "- `kept`: 0.500 [0.500, 0.500]" and lines[1].startswith("- `lost`: 0.810")
    assert lines[2].startswith("- `kept` is below `lost`: difference -0.310")

"""Per-configuration numbers over several runs, and report text rendered as HTML."""

import pandas as pd

from harness import analysis
from harness.formatting import inline_html


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
    assert inline_html("**failed at call 15** in `append_only` <b>") == (
        "<b>failed at call 15</b> in <code>append_only</code> &lt;b&gt;")

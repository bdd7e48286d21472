"""A sweep report recommends one configuration of the grid and shows it: its own metrics (not the
grid's mean) and only the parameters that differ from the strategy's defaults (issue #15)."""

import re

import pytest
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.report import formatting as fmt
from ctxsim.harness.report.build import rows_from_results, write_report
from ctxsim.harness.sweep import analysis

from tests.report.sessions import WINDOW, dump_session

GRID = [("truncate", {"max_bytes": 2048}), ("truncate", {"max_bytes": 4096}), ("truncate", {"max_bytes": 4096, "head_lines": 64})]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    t = dump_session()
    runs = [replay(t, s, p, RunConfig(window=WINDOW)) for s, p in GRID]
    out = tmp_path_factory.mktemp("sweep")
    write_report(runs, out, target=0.0, title="grid")
    return runs, (out / "report.md").read_text()


def test_the_recommendation_is_one_grid_point_with_its_own_numbers(grid):
    runs, md = grid
    costs = [r.metrics["cost_usd"] for r in runs]
    assert all(r.metrics["completed"] for r in runs) and len(set(costs)) == 3
    df, _ = rows_from_results(runs)
    best = analysis.recommend(analysis.by_config(df), 0.0)
    i = costs.index(min(costs))
    assert best["cost_usd"] == pytest.approx(costs[i])
    rec = md.split("## Cheapest of all configurations at needs at risk kept ≥ 0", 1)[1].split("\n## ", 1)[0]
    assert rec.strip().startswith(f"**{best['config']}** at window 200,000")
    assert f"| cost per session | {fmt.money(costs[i])} |" in rec
    assert f"| cost per session | {fmt.money(sum(costs) / 3)} |" not in rec  # not the grid's mean


def test_only_the_changed_parameters_are_shown(grid):
    runs, md = grid
    rec = md.split("## Cheapest of all configurations at needs at risk kept ≥ 0", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| `([^`]+)` \|$", rec, flags=re.M)
    costs = [r.metrics["cost_usd"] for r in runs]
    changed = GRID[costs.index(min(costs))][1]
    assert "parameter (changed from the default)" in rec
    assert dict(rows) == {k: str(v) for k, v in changed.items()}  # max_lines, tail_lines ... not listed

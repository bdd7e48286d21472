"""NovaCode claims to manage the window (N-COMP-3): every preset, at 200k and at 1M, with every layer
on, completes with no request the API refuses (deep profile only: `make test-deep`; about 45 s of
CPU for the twelve runs)."""

from __future__ import annotations

import os

import pytest
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.synth import generate, load_preset

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE") != "deep", reason="deep profile only")]

PRESETS = ("short", "long-200k", "long-1m", "spill-heavy", "multi-session", "subagent")


@pytest.mark.parametrize("window", [200_000, 1_000_000])
@pytest.mark.parametrize("preset", PRESETS)
def test_n_comp_3_every_preset_completes_with_no_rejected_request(preset, window):
    r = replay(generate(load_preset(preset), 1), "novacode", None, RunConfig(window=window, seed=0))
    m = r.metrics
    assert m["completed"] is True and m["rejected_requests"] == 0, (preset, window, m["strategy_counters"])
    assert m["peak_context_tokens"] <= window

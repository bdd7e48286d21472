"""Every peer strategy keeps 0 pairing violations on the real third-party logs (through the
importers) and on the synthetic presets, with windows small enough that they all act."""

from __future__ import annotations

from pathlib import Path

import pytest
from ctxsim.harness.importers import import_file
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.synth.config import load_preset
from ctxsim.harness.synth.generator import generate

PEERS = ["truncate", "sliding_window", "cut_no_summary", "observation_masking", "context_editing", "codex",
         "gemini_cli", "openhands", "amortized_forgetting", "claude_code", "anthropic_compaction", "aider", "opencode", "goose", "roo_code",
         "cline"]
REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "real"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")


def real_logs() -> list[tuple[str, Path]]:
    if not REAL.is_dir():
        return []
    out = [("claude-code", p) for p in sorted((REAL / "claude-code").glob("*/*.jsonl"))]
    out += [("codex", p) for p in sorted((REAL / "codex").glob("*.jsonl"))]
    out += [("swe-agent", p) for p in sorted((REAL / "swe-agent").glob("*.traj"))]
    out += [("openhands", p) for p in sorted((REAL / "openhands").glob("*.json"))]
    return out


@pytest.fixture(scope="module")
def real_traces():
    traces = []
    for fmt, path in real_logs():
        traces.append((path.name, import_file(fmt, path).trace))
    return traces


@needs_real
@pytest.mark.parametrize("name", PEERS)
def test_no_pairing_violation_on_real_logs(name, real_traces):
    assert real_traces, "no real logs imported"
    for label, trace in real_traces:
        # a 60k window makes the windowed strategies act on the longer logs
        m = replay(trace, name, None, RunConfig(window=60_000, max_calls=120)).metrics
        assert m["pairing_violations"] == 0, f"{name} on {label}"


@pytest.fixture(scope="module")
def synthetic():
    return {p: generate(load_preset(p)) for p in ("short", "spill-heavy", "subagent", "multi-session")}


@pytest.mark.parametrize("name", PEERS)
def test_no_pairing_violation_on_synthetic_presets(name, synthetic):
    for preset, trace in synthetic.items():
        m = replay(trace, name, None, RunConfig(window=40_000, max_calls=120)).metrics
        assert m["pairing_violations"] == 0, f"{name} on preset {preset}"

"""Properties of the generator over random small configurations (hypothesis, bounded, deterministic)."""

from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import SynthConfig, generate
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=20, deadline=None)
@given(calls=st.integers(1, 60), sessions=st.integers(1, 4), subtask=st.sampled_from([0.0, 0.5, 1.0]),
       huge=st.sampled_from([0.0, 0.3]), burst=st.sampled_from([0.0, 0.2]), seed=st.integers(0, 2**16))
def test_any_small_config_gives_a_valid_trace_with_the_asked_shape(calls, sessions, subtask, huge, burst, seed):
    sessions = min(sessions, calls)
    cfg = SynthConfig(calls=calls, sessions=sessions, subtask_share=subtask, huge_share=huge, burst_share=burst,
                      burst_tools=3, system_chars=500, probe_every=3.0)
    t = generate(cfg, seed)  # validate_events inside: pairing, facts after their text, probes after facts
    assert t.calls == calls
    assert sum(isinstance(e, tr.SessionStart) for e in t.events) == (sessions if sessions > 1 else 0)
    goals = [f for f in t.facts().values() if f.category == "goal"]
    assert len(goals) == sessions  # one goal per session
    assert tr.dumps(generate(cfg, seed)) == tr.dumps(t)  # same seed, same bytes

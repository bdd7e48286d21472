"""Synthetic long sessions: presets (``traces/presets/*.toml``) -> traces. Shape (sizes, tool mix,
gaps) fitted to real logs (:mod:`ctxsim.harness.synth.fit`); content real (a real project, its real test
runs, :mod:`ctxsim.harness.synth.corpus`); facts and probes whose distances are fitted to the real logs
(:mod:`ctxsim.harness.synth.recurrence`).

May import: files, model, provider, llm, strategies, retention, replay, fidelity, importers.
"""

from ctxsim.harness.synth.config import PresetError, SynthConfig, load_preset, preset_names
from ctxsim.harness.synth.generator import generate

__all__ = ["PresetError", "SynthConfig", "generate", "load_preset", "preset_names"]

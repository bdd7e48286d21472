"""Synthetic long sessions: presets (``traces/presets/*.toml``) -> traces, with sizes, tool mix and
gaps fitted to real logs (:mod:`harness.synth.fit`), planted facts and probes for retention."""

from harness.synth.config import PresetError, SynthConfig, load_preset, preset_names
from harness.synth.generator import generate

__all__ = ["PresetError", "SynthConfig", "generate", "load_preset", "preset_names"]

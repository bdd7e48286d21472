"""Presets and --set overrides."""

import pytest
from ctxsim.harness.synth.config import PresetError, SynthConfig, load_preset, preset_names


def test_all_required_presets_exist_and_load():
    assert {"short", "long-200k", "long-1m", "spill-heavy", "multi-session", "subagent"} <= set(preset_names())
    for name in preset_names():
        cfg = load_preset(name)
        assert cfg.name == name and cfg.description


def test_set_overrides_top_level_and_nested_fields():
    cfg = load_preset("short", ["calls=50", "result_chars.read.median=3000", "facts.file=12", "probe_goal_share=0.9"])
    assert cfg.calls == 50
    assert cfg.result_chars["read"].median == 3000
    assert cfg.result_chars["read"].p90 == SynthConfig().result_chars["read"].p90  # the rest stays fitted
    assert cfg.result_chars["bash"] == SynthConfig().result_chars["bash"]
    assert cfg.facts["file"] == 12 and cfg.facts["constraint"] == 4.0  # short.toml's own table is kept
    assert cfg.probe_goal_share == 0.9


def test_set_accepts_a_path_to_a_toml_file(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text('calls = 7\ndescription = "mine"\n')
    cfg = load_preset(str(p), ["name=\"x\""])
    assert cfg.calls == 7 and cfg.name == "x"


@pytest.mark.parametrize("bad,match", [
    (["bogus=1"], "unknown field 'bogus'"),
    (["calls"], "expected key=value"),
    (["calls=0"], "calls"),
    (["tool_mix.fax=1"], "unknown tool kind"),
    (["facts.goal=3"], "non-rate categories"),
    (["calls.x=1"], "not a table"),
])
def test_bad_overrides_fail_loudly(bad, match):
    with pytest.raises(PresetError, match=match):
        load_preset("short", bad)


def test_unknown_preset_lists_the_known_ones(tmp_path):
    with pytest.raises(PresetError, match="known: .*long-1m"):
        load_preset("nope")
    p = tmp_path / "broken.toml"
    p.write_text("calls = = 3")
    with pytest.raises(PresetError, match="not TOML"):
        load_preset(str(p))

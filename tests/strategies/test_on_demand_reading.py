"""on_demand_reading: reads stay inline while fresh, old ones become pointers to real files, and a
probe that needs an old read's detail is recovered by a billed read-back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Block, Message, SystemPrompt, ToolDef, ToolSet
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo, StrategyEnv
from ctxsim.strategies.on_demand_reading import POINTER, OnDemandReading
from ctxsim.strategies.registry import StrategyError, get, make_config

from tests.helpers_traces import Builder

PARAMS = {"inline_read_tokens": 5_000, "keep_read_tokens": 2_000, "keep_recent_reads": 1, "cold_cache_s": 0}


def make(tmp_path: Path, **params) -> OnDemandReading:
    env = StrategyEnv(session_dir=tmp_path, services=None, now=lambda: 0.0, window=200_000,
                      max_output_tokens=64_000, model="m", provider="anthropic", system=SystemPrompt.of("sys"),
                      tools=ToolSet((ToolDef("Read", "read"), ToolDef("Bash", "run"))), rng=np.random.default_rng(0))
    return OnDemandReading(make_config(OnDemandReading, {**PARAMS, **params}), env)


def read(s: OnDemandReading, i: int, path: str, text: str, tool: str = "Read"):
    req = s.build_request(CallInfo(i, float(i)))
    s.on_response(Message("assistant", (Block.tool_use(f"tu{i}", tool, {"file_path": path}),)), None)
    s.on_tool_results(Message("user", (Block.tool_result(f"tu{i}", text),)))
    return req


def test_old_reads_become_pointers_to_saved_files(tmp_path):
    s = make(tmp_path)
    assert get("on_demand_reading") is OnDemandReading
    s.on_user(Message.user("fix the parser"))
    reqs = [read(s, i, f"/src/f{i}.py", str(i) * 7000) for i in range(3)]
    # each read is 7,000 / 3.5 = 2,000 tokens. Before call 2 two reads are inline (4,000 < 5,000)
    assert not any(r.rewrite for r in reqs)
    req = s.build_request(CallInfo(3, 3.0))
    # three reads (6,000 >= 5,000): the oldest go, newest (f2) protected, until <= 2,000:
    # f0 (6,000 -> 4,000), f1 (4,000 -> 2,000), stop
    assert req.rewrite
    msgs = req.messages
    for i, idx in ((0, 2), (1, 4)):
        saved = (tmp_path / "reads" / f"tu{i}.txt").resolve()
        assert saved.read_text() == str(i) * 7000
        assert msgs[idx].blocks[0].text == POINTER.format(source=f"/src/f{i}.py", chars=7000, saved=saved)
    assert msgs[6].blocks[0].text == "2" * 7000
    assert s.counters.spills == 2 and s.counters.extra["reads_replaced"] == 2
    assert len(msgs) == 7  # nothing was dropped: only the contents were replaced


def test_a_read_of_a_saved_file_points_at_the_same_file_again(tmp_path):
    s = make(tmp_path)
    s.on_user(Message.user("go"))
    for i in range(3):
        read(s, i, f"/src/f{i}.py", str(i) * 7000)
    s.build_request(CallInfo(3, 3.0))
    saved = str((tmp_path / "reads" / "tu0.txt").resolve())
    read(s, 4, saved, "0" * 7000)         # the model follows the pointer: the file comes back inline
    for i in range(5, 7):
        read(s, i, f"/src/g{i}.py", "g" * 7000)
    s.build_request(CallInfo(7, 7.0))
    # before call 6 the inline reads are f2, tu4, g5 = 6,000 >= 5,000: f2 (-> 4,000) and tu4 (-> 2,000)
    # go, g5 is protected; before call 7, g5 + g6 = 4,000 < 5,000: nothing. tu4 points at tu0's file.
    assert not (tmp_path / "reads" / "tu4.txt").exists()
    pointers = [b for m in s.history for b in m.blocks if b.type == "tool_result" and saved in b.text]
    assert [b.id for b in pointers] == ["tu0", "tu4"]
    assert s.counters.extra["reads_replaced"] == 4
    assert s.counters.spills == 3  # f0, f1, f2 written; the read-back was not


def test_short_results_and_other_tools_stay_inline_unless_asked(tmp_path):
    s = make(tmp_path)
    s.on_user(Message.user("go"))
    read(s, 0, "/a", "a" * 500)                     # under min_pointer_chars (1,000)
    for i in range(1, 4):
        read(s, i, f"/bash{i}", "b" * 7000, tool="Bash")
    assert not s.build_request(CallInfo(4, 4.0)).rewrite and s.inline == []
    t = make(tmp_path / "all", elide_all_results=True)
    t.on_user(Message.user("go"))
    for i in range(3):
        read(t, i, f"/bash{i}", "b" * 7000, tool="Bash")
    assert t.build_request(CallInfo(3, 3.0)).rewrite and t.counters.extra["reads_replaced"] == 2


def test_config_bounds():
    with pytest.raises(StrategyError):
        make_config(OnDemandReading, {"inline_read_tokens": 1_000, "keep_read_tokens": 1_000})


def test_a_probe_on_an_old_read_is_recovered_by_a_billed_read_back():
    fact = "PARSER_TOKEN_LIMIT = 100037"
    b = Builder()
    b.user("Fix the parser limits.")
    b.call("reading", results=["x = 1\n" * 500 + fact + "\n" + "y = 2\n" * 500], tool="Read",
           inputs=[{"file_path": "/src/limits.py"}])
    b.event(tr.FactEvent(t=b.t, id="f", category="file", text=fact))
    rng = np.random.default_rng(0)
    for i in range(6):
        b.call(f"read {i}", results=[" ".join(rng.choice(["alpha", "def", "x", "="], 3000))], tool="Read",
               inputs=[{"file_path": f"/src/m{i}.py"}])
    b.event(tr.ProbeEvent(t=b.t, id="p", needs=["f"]))
    b.call("answer")
    r = replay(b.build(), "on_demand_reading", PARAMS, RunConfig(readback_probability=1.0))
    row = r.probes.set_index("fact").loc["f"]
    assert row["where"] == "recoverable" and "/reads/tu_1.txt" in row["pointer"]
    assert r.metrics["readbacks"] == 1 and list(r.calls.kind).count("readback") == 1
    assert r.metrics["pairing_violations"] == 0


def test_replacement_rounds_count_as_compactions_and_the_window_has_a_fallback():
    """Replacing old reads removes content from history (a compaction by the counters' one
    definition); past the auto-compact line the conversation is compacted with a summary."""
    b = Builder()
    b.user("Goal: read the parser.")
    for i in range(14):
        b.call(f"read {i}", results=[f"{i} " * 3000], tool="Read", inputs=[{"file_path": f"/src/f{i}.py"}])
    r = replay(b.build(), "on_demand_reading", {**PARAMS, "trigger_tokens": 9_000}, RunConfig())
    m = r.metrics
    c = m["strategy_counters"]
    assert m["compactions"]["succeeded"] == c["replacement_rounds"] + c.get("window_cuts", 0)
    assert c["replacement_rounds"] >= 1 and c.get("window_cuts", 0) >= 1
    assert m["overflows"] == m["pairing_violations"] == 0


def test_reads_are_replaced_only_once_the_cache_is_cold(tmp_path):
    """Claude Code's time-based microcompact (reported): replacing an old read re-writes everything
    after it, so by default it waits for an idle gap past the 5-minute TTL, when the cache is cold."""
    s = make(tmp_path, cold_cache_s=300)
    s.on_user(Message.user("fix the parser"))
    for i in range(3):  # three reads of 2,000 tokens, 2 s apart: over the 5,000 budget, cache warm
        read(s, i, f"/src/f{i}.py", str(i) * 7000)
    warm = s.build_request(CallInfo(3, 10.0))
    assert not warm.rewrite and s.counters.extra["reads_replaced"] == 0
    s.on_response(Message("assistant", (Block.text_block("thinking"),)), None)
    cold = s.build_request(CallInfo(4, 400.0))  # 390 s idle: the cache has expired
    assert cold.rewrite and s.counters.extra["reads_replaced"] == 2 and s.counters.compactions_succeeded == 1


def test_the_property_kit_reaches_the_pointer_rule():
    """At the defaults (30,000 tokens of reads inline) the kit's 32k sessions never made a pointer, so no bug
    in the rule could be caught; check_params scales the budgets by 32,000 / 200,000 (4,800 and 1,600), and
    the kit's day-long launch (cold every three hours) then replaces reads."""
    from ctxsim.harness.replay.engine import RunConfig, replay
    from ctxsim.harness.testing.params import CHECK_MODEL, params_for
    from ctxsim.harness.testing.scenarios import day_long_launch

    params = params_for(OnDemandReading, 32_000)
    assert params["inline_read_tokens"] == 4_800 and params["keep_read_tokens"] == 1_600
    res = replay(day_long_launch(32_000), OnDemandReading, params, RunConfig(model=CHECK_MODEL, window=32_000, seed=0))
    counters = res.metrics["strategy_counters"]
    assert (counters.get("extra") or counters)["reads_replaced"] > 0


def test_a_read_the_message_cap_shortened_is_saved_whole_where_its_pointer_names(tmp_path):
    """The family caps what one message's results may bring (max_result_chars each, here 5,000): a read of
    8,000 characters is in history at 5,000 and a cut marker. When it becomes a pointer, the file it names holds
    all 8,000 as the tool returned them, and the pointer says so (found by the property kit's random sample: the
    file held the capped copy, so the way back lost 3,000 characters)."""
    s = make(tmp_path, max_result_chars=5_000)
    s.on_user(Message.user("fix the parser"))
    whole = "".join(f"line {k:05d}\n" for k in range(728))[:8_000]
    read(s, 0, "/src/big.py", whole)
    assert len(s.history[2].blocks[0].text) < len(whole)          # capped in history
    for i in range(1, 4):
        read(s, i, f"/src/f{i}.py", str(i) * 7000)
    req = s.build_request(CallInfo(4, 4.0))
    saved = (tmp_path / "reads" / "tu0.txt").resolve()
    assert s.counters.extra["reads_replaced"] >= 1 and saved.read_text() == whole
    assert req.messages[2].blocks[0].text == POINTER.format(source="/src/big.py", chars=8_000, saved=saved)

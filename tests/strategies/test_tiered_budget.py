"""tiered_budget: each tier's budget and mode (spill reversible, cut irreversible, keep), read-back
exemption, a failed write, and a spilled detail recovered at a probe."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Block, Message, SystemPrompt, ToolDef, ToolSet
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo, StrategyEnv
from ctxsim.strategies.registry import get, make_config
from ctxsim.strategies.structured_state import CAP_MARKER
from ctxsim.strategies.tiered_budget import CUT_MARKER, SPILLED, TieredBudget, cut_middle

from tests.helpers_traces import Builder


def make(tmp_path: Path, **params) -> TieredBudget:
    env = StrategyEnv(session_dir=tmp_path, services=None, now=lambda: 0.0, window=200_000,
                      max_output_tokens=64_000, model="m", provider="anthropic", system=SystemPrompt.of("sys"),
                      tools=ToolSet((ToolDef("Read", "read"), ToolDef("Bash", "run"))), rng=np.random.default_rng(0))
    return TieredBudget(make_config(TieredBudget, params), env)


def result_of(s: TieredBudget, i: int, tool: str, text: str, path: str = "/src/a.py", **meta) -> Block:
    s.build_request(CallInfo(i, float(i)))
    s.on_response(Message("assistant", (Block.tool_use(f"tu{i}", tool, {"file_path": path}),)), None)
    s.on_tool_results(Message("user", (Block.tool_result(f"tu{i}", text),), meta))
    return s.history[-1].blocks[0]


def test_cut_middle_keeps_head_and_tail():
    text = "0123456789" * 10
    # budget 20, head share 0.2: 4 from the start, 16 from the end, 100 - 20 = 80 dropped
    assert cut_middle(text, 20, 0.2) == "0123" + CUT_MARKER.format(n=80) + "4567890123456789"
    assert cut_middle(text, 100, 0.2) == text


def test_shell_output_is_cut_and_reads_are_spilled(tmp_path):
    s = make(tmp_path)
    assert get("tiered_budget") is TieredBudget
    s.on_user(Message.user("run the tests"))
    log = "".join(f"line {i:05d}\n" for i in range(4000))  # 4,000 x 11 = 44,000 chars
    b = result_of(s, 0, "Bash", log)
    # shell tier: Claude Code's 30,000 budget, cut: head 6,000 + tail 24,000; 44,000 - 30,000 = 14,000 cut
    assert b.text == log[:6000] + CUT_MARKER.format(n=14_000) + log[-24_000:]
    assert s.counters.extra["chars_cut"] == 14_000 and s.counters.spills == 0
    src = "x" * 120_000
    b = result_of(s, 1, "Read", src)
    path = (tmp_path / "tool-results" / "tu1.txt").resolve()
    # read tier: 100,000 budget (25,000 tokens x 4), spill: the head inline, the whole 120,000 in the file
    assert b.text == SPILLED.format(head="x" * 100_000, rest=20_000, size=120_000, path=path)
    assert path.read_text() == src and s.counters.spills == 1
    small = result_of(s, 2, "Read", "y" * 30_000)
    assert small.text == "y" * 30_000
    other = result_of(s, 3, "Mystery", "z" * 120_000)  # other tier: 100,000 (MCP's 25,000 tokens), spill
    assert other.meta["spilled"].endswith("tu3.txt")


def test_read_backs_of_spilled_files_are_exempt(tmp_path):
    """As N-SPILL-3: a read-back of a spilled file is never spilled again (no read/spill loop)."""
    s = make(tmp_path)
    s.on_user(Message.user("go"))
    result_of(s, 0, "Read", "x" * 120_000)
    path = str((tmp_path / "tool-results" / "tu0.txt").resolve())
    again = result_of(s, 1, "Read", "x" * 120_000, path=path)
    engine_rb = result_of(s, 2, "Read", "x" * 120_000, path="/elsewhere", origin="readback")
    assert again.text == "x" * 120_000 and engine_rb.text == "x" * 120_000
    assert s.counters.extra["readback_exempt"] == 2 and s.counters.spills == 1


def test_keep_mode_and_a_failed_write(tmp_path):
    """keep mode has no budget; a failed spill write stays inline, marked, not retried (as N-SPILL-4)."""
    s = make(tmp_path, shell_mode="keep")
    s.on_user(Message.user("go"))
    assert result_of(s, 0, "Bash", "b" * 40_000).text == "b" * 40_000
    (tmp_path / "tool-results").write_text("not a directory")  # the spill directory cannot be made
    b = result_of(s, 1, "Read", "r" * 120_000)
    assert b.text == "r" * 120_000 and b.meta["spill_exempt"] and s.counters.extra["spill_failed"] == 1


def test_results_are_final_once_in_history(tmp_path):
    """As N-SPILL-6: a result is final once it enters history (cached prefixes stay byte-stable)."""
    s = make(tmp_path)
    s.on_user(Message.user("go"))
    reqs = []
    for i in range(4):
        result_of(s, i, "Bash", "b" * 20_000)
        reqs.append(s.build_request(CallInfo(10 + i, 10.0 + i)))
    # every request extends the previous one: same first messages, never a rewrite
    for a, b in zip(reqs, reqs[1:]):
        assert not b.rewrite and all(x is y for x, y in zip(a.messages, b.messages))


def test_a_spilled_detail_is_recovered_by_a_billed_read_back():
    fact = "EXPORT_BATCH_LIMIT = 100074"
    b = Builder()
    b.user("Fix the export batches.")
    b.call("reading", results=["a = 1\n" * 17_000 + fact + "\n"], tool="Read", inputs=[{"file_path": "/src/x.py"}])
    b.event(tr.FactEvent(t=b.t, id="f", category="file", text=fact))
    b.event(tr.ProbeEvent(t=b.t, id="p", needs=["f"]))
    b.call("answer")
    r = replay(b.build(), "tiered_budget", None, RunConfig(readback_probability=1.0))
    row = r.probes.set_index("fact").loc["f"]
    # 102,000 + 28 chars > the 100,000 read budget: the fact is in the spilled part only
    assert row["where"] == "recoverable" and row["pointer"].endswith("tool-results/tu_1.txt")
    assert r.metrics["readbacks"] == 1 and r.metrics["spills"] == 1
    cut = replay(b.build(), "tiered_budget", {"read_mode": "cut", "head_share": 1.0}, RunConfig())
    assert cut.probes.set_index("fact").loc["f", "where"] == "lost"


def test_tool_lists_take_command_line_strings():
    """``--set`` passes strings: comma-separated or a JSON list."""
    assert make_config(TieredBudget, {"read_tools": "Read, View"}).read_tools == ("Read", "View")
    assert make_config(TieredBudget, {"shell_tools": '["Bash"]'}).shell_tools == ("Bash",)


def test_the_window_has_the_agents_fallback():
    """Budgets bound each result, not the window: at Claude Code's auto-compact line the conversation
    is compacted with a summary (counted), so a long session completes."""
    b = Builder()
    b.user("Goal: tidy the logs.")
    for i in range(12):
        b.call(f"step {i}", results=["word " * 1500])
    r = replay(b.build(), "tiered_budget", {"trigger_tokens": 8_000}, RunConfig())
    m = r.metrics
    assert m["compactions"]["succeeded"] == m["by_kind"]["summary"]["calls"] >= 2
    assert m["overflows"] == m["pairing_violations"] == 0


def test_a_read_back_by_a_relative_path_is_exempt_whatever_the_working_directory(tmp_path, monkeypatch):
    """As N-SPILL-3: the model names the spill as the hint's tail, ``tool-results/tu0.txt`` (or a
    path ending in it), which resolves against the agent's directory, not this process's."""
    monkeypatch.chdir("/")  # a relative path resolved here would name /tool-results/tu0.txt
    s = make(tmp_path)
    s.on_user(Message.user("go"))
    result_of(s, 0, "Read", "x" * 120_000)
    for i, path in ((1, "tool-results/tu0.txt"), (2, "./session/tool-results/tu0.txt")):
        assert result_of(s, i, "Read", "x" * 120_000, path=path).text == "x" * 120_000
    other = result_of(s, 3, "Read", "x" * 120_000, path="tool-results/tu9.txt")  # not a file written here
    assert other.text.startswith("<persisted-output>")
    assert s.counters.extra["readback_exempt"] == 2 and s.counters.spills == 2


def test_check_params_scale_the_tier_budgets_with_the_window():
    p = TieredBudget.check_params(32_000)  # 32,000 / 200,000 = 0.16
    assert p["read_budget_chars"] == 16_000 and p["shell_budget_chars"] == 4_800
    assert p["other_budget_chars"] == 16_000 and TieredBudget.check_params(400_000)["read_budget_chars"] == 100_000


def test_a_read_back_shares_the_message_cap_whole(tmp_path):
    """As N-SPILL-3: a read-back enters as it is, also under the family's per-message guard; it
    counts against the cap first and the other results share what it leaves. An explicit cap (the
    reaction to a rejection, cut_newest_results) still cuts it."""
    s = make(tmp_path)
    s.on_user(Message.user("go"))
    result_of(s, 0, "Read", "x" * 120_000)  # spilled to tool-results/tu0.txt
    path = str((tmp_path / "tool-results" / "tu0.txt").resolve())

    def step(i: int, results: list[tuple[str, str, str]]) -> Message:
        s.build_request(CallInfo(i, float(i)))
        s.on_response(Message("assistant", tuple(Block.tool_use(f"tu{i}{k}", tool, {"file_path": p})
                                                  for k, (tool, p, _) in enumerate(results))), None)
        s.on_tool_results(Message("user", tuple(Block.tool_result(f"tu{i}{k}", text)
                                                for k, (_, _, text) in enumerate(results))))
        return s.history[-1]

    s.message_cap_chars = lambda: 50_000
    m = step(1, [("Read", path, "r" * 30_000), ("Bash", "-", "b" * 28_000), ("Read", "/src/b.py", "c" * 10_000)])
    # 68,000 > 50,000: the read-back's 30,000 first, 20,000 left for two (floor 10,000); 18,000 over,
    # cut from the largest: Bash 28,000 -> 10,000; the other Read whole (the old guard cut the
    # read-back 30,000 -> 16,666 and Bash 28,000 -> 23,334)
    rb, sh, rd = m.blocks
    assert rb.text == "r" * 30_000 and rb.meta["readback"] is True
    assert sh.text == "b" * 10_000 + CAP_MARKER.format(n=18_000) and rd.text == "c" * 10_000
    assert s.counters.extra["results_capped"] == 1

    s.message_cap_chars = lambda: 20_000
    m = step(2, [("Read", path, "r" * 30_000), ("Bash", "-", "b" * 5_000)])
    # the read-back alone is over the cap: it enters whole, Bash keeps nothing but the marker
    assert m.blocks[0].text == "r" * 30_000 and m.blocks[1].text == CAP_MARKER.format(n=5_000)
    # a rejection's cut (explicit cap 20,000: floor 10,000, 15,000 over) spares no result
    again = Message("user", (m.blocks[0], Block.tool_result("tu21", "b" * 5_000)))
    cut = s.guard(again, 20_000)
    assert cut.blocks[0].text == "r" * 15_000 + CAP_MARKER.format(n=15_000) and cut.blocks[1] is again.blocks[1]

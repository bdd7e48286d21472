"""gemini_cli: compress at 0.5 of the window, keep the newest 30% by characters split on a plain
user message, <state_snapshot> + verification call, reject if it does not shrink, truncation only
after a failure, tool outputs over 40,000 characters saved to a file (20% head / 80% tail); in
release 0.56 (the default) also masking of old tool output every turn, arrival truncation of shell
and MCP output only, the shrink check on history alone and the flag set by an inflated snapshot
only; release 2025-12 is the older reading.

Read at: google-gemini/gemini-cli v0.56.0.
The files read are named in the strategy's docstring."""

from __future__ import annotations

from pathlib import Path

from ctxsim.harness.model.conversation import Block, Message, Usage
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.gemini_cli import ACK, compress_split_point, format_truncated, message_json_chars

from tests.helpers_traces import Builder
from tests.strategies.peer_env import FakeServices, fail, make, step


def user(n: int) -> Message:
    return Message.user("u" * n)


def model(n: int) -> Message:
    return Message("assistant", (Block.text_block("m" * n),))


def test_format_truncated_keeps_20_percent_head_80_percent_tail():
    out = format_truncated("a" * 10_000 + "b" * 30_000 + "c" * 10_000, "/tmp/out.txt", 40_000)
    # 50,000 chars over a 40,000 budget: head 8,000, tail 32,000, 10,000 omitted
    assert "Showing first 8,000 and last 32,000 characters. For full output see: /tmp/out.txt" in out
    assert "... [10,000 characters omitted] ..." in out
    assert out.split("\n")[1] == "a" * 8_000
    assert out.endswith("b" * 22_000 + "c" * 10_000)
    assert format_truncated("short", "/x", 40_000) == "short"


def test_split_on_plain_user_message_after_70_percent_of_characters():
    # JSON lengths: a user text message is 59 + len, a model text message 64 + len
    msgs = [user(941), model(936), user(941), model(936), user(941), model(936)]  # 1,000 each
    assert [message_json_chars(m) for m in msgs] == [1_000] * 6
    # target 0.7 · 6,000 = 4,200; cumulative before index 4 is 4,000 < 4,200, so no split point at or
    # after the target; the last message is a model text without a call → compress everything
    assert compress_split_point(msgs, 0.7) == 6
    msgs.append(user(941))
    # now 7,000 → target 4,900; index 6 has 6,000 before it ≥ 4,900 → keep from 6
    assert compress_split_point(msgs, 0.7) == 6
    with_results = [user(941), Message("assistant", (Block.tool_use("t", "Bash", {}),)),
                    Message("user", (Block.tool_result("t", "r" * 892),)), model(936)]
    # the function response (index 2) is never a split point and the last model message has no call:
    # everything is compressible
    assert compress_split_point(with_results, 0.7) == 4
    with_results.append(Message("assistant", (Block.tool_use("t2", "Bash", {}),)))
    assert compress_split_point(with_results, 0.7) == 0  # only index 0 is a split point


def test_trigger_at_half_the_window_on_last_prompt_tokens():
    s = make("gemini_cli", window=200_000)
    s.on_user(Message.user("task"))
    step(s, 0, "a", usage=Usage(input_uncached=99_999))
    assert not s.should_compact(CallInfo(1, 1.0))  # 99,999 < 0.5 · 200,000
    step(s, 1, "b", usage=Usage(input_uncached=100_000))
    assert s.should_compact(CallInfo(2, 2.0))


def _session(s, usage_last=150_000):
    s.on_user(Message.user("first task " + "t" * 3_000))
    for i in range(4):
        step(s, i, "r" * 3_000)
    s.on_user(Message.user("second task"))
    step(s, 4, "r" * 100, usage=Usage(input_uncached=usage_last))


def test_two_calls_snapshot_then_verify_and_new_history():
    services = FakeServices("<state_snapshot>v1</state_snapshot>", "<state_snapshot>v2 better</state_snapshot>")
    s = make("gemini_cli", services=services)
    _session(s)
    req = s.build_request(CallInfo(5, 5.0))
    assert req.rewrite
    (r1, spec1), (r2, spec2) = services.calls
    assert (spec1.kind, spec2.kind) == ("summary", "verify")
    # both calls have the compression prompt as system instruction, not the agent's
    assert "state snapshot" in r1.system.text and r1.system is not s.env.system and not r1.tools.tools
    assert r2.messages[-1].role == "assistant" and r2.messages[-1].text == "<state_snapshot>v1</state_snapshot>"
    h = list(s.history)
    # the verified snapshot, the model's acknowledgement, then the kept part (from "second task")
    assert h[0].text == "<state_snapshot>v2 better</state_snapshot>" and h[1].text == ACK
    assert h[2].text == "second task"
    assert s.counters.compactions_succeeded == 1


def test_verify_answer_without_snapshot_keeps_the_first_snapshot():
    services = FakeServices("plain summary text", "Looks complete.")
    s = make("gemini_cli", services=services)
    _session(s)
    s.build_request(CallInfo(5, 5.0))
    assert s.history[0].text == "<state_snapshot>\nplain summary text\n</state_snapshot>"


OLD = {"release": "2025-12"}


def test_2025_12_any_failure_then_truncation_only_without_llm_calls():
    services = FakeServices(fail())
    s = make("gemini_cli", OLD, services=services)
    _session(s)
    n = len(s.history)
    assert not s.build_request(CallInfo(5, 5.0)).rewrite and len(s.history) == n
    assert s.has_failed and s.counters.compactions_failed == 1
    step(s, 5, "r", usage=Usage(input_uncached=150_000))
    s.build_request(CallInfo(6, 6.0))
    assert len(services.calls) == 1  # no second LLM attempt
    assert s.counters.extra["truncation_fallbacks"] == 2  # at step 5's call and at call 6


def test_inflated_snapshot_is_rejected():
    services = FakeServices("<state_snapshot>" + "z" * 400_000 + "</state_snapshot>", "")
    s = make("gemini_cli", services=services)
    _session(s, usage_last=100_000)
    n = len(s.history)
    s.build_request(CallInfo(5, 5.0))
    # the new history (a ~100,000-token snapshot + the kept part) is larger than the 100,000 reported
    assert len(s.history) == n and s.counters.extra["rejected_inflated"] == 1 and s.has_failed


def test_large_tool_output_saved_to_a_real_file(tmp_path: Path):
    s = make("gemini_cli", session_dir=tmp_path)
    s.on_user(Message.user("task"))
    big = "h" * 10_000 + "t" * 40_000
    step(s, 0, big)  # a Bash (shell) output: truncated on arrival
    text = s.history[-1].blocks[0].text
    path = Path(s.history[-1].blocks[0].meta["saved"])
    assert path.parent == tmp_path / "tool-outputs" and path.read_text() == big
    assert f"For full output see: {path}" in text and "[10,000 characters omitted]" in text
    assert s.counters.spills == 1


def test_replay_pairs_and_two_calls_per_compression():
    b = Builder().user("build the feature")
    for i in range(90):
        if i % 10 == 9:
            b.user(f"next: part {i}")
        b.call(f"step {i}", [f"out {i} " + "value " * 700])
    t = b.call("done").build()
    r = replay(t, "gemini_cli", None, RunConfig(window=100_000))
    m = r.metrics
    kinds = r.calls["kind"].value_counts()
    assert m["pairing_violations"] == 0 and m["compactions"]["succeeded"] >= 1
    assert kinds["summary"] == kinds["verify"]


# --- release 0.56 (the default) ---------------------------------------------------------------

def test_0_56_a_failed_call_leaves_the_flag_and_the_next_call_tries_again():
    services = FakeServices(fail(), "<state_snapshot>ok</state_snapshot>", "<state_snapshot>ok</state_snapshot>")
    s = make("gemini_cli", services=services)
    _session(s)
    assert not s.build_request(CallInfo(5, 5.0)).rewrite
    assert not s.has_failed and s.counters.compactions_failed == 1
    assert s.build_request(CallInfo(5, 5.0)).rewrite  # the retried call tries again, and succeeds
    assert len(services.calls) == 3 and s.counters.compactions_succeeded == 1


def test_0_56_only_an_inflated_snapshot_sets_the_flag_and_a_success_resets_it():
    services = FakeServices("<state_snapshot>" + "z" * 400_000 + "</state_snapshot>", "")
    s = make("gemini_cli", services=services)
    _session(s, usage_last=100_000)
    s.build_request(CallInfo(5, 5.0))
    assert s.has_failed and s.counters.extra["rejected_inflated"] == 1
    # with the flag set, automatic attempts only truncate: no LLM call
    step(s, 5, "r", usage=Usage(input_uncached=150_000))
    s.build_request(CallInfo(6, 6.0))
    assert len(services.calls) == 2 and s.counters.extra["truncation_fallbacks"] == 2  # step 5's call and call 6
    s.on_session_start("s2", False, 7.0)  # a new chat (startChat) resets it
    assert not s.has_failed


def test_0_56_shrink_check_counts_history_only():
    """A 40,000-char system prompt is 10,000 tokens of the reported 100,000 but not of the new
    history: a snapshot of ~95,000 tokens is accepted by 0.56 and refused by the 2025-12 reading."""
    snap = "<state_snapshot>" + "z" * 376_000 + "</state_snapshot>"  # 94,008 tokens at 4 chars
    for params, ok in (({}, True), (OLD, False)):
        s = make("gemini_cli", params, services=FakeServices(snap, ""), system="s" * 40_000)
        _session(s, usage_last=100_000)
        # kept part: "second task" (11), the assistant step (Bash {...}) and the 100-char result
        s.build_request(CallInfo(5, 5.0))
        assert (s.history[0].meta.get("origin") == "summary") is ok, params


def test_0_56_arrival_truncation_for_shell_and_mcp_only_at_a_threshold_that_shrinks(tmp_path: Path):
    s = make("gemini_cli", session_dir=tmp_path, window=200_000)
    s.on_user(Message.user("task"))
    big = "x" * 50_000
    step(s, 0, big, tool="Read")  # not a shell or MCP tool: kept whole
    assert s.history[-1].blocks[0].text == big
    step(s, 1, big, tool="mcp__db__query")  # an MCP tool: cut to 40,000 chars around a marker
    assert "Showing first 8,000 and last 32,000 characters" in s.history[-1].blocks[0].text
    # last prompt 195,000 of 200,000: the threshold is min(40,000, 4 · 5,000) = 20,000 chars
    step(s, 2, big, tool="Bash", usage=Usage(input_uncached=195_000))
    assert "Showing first 4,000 and last 16,000 characters" in s.history[-1].blocks[0].text
    old = make("gemini_cli", OLD, session_dir=tmp_path)
    old.on_user(Message.user("task"))
    step(old, 0, big, tool="Read")  # the older reading cut every tool's output
    assert "Showing first 8,000" in old.history[-1].blocks[0].text


def _five_reads(s):
    s.on_user(Message.user("task"))
    for i in range(5):
        step(s, i, f"{i}" * 4_000, tool="Read")


def test_0_56_masks_old_tool_output_past_the_protected_newest(tmp_path: Path):
    # each output: (4 + 4,000)/4 = 1,001 tokens; protect 1,000, mask when 500 are prunable
    s = make("gemini_cli", {"protection_threshold_tokens": 1_000, "min_prunable_tokens": 500},
             session_dir=tmp_path)
    _five_reads(s)
    req = s.build_request(CallInfo(5, 5.0))
    texts = [b.text for m in s.history for b in m.blocks if b.type == "tool_result"]
    # the newest message (r4) is the latest turn: skipped; r3 crosses the 1,000-token protection and
    # is the first prunable one; r3..r0 = 4,004 tokens ≥ 500: all four masked, r4 whole
    assert texts[4] == "4" * 4_000 and req.rewrite
    for i in range(4):
        assert texts[i].startswith(f"<tool_output_masked>\n{str(i) * 250}\n... [TRUNCATED] ...\n{str(i) * 250}")
        path = s.history[2 * i + 2].blocks[0].meta["saved"]
        assert Path(path).read_text() == str(i) * 4_000 and f"Full output available at: {path}" in texts[i]
    assert s.counters.extra["masked_tool_outputs"] == 4
    # one more step: r4 is no longer the latest turn and alone crosses the protection (1,001 >
    # 1,000), so it is masked now; masked outputs are not masked again
    step(s, 5, "5" * 10)
    assert s.build_request(CallInfo(6, 6.0)).rewrite
    after = [b.text for m in s.history for b in m.blocks if b.type == "tool_result"]
    assert after[:4] == texts[:4] and after[4].startswith("<tool_output_masked>") and after[5] == "5" * 10
    assert s.counters.extra["masked_tool_outputs"] == 5


def test_0_56_masks_nothing_until_enough_is_prunable_and_2025_12_never(tmp_path: Path):
    s = make("gemini_cli", {"protection_threshold_tokens": 1_000, "min_prunable_tokens": 5_000},
             session_dir=tmp_path)
    _five_reads(s)
    assert not s.build_request(CallInfo(5, 5.0)).rewrite  # 4,004 < 5,000 prunable
    old = make("gemini_cli", {**OLD, "protection_threshold_tokens": 1_000, "min_prunable_tokens": 500},
               session_dir=tmp_path)
    _five_reads(old)
    assert not old.build_request(CallInfo(5, 5.0)).rewrite


def test_constants_and_version_are_those_of_the_release_read():
    """Issue 46: the docstring names the version read (tag v0.56.0, b6e23a7d) and each constant is the
    line of that tag (packages/core/src/...): chatCompressionService.ts:41 ``DEFAULT_COMPRESSION_TOKEN_THRESHOLD
    = 0.5``, :47 ``COMPRESSION_PRESERVE_THRESHOLD = 0.3``, :52 ``COMPRESSION_FUNCTION_RESPONSE_TOKEN_BUDGET =
    50_000``; config/config.ts:478 ``DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD = 40_000``; utils/fileUtils.ts:668
    ``Math.floor(maxChars * 0.2)``; toolOutputMaskingService.ts:25 ``DEFAULT_TOOL_PROTECTION_THRESHOLD = 50000``,
    :26 ``DEFAULT_MIN_PRUNABLE_TOKENS_THRESHOLD = 30000``, :28 ``MASKING_INDICATOR_TAG = 'tool_output_masked'``,
    :36 ``EXEMPT_TOOLS`` (tools/definitions/base-declarations.ts:97/101/119/115: activate_skill, ask_user,
    enter_plan_mode, exit_plan_mode); base-declarations.ts:56 ``SHELL_TOOL_NAME = 'run_shell_command'``."""
    import ctxsim.strategies.gemini_cli as g

    assert "**v0.56.0** (commit b6e23a7d, 2026-08-19" in g.__doc__
    assert (g.COMPRESSION_THRESHOLD, g.PRESERVE_FRACTION, g.FUNCTION_RESPONSE_TOKEN_BUDGET) == (0.5, 0.3, 50_000)
    assert (g.TRUNCATE_THRESHOLD_CHARS, g.HEAD_SHARE) == (40_000, 0.2)
    assert (g.PROTECTION_THRESHOLD_TOKENS, g.MIN_PRUNABLE_TOKENS, g.MASK_TAG) == (50_000, 30_000, "tool_output_masked")
    assert g.MASK_EXEMPT_TOOLS == ("activate_skill", "ask_user", "enter_plan_mode", "exit_plan_mode")
    assert g.SHELL_TOOLS[0] == "run_shell_command"
    assert make("gemini_cli").config.threshold == 0.5  # chatCompressionService.ts:272-275, the default


def test_masking_rebases_the_estimate_on_the_density_the_usage_measured(tmp_path: Path):
    """Issue #45: masking took its saving away at 4 characters per token from an estimate anchored on a
    usage that counted the masked outputs at their true density (one token a character here): 66% high
    on the kit's corpus. The estimate is now the anchored one scaled by the masked request's share of
    the characters (templates.rebased_estimate, as openhands' and context_editing's)."""
    from ctxsim.strategies.templates import chars_to_tokens, prompt_chars

    s = make("gemini_cli", {"protection_threshold_tokens": 1_000, "min_prunable_tokens": 500}, session_dir=tmp_path)
    s.on_user(Message.user("task"))
    for i in range(5):  # the usage of request i: its 4,000·i characters of results at a token each, and 11 more
        step(s, i, f"{i}" * 4_000, tool="Read", usage=Usage(input_uncached=4_000 * i + 11))
    before = s.estimate()
    assert before == 16_011 + 4_000 // 4  # the last usage, and the newest result at 4 characters a token
    old = sum(m.chars for m in s.history)
    req = s.build_request(CallInfo(5, 5.0))
    new = sum(m.chars for m in s.history)
    texts = [b.text for m in s.history for b in m.blocks if b.type == "tool_result"]
    assert req.rewrite and all(t.startswith("<tool_output_masked>") for t in texts[:4]) and texts[4] == "4" * 4_000
    p = prompt_chars(s.env.system, s.env.tools)
    share = chars_to_tokens(p + new, 4.0) / chars_to_tokens(p + old, 4.0)
    assert req.estimated_tokens == round(before * share)
    # the saving taken away at 4 characters a token (the old rule) would have left most of it counted
    assert req.estimated_tokens < before - (old - new) // 4 - 1_000


def test_a_read_back_of_a_saved_output_is_not_cut_again(tmp_path: Path):
    """N-SPILL-3, held by the property kit for every strategy: a shell read of a file gemini_cli saved
    (``cat .../tool-outputs/<file>``) enters whole; any other large shell output is still cut."""
    s = make("gemini_cli", session_dir=tmp_path)
    s.on_user(Message.user("task"))
    big = "x" * 50_000
    step(s, 0, big)
    path = s.history[-1].blocks[0].meta["saved"]
    assert "Showing first 8,000 and last 32,000 characters" in s.history[-1].blocks[0].text
    s.build_request(CallInfo(1, 1.0))
    s.on_response(Message("assistant", (Block.tool_use("tu_1", "Bash", {"command": f"cat {path}"}),)), None)
    s.on_tool_results(Message("user", (Block.tool_result("tu_1", big),)))
    assert s.history[-1].blocks[0].text == big
    step(s, 2, big)
    assert "Showing first 8,000" in s.history[-1].blocks[0].text


def test_a_read_back_stays_whole_when_a_compression_cuts_the_history_to_budget(tmp_path: Path):
    """N-SPILL-3 at truncateHistoryToBudget too: the property kit's random sample found a read of a saved
    output (``./tool-outputs/<file>``, a Read tool's input) cut and saved again when a compression ran
    right after it. With a budget of 1,000 tokens both 50,000-character results are over it: the read-back
    stays whole, the other output is cut."""
    s = make("gemini_cli", {"function_response_token_budget": 1_000}, session_dir=tmp_path)
    s.on_user(Message.user("task"))
    big = "x" * 50_000
    step(s, 0, big)
    path = s.history[-1].blocks[0].meta["saved"]
    rel = "./" + "/".join(Path(path).parts[-2:])
    s.build_request(CallInfo(1, 1.0))
    s.on_response(Message("assistant", (Block.tool_use("tu_1", "Read", {"file_path": rel}),)), None)
    s.on_tool_results(Message("user", (Block.tool_result("tu_1", big),)))
    step(s, 2, "y" * 50_000, tool="Read")
    out = s.truncate_to_budget(list(s.history))
    texts = {b.id: b.text for m in out for b in m.blocks if b.type == "tool_result"}
    assert texts["tu_1"] == big
    assert "Showing first" in texts["tu_2"] and len(texts["tu_2"]) < 50_000


def test_the_kit_scales_masking_to_its_window_for_subclasses_too():
    """Unscaled, masking (50,000 protected, 30,000 prunable) never started in the kit's 32k window
    before compression at half of it (issue #45): the kit runs it at 32/200 of each, and cuts outputs past
    32/200 of 40,000 characters (6,400: no output of the kit's reached 40,000, so a budget walked the wrong
    way cut nothing there)."""
    from ctxsim.harness.testing.params import params_for
    from ctxsim.strategies.gemini_cli import GeminiCli

    class Mine(GeminiCli):
        name = "mine"

    expected = {"protection_threshold_tokens": 8_000, "min_prunable_tokens": 4_800,
                "function_response_token_budget": 8_000, "truncate_threshold_chars": 6_400}
    assert params_for(GeminiCli, 32_000) == params_for(Mine, 32_000) == expected

"""claude_code (reported): the auto-compact trigger (checked against the bundled real transcripts),
the compaction call on the cached prefix, the restore, microcompact, the breaker and the reactive
compaction on a rejected request.

Read at: closed source, reported; the trigger checked on the bundled 2.1.39 and 2.0.76 transcripts.
The files read are named in the strategy's docstring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ctxsim.harness.model.conversation import Block, Message, Usage
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.claude_code import (
    CLEARED,
    CONTINUED,
    LEFT_IT_OFF,
    LEFT_OFF,
    RESUME_DIRECTLY,
    ClaudeCode,
    compaction_message,
    version_tuple,
)
from ctxsim.strategies.registry import make_config

from tests.helpers_traces import Builder
from tests.strategies.peer_env import FakeServices, fail, make, reject, step

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "real" / "claude-code"


def test_threshold_is_the_effective_window_minus_13k_and_2_0_reserved_45k():
    # max output 64,000: effective = 200,000 − min(64,000, 20,000) = 180,000; − 13,000
    assert make("claude_code", window=200_000).threshold() == 167_000
    assert make("claude_code", window=1_000_000).threshold() == 967_000
    assert make("claude_code", {"release": "2.0"}, window=200_000).threshold() == 155_000


def _before_compaction(path: Path) -> tuple[str, str, int, int]:
    """(version, model, count before the last request, preTokens) of the first auto-compaction."""
    seen: list[list] = []
    version = model = ""
    for line in path.open():
        r = json.loads(line)
        version = r.get("version", version)
        m = r.get("message")
        if r.get("type") == "assistant" and isinstance(m, dict) and m.get("usage") and not r.get("isSidechain"):
            u = m["usage"]
            total = u.get("input_tokens", 0) + u.get("cache_creation_input_tokens", 0) + u.get("cache_read_input_tokens", 0)
            key = m.get("id") or r.get("requestId")
            if not seen or seen[-1][0] != key:
                seen.append([key, total, u.get("output_tokens", 0)])
            model = m.get("model", model)
        if r.get("subtype") == "compact_boundary" and r["compactMetadata"]["trigger"] == "auto":
            _, total, out = seen[-2]
            return version, model, total + out, r["compactMetadata"]["preTokens"]
    raise AssertionError(f"{path}: no auto-compaction")


@pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")
@pytest.mark.parametrize("log,release,max_output", [
    ("spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl", "2.1", 128_000),  # Claude Code 2.1.39, Opus 4.6
    ("codemie/session-624a4a58.jsonl", "2.0", 64_000),  # Claude Code 2.0.76, Sonnet 4.5
])
def test_the_trigger_matches_the_real_transcripts(log, release, max_output):
    """Each compaction fired on the first check at or past the reported threshold: the count before
    the last request was under it, the preTokens recorded at the compaction at or over it."""
    version, model, before, pre = _before_compaction(REAL / log)
    assert version.startswith(release)
    s = make("claude_code", {"release": release}, window=200_000)
    s.env.max_output_tokens = max_output
    t = s.threshold()
    assert before < t <= pre, (version, model, before, t, pre)  # 2.1.39: 165,894 < 167,000 ≤ 167,094
    other = make("claude_code", {"release": "2.0" if release == "2.1" else "2.1"}, window=200_000)
    other.env.max_output_tokens = max_output
    assert not before < other.threshold() <= pre  # the other release's rule does not fit this log


def test_estimate_pads_new_messages_to_3_chars_per_token():
    s = make("claude_code", window=200_000)
    s.on_user(Message.user("task"))
    s.on_response(Message("assistant", (Block.tool_use("t0", "Bash", {"c": 1}),)), Usage(input_uncached=165_999, output=1))
    s.on_tool_results(Message("user", (Block.tool_result("t0", "x" * 2_997),)))
    assert s.estimate() == 166_999 and not s.should_compact(CallInfo(1, 1.0))  # 2,997 / 3 = 999
    s.on_tool_results(Message("user", (Block.text_block("abc"),)))
    assert s.estimate() == 167_000 and s.should_compact(CallInfo(1, 1.0))


def _read_step(s, i, path, text, usage=None):
    s.build_request(CallInfo(i, float(i)))
    s.on_response(Message("assistant", (Block.tool_use(f"t{i}", "Read", {"file_path": path}),)), usage)
    s.on_tool_results(Message("user", (Block.tool_result(f"t{i}", text),)))


def test_compaction_shares_the_prefix_and_reattaches_the_five_latest_files_and_the_todo_list(tmp_path):
    services = FakeServices("SUMMARY")
    s = make("claude_code", services=services, window=200_000, session_dir=tmp_path)
    s.on_user(Message.user("task"))
    for i in range(6):
        _read_step(s, i, f"/p/f{i}.py", f"body {i}")
    # a read inside a sub-agent is the sub-agent's context, not re-attached to the main one
    s.on_subtask_start("a1", "explore", isolated=True)
    _read_step(s, 6, "/p/sub.py", "sub body")
    s.on_subtask_end("a1", "done")
    s.build_request(CallInfo(7, 7.0))
    s.on_response(Message("assistant", (Block.tool_use("t7", "TodoWrite", {"todos": [{"content": "fix it"}]}),)), None)
    s.on_tool_results(Message("user", (Block.tool_result("t7", "ok"),)))
    _read_step(s, 8, "/p/f1.py", "x" * 20_001, usage=Usage(input_uncached=167_000))
    req = s.build_request(CallInfo(9, 9.0))
    assert req.rewrite and req.breakpoints[0].ttl == "1h"
    (sreq, spec), = services.calls
    # the summary call: the same system prompt, tools and markers as the main loop, the whole history
    assert sreq.system is s.env.system and sreq.tools is s.env.tools and len(sreq.breakpoints) == 2
    assert len(sreq.messages) == 1 + 2 * 8 and spec.kind == "summary" and "All user messages" in spec.instructions
    h = list(s.history)
    transcript = tmp_path / "home" / ".claude" / "projects" / "-project" / "session.jsonl"
    assert h[0].text == (CONTINUED + "SUMMARY\n\nIf you need specific details from before compaction (like exact "
                         "code snippets, error messages, or content you generated), read the full transcript at: "
                         f"{transcript}\n{RESUME_DIRECTLY}")
    # ctxsim.strategies.reattach, as the recorded replay: five files, most recent first (f1 read again: its
    # latest text, 20,001 characters, is over 5,000 × 4 = 20,000, so it comes back as a path
    # reference only, docs: context-window "What survives compaction"; f5 .. f2 as Read meta
    # messages; f0 is the sixth), then the todo list
    assert [m.meta["reattached"] for m in h[1:]] == ["file_reference"] + ["file"] * 4 + ["todo"]
    assert "Note: /p/f1.py was read before the last conversation was summarized" in h[1].text and "x" * 100 not in h[1].text
    assert [m.text.split('"file_path": "')[1].split('"')[0] for m in h[2:6]] == [f"/p/f{k}.py" for k in (5, 4, 3, 2)]
    assert '"fix it"' in h[6].text and s.counters.extra["restored_files"] == 4


def test_microcompact_clears_old_compactable_results_once_the_cache_is_cold():
    s = make("claude_code", window=200_000)  # env.now() is 0: the last answer is at t = 0
    s.on_user(Message.user("task"))
    for i in range(7):
        step(s, i, f"out {i}", tool="Read" if i % 2 else "Bash")
    step(s, 7, "sub-agent report", tool="Task")  # not a compactable tool
    assert not s.build_request(CallInfo(8, 3_600.0)).rewrite  # a gap of exactly the TTL: still warm
    req = s.build_request(CallInfo(8, 3_601.0))
    results = [b.text for m in s.history for b in m.blocks if b.type == "tool_result"]
    # 7 compactable results, the newest 5 kept: out 0 and out 1 cleared; Task's result untouched
    assert results == [CLEARED, CLEARED, "out 2", "out 3", "out 4", "out 5", "out 6", "sub-agent report"]
    assert req.rewrite and s.counters.extra["microcompacted_results"] == 2
    off = make("claude_code", {"microcompact": "off"}, window=200_000)
    off.on_user(Message.user("task"))
    for i in range(7):
        step(off, i, f"out {i}")
    assert not off.build_request(CallInfo(8, 9_999.0)).rewrite


def test_three_failed_compactions_stop_auto_compact():
    services = FakeServices(fail(), fail(), fail(), "never asked")
    s = make("claude_code", services=services, window=200_000)
    s.on_user(Message.user("task"))
    step(s, 0, "x", usage=Usage(input_uncached=170_000))
    for i in range(4):
        s.build_request(CallInfo(1 + i, 1.0 + i))
    assert len(services.calls) == 3 and s.counters.compactions_failed == 3 and s.counters.breaker_trips == 1


def test_a_rejected_request_is_compacted_reactively_once(tmp_path):
    services = FakeServices("S1", "S2")
    s = make("claude_code", services=services, window=200_000, session_dir=tmp_path)
    s.on_user(Message.user("task"))
    step(s, 0, "x" * 100)
    assert reject(s, call=1)  # under the threshold by its estimate, but the API said too long
    assert s.history[0].text.startswith(CONTINUED + "S1\n\n") and s.counters.extra["reactive_compactions"] == 1
    assert not reject(s, call=1, attempt=2)  # it still did not fit: the turn errors
    assert not reject(s, call=1, reasons=("pairing",))


def test_check_params_scale_to_the_kit_window():
    cfg = make_config(ClaudeCode, ClaudeCode.check_params(32_000))
    s = make("claude_code", cfg.model_dump(), window=32_000)
    # 32,000 − min(64,000, 3,200) − 2,080 = 26,720: the same 83.5% of the window as 167,000 of 200,000
    assert s.threshold() == 26_720


def test_replay_compacts_on_the_cached_prefix_without_a_rejected_request():
    b = Builder().user("port the module")
    for i in range(80):
        b.call(f"step {i}", [f"out {i} " + "data " * 1_200], tool="Read", inputs=[{"file_path": f"/m/{i % 7}.py"}])
    t = b.call("done").build()
    r = replay(t, "claude_code", ClaudeCode.check_params(60_000), RunConfig(window=60_000))
    m = r.metrics
    assert m["overflows"] == 0 and m["pairing_violations"] == 0 and m["compactions"]["succeeded"] >= 2
    s = r.calls[r.calls["kind"] == "summary"]
    assert (s["cache_read"] > 0.8 * s["context_tokens"]).all()  # the compaction call reads the cache


# --- the settings that move the trigger (issue 46) ----------------------------------------------------

def test_the_auto_compact_window_is_capped_at_the_models_window():
    """Docs, CLAUDE_CODE_AUTO_COMPACT_WINDOW: "Use a lower value like 500000 on a 1M model to treat the
    window as 500K for compaction purposes. The value is capped at the model's actual context window."
    The 2.1 rule on that window: 500,000 − min(64,000, 20,000) − 13,000."""
    assert make("claude_code", {"auto_compact_window": 500_000}, window=1_000_000).threshold() == 467_000
    assert make("claude_code", {"auto_compact_window": 1_000_000}, window=200_000).threshold() == 167_000
    # CHANGELOG 2.1.223 (CLAUDE_CODE_DISABLE_1M_CONTEXT holds 1M models to 200K via auto-compaction): the same
    assert make("claude_code", {"auto_compact_window": 200_000}, window=1_000_000).threshold() == 167_000


def test_the_percentage_override_can_only_lower_the_threshold():
    """Docs, CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: "Values above the default threshold have no effect"; the
    clamp as deobfuscated in anthropics/claude-code issue #31806:
    ``Math.min(Math.floor(effectiveWindow * (pct / 100)), effectiveWindow - 13000)``."""
    # effective 180,000 at 200k: 50% → 90,000; 95% → 171,000 > 167,000: the default stands
    assert make("claude_code", {"autocompact_pct_override": 50}, window=200_000).threshold() == 90_000
    assert make("claude_code", {"autocompact_pct_override": 95}, window=200_000).threshold() == 167_000
    # "applied as a percentage of this value" (the auto-compact window): 40% of (400,000 − 20,000)
    both = make("claude_code", {"auto_compact_window": 400_000, "autocompact_pct_override": 40}, window=1_000_000)
    assert both.threshold() == 152_000


def test_release_takes_a_claude_code_version():
    assert version_tuple("2.1.39") == (2, 1, 39) and version_tuple("2.1")[:2] == (2, 1)
    assert make("claude_code", {"release": "2.0.76"}, window=200_000).threshold() == 155_000  # window − 45k
    assert make("claude_code", {"release": "1.0.89"}, window=200_000).threshold() == 155_000  # assumed: as 2.0
    assert make("claude_code", {"release": "2.1.39"}, window=200_000).threshold() == 167_000
    for bad in ("2", "v2.1", "2.1.x", "latest"):
        with pytest.raises(ValueError):
            make_config(ClaudeCode, {"release": bad})


# --- the post-compaction message of each release (issue 43 item 2) ------------------------------------

HEAD_OLD = ("This session is being continued from a previous conversation that ran out of context. "
            "The conversation is summarized below:\n")
POINTER = ("\n\nIf you need specific details from before compaction (like exact code snippets, error messages, "
           "or content you generated), read the full transcript at: /t.jsonl")


@pytest.mark.parametrize("version,expected", [
    # observed in 8 sessions of Claude Code 1.0.89 and 4 of 2.0.76 (auto), development population; bundled codemie 2.0.76
    ("1.0.89", HEAD_OLD + "S\n" + LEFT_IT_OFF),
    ("2.0.76", HEAD_OLD + "S\n" + LEFT_IT_OFF),
    # the path back from 2.1: observed in 2 sessions of Claude Code 2.1.2 (under the older head)
    ("2.1.2", HEAD_OLD + "S" + POINTER + "\n" + LEFT_IT_OFF),
    # the new head from 2.1.7 (2 sessions of 2.1.7); "left it off" in 2 auto sessions of 2.1.19
    ("2.1.19", CONTINUED + "S" + POINTER + "\n" + LEFT_IT_OFF),
    # "left off": the bundled spotter 2.1.39 log, and 2 auto sessions of 2.1.62
    ("2.1.39", CONTINUED + "S" + POINTER + "\n" + LEFT_OFF),
    ("2.1.62", CONTINUED + "S" + POINTER + "\n" + LEFT_OFF),
    # "Resume directly": CHANGELOG 2.1.69; observed in 9 auto sessions of 2.1.72
    ("2.1.69", CONTINUED + "S" + POINTER + "\n" + RESUME_DIRECTLY),
    ("2.1.72", CONTINUED + "S" + POINTER + "\n" + RESUME_DIRECTLY),
    ("2.1", CONTINUED + "S" + POINTER + "\n" + RESUME_DIRECTLY),
])
def test_the_post_compaction_message_is_that_of_the_release(version, expected):
    assert compaction_message(version_tuple(version), "S", "/t.jsonl") == expected


def _real_message(path: Path) -> tuple[str, str]:
    for line in path.open(encoding="utf-8"):
        r = json.loads(line)
        if r.get("isCompactSummary"):
            c = r["message"]["content"]
            return r["version"], c if isinstance(c, str) else "\n".join(b.get("text", "") for b in c)
    raise AssertionError(f"{path}: no compaction summary")


@pytest.mark.skipif(not REAL.is_dir(), reason="real logs not present (../shared/traces/real)")
@pytest.mark.parametrize("log", ["spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl",  # 2.1.39, auto
                                 "codemie/session-624a4a58.jsonl"])  # 2.0.76, auto
def test_the_message_wraps_the_summary_as_the_bundled_logs_do(log):
    """The real message with its summary put back in our template gives the real message whole."""
    version, text = _real_message(REAL / log)
    v = version_tuple(version)
    head = compaction_message(v, "", None, auto=False)
    assert text.startswith(head)
    path = None
    if "read the full transcript at: " in text:
        path = text.split("read the full transcript at: ")[1].split("\n")[0]
    tail = compaction_message(v, "", path)[len(head):]
    assert text.endswith(tail)
    summary = text[len(head): len(text) - len(tail)]
    assert compaction_message(v, summary, path) == text


def test_the_transcript_named_is_a_real_file_holding_what_was_summarised(tmp_path):
    services = FakeServices("S1")
    s = make("claude_code", services=services, window=200_000, session_dir=tmp_path)
    s.on_session_start("abc-123", False, 0.0)
    s.on_user(Message.user("task: keep the port at 8433"))
    step(s, 0, "x" * 100)
    assert reject(s, call=1)
    path = Path(s.history[0].text.split("read the full transcript at: ")[1].split("\n")[0])
    assert path == tmp_path / "home" / ".claude" / "projects" / "-project" / "abc-123.jsonl" and path.is_file()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["type"] for r in records] == ["user", "assistant", "user"]
    assert "keep the port at 8433" in path.read_text()
    # before 2.1 there is no path back, and nothing is written
    old = make("claude_code", {"release": "2.0.76"}, services=FakeServices("S"), window=200_000,
               session_dir=tmp_path / "old")
    old.on_user(Message.user("task"))
    step(old, 0, "x")
    assert reject(old, call=1) and "transcript" not in old.history[0].text and not (tmp_path / "old").exists()


def test_a_replay_names_the_transcript_in_every_summary():
    """On a replay every summary names the session's transcript under the run directory (issue 43: without
    it claude_code could never earn the pointer credit NovaCode's transcript earns)."""
    b = Builder().user("port the module")
    for i in range(80):
        b.call(f"step {i}", [f"out {i} " + "data " * 1_200], tool="Read", inputs=[{"file_path": f"/m/{i % 7}.py"}])
    t = b.call("done").build()
    seen = []

    def observer(request, info):
        seen.extend(m.text for m in request.messages if m.meta.get("origin") == "summary")

    r = replay(t, "claude_code", ClaudeCode.check_params(60_000), RunConfig(window=60_000, observer=observer))
    assert r.metrics["compactions"]["succeeded"] >= 2
    assert seen and all("read the full transcript at: /" in x and x.endswith(RESUME_DIRECTLY) for x in seen)
    assert r.metrics["strategy_counters"]["transcript_writes"] >= 2


# --- a resumed launch ------------------------------------------------------------------------------

def test_a_resumed_launch_sends_the_conversation_anew():
    """claude --continue on the same transcript: the first call of the resumed launch reads only what
    the tools and system prompt hold (the previous call's system-prefix read, its conversation lost:
    anthropics/claude-code#43657), then the whole context again; the history is kept (a resume, not a
    new launch). resume_resends_messages=False: a full read."""
    from ctxsim.harness.model import trace as tr

    big = "x " * 3000
    evs = [tr.SessionStart(t=0, session="s"), tr.UserEvent(t=0, text=big),
           tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")]), tr.SessionEnd(t=2, session="s"),
           tr.SessionStart(t=30, session="s", resume=True), tr.UserEvent(t=31, text="go on"),
           tr.AssistantEvent(t=32, content=[tr.TextContent(text="b")]),
           tr.UserEvent(t=33, text="thanks"), tr.AssistantEvent(t=34, content=[tr.TextContent(text="c")])]
    t = tr.validate_events(tr.Header(name="t", model="claude-opus-4-6", prefix_tokens=5000), evs)

    def run(params):
        return replay(t, "claude_code", {"startup_files": False, **params}, RunConfig()).calls

    c = run({})
    assert c.loc[1, "cache_read"] == 5008   # the tools and system prompt (5,000 + 8 framing tokens)
    assert c.loc[1, "context_tokens"] > c.loc[0, "context_tokens"] and c.loc[2, "cache_read"] == c.loc[1, "context_tokens"]
    off = run({"resume_resends_messages": False})
    assert off.loc[1, "cache_read"] == off.loc[0, "context_tokens"]

"""The live backend on the real SDK against the loopback Messages API (no network)."""

from __future__ import annotations

import pytest
from ctxsim.harness.llm.live import (
    DEFAULT_INSTRUCTIONS,
    AnthropicBackend,
    LiveError,
    ReplayBackend,
    cloze,
    failure_reason,
    final_user_text,
    key_tokens,
    make_backend,
    usage_from_api,
)
from ctxsim.harness.llm.render import to_anthropic_params
from ctxsim.harness.llm.response_store import ResponseStore, StoreMiss
from ctxsim.harness.llm.services import SUMMARY, CallSpec, SideCallFailed
from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolDef,
    ToolSet,
    Usage,
)
from loopback import Reply

SYSTEM_400 = SystemPrompt.of("S" * 400)
USER_40 = "u" * 40


SYSTEM_BP = (Breakpoint("system"),)


def request(bps=SYSTEM_BP, system=SYSTEM_400, text=USER_40) -> Request:
    return Request(system, ToolSet(), History([Message.user(text)]), tuple(bps), model="claude-sonnet-4-6")


SPEC = CallSpec(kind=SUMMARY, instructions="Summarise.", max_output_tokens=500)


def test_sent_exactly_what_render_made_and_usage_normalised(live_env):
    """The SDK sends our params unchanged (so they are what its typed parameters accept), and the
    usage comes back normalised. Loopback arithmetic (ceil(chars/4)): system 400 chars = 100 tokens
    up to the system breakpoint; user 40 + instruction 10 chars; whole input ceil(450/4) = 113.
    Call 1 writes the 100-token prefix (5 m), call 2 reads it; uncached 113 - 100 = 13 both times."""
    server = live_env
    server.script("messages", Reply.message("first", output_tokens=7), Reply.message("second", output_tokens=9))
    b = AnthropicBackend()
    r1 = b.respond(request(), SPEC)
    r2 = b.respond(request(), SPEC)
    assert r1.text == "first" and r1.usage == Usage(input_uncached=13, cache_write_5m=100, cache_read=0, output=7)
    assert r2.text == "second" and r2.usage == Usage(input_uncached=13, cache_write_5m=0, cache_read=100, output=9)
    sent = server.received[0]
    auth = sent["headers"].get("x-api-key") or sent["headers"].get("authorization", "")
    assert sent["path"] == "/v1/messages" and auth.endswith("sk-ant-test-dummy")
    assert sent["body"] == to_anthropic_params(request(), "claude-sonnet-4-6", 500, "Summarise.")


def test_one_hour_breakpoint_write_is_reported_as_1h(live_env):
    b = AnthropicBackend()
    r = b.respond(request(bps=(Breakpoint("system", "1h"),)), SPEC)
    assert r.usage.cache_write_1h == 100 and r.usage.cache_write_5m == 0


def test_429_then_success_is_retried_by_the_sdk(live_env):
    """429 with retry-after 10 ms, then 200: one answer, two requests, the second a retry."""
    server = live_env
    server.script("messages", Reply.error(429, "Number of request tokens has exceeded your rate limit", 0.01),
                  Reply.message("after retry"))
    reply = AnthropicBackend().respond(request(), SPEC)
    assert reply.text == "after retry"
    assert len(server.received) == 2
    assert [r["headers"].get("x-stainless-retry-count") for r in server.received] == ["0", "1"]


def test_429_still_failing_after_retries_is_rate_limited(live_env):
    """max_retries 2 (CTXSIM_LIVE_MAX_RETRIES): 3 attempts, then SideCallFailed('rate_limited')."""
    server = live_env
    server.script("messages", *[Reply.error(429, "rate limited", 0.001)] * 3)
    with pytest.raises(SideCallFailed) as e:   # (max_failures 3: the failure itself, not the breaker's stop)
        AnthropicBackend(max_failures=3).respond(request(), SPEC)
    assert e.value.reason == "rate_limited" and len(server.received) == 3


def test_529_overloaded_after_retries(live_env):
    server = live_env
    server.script("messages", *[Reply.error(529, "Overloaded", 0.001)] * 3)
    with pytest.raises(SideCallFailed) as e:
        AnthropicBackend(max_failures=3).respond(request(), SPEC)
    assert e.value.reason == "overloaded" and len(server.received) == 3


def test_400_prompt_too_long_is_not_retried_and_is_prompt_too_long(live_env):
    """Window 600 tokens; input 113 + max_tokens 500 = 613 > 600: the API's 400."""
    server = live_env
    server.window = 600
    with pytest.raises(SideCallFailed) as e:
        AnthropicBackend().respond(request(), SPEC)
    assert e.value.reason == "prompt_too_long" and "prompt is too long: 113 tokens > 100 maximum" in e.value.detail
    assert len(server.received) == 1


def test_five_breakpoints_and_unpaired_tool_use_map_to_their_reasons(live_env):
    tools = ToolSet((ToolDef("Read"),))
    h = History([Message.user("a"), Message("assistant", (Block.text_block("b"),)), Message.user("c"),
                 Message("assistant", (Block.text_block("d"),)), Message.user("e")])
    r = Request(SYSTEM_400, tools, h, (Breakpoint("tools"), Breakpoint("system"), Breakpoint(0), Breakpoint(2),
                                       Breakpoint(4)))
    with pytest.raises(SideCallFailed) as e:
        AnthropicBackend().respond(r, SPEC)
    assert e.value.reason == "too_many_breakpoints"
    h = History([Message.user("a"), Message("assistant", (Block.tool_use("tu_1", "Read", {}),)), Message.user("x")])
    with pytest.raises(SideCallFailed) as e:
        AnthropicBackend().respond(Request(SYSTEM_400, tools, h), SPEC)
    assert e.value.reason == "pairing"


def test_bad_key_stops_the_run_instead_of_failing_a_compaction(live_env):
    live_env.script("messages", Reply.error(401, "invalid x-api-key"))
    with pytest.raises(LiveError, match="401"):
        AnthropicBackend().respond(request(), SPEC)


def test_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(LiveError, match="ANTHROPIC_API_KEY"):
        AnthropicBackend()


def test_failure_reason_table():
    assert failure_reason(400, "prompt is too long: 210000 tokens > 200000 maximum") == "prompt_too_long"
    assert failure_reason(413, "request too large") == "prompt_too_long"
    assert failure_reason(400, "A maximum of 4 blocks with cache_control may be provided. Found 5.") == "too_many_breakpoints"
    assert failure_reason(400, "messages.3: `tool_use` ids were found without `tool_result` blocks") == "pairing"
    assert failure_reason(429, "") == "rate_limited"
    assert failure_reason(529, "Overloaded") == "overloaded"
    assert failure_reason(500, "Internal server error") == "api_error"


def test_count_tokens_and_token_scale(live_env):
    """count_tokens sends no instruction: ceil((400 + 40) / 4) = 110 tokens. A local counter that
    says 55 for the same request gives a scale of 110 / 55 = 2.0."""
    b = AnthropicBackend()
    assert b.count_tokens(request()) == 110
    assert live_env.received[-1]["path"] == "/v1/messages/count_tokens"
    assert b.token_scale([request(), request()], lambda r: 55) == pytest.approx(2.0)


def test_model_from_environment_then_request(live_env, monkeypatch):
    b = AnthropicBackend()
    b.respond(request(), SPEC)
    assert live_env.received[-1]["body"]["model"] == "claude-sonnet-4-6"  # the request's model
    monkeypatch.setenv("CTXSIM_LIVE_MODEL", "claude-haiku-4-5")
    AnthropicBackend().respond(request(), SPEC)
    assert live_env.received[-1]["body"]["model"] == "claude-haiku-4-5"
    AnthropicBackend(model="claude-opus-4-6").respond(request(), SPEC)
    assert live_env.received[-1]["body"]["model"] == "claude-opus-4-6"


def test_prompts_strategy_own_default_and_sections_not_duplicated():
    """The engine appends a strategy's prompt itself; the backend then adds only missing sections."""
    h = History([Message.user("x"), Message.user("Summarise.", origin="instruction")])
    r = Request(SYSTEM_400, ToolSet(), h)
    assert final_user_text(r, SPEC) is None
    spec = CallSpec(instructions="Summarise.", sections=("Goal", "Next step"))
    assert final_user_text(r, spec).endswith("1. Goal\n2. Next step")
    spec = CallSpec(instructions="Summarise under Goal and Next step.", sections=("Goal", "Next step"))
    assert final_user_text(request(), spec) == "Summarise under Goal and Next step."
    assert final_user_text(request(), CallSpec(kind="memory_select", params={"max_memories": 3})) == \
        DEFAULT_INSTRUCTIONS["memory_select"].replace("{max_memories}", "3")


def test_judge_is_a_cloze_the_model_must_fill(live_env):
    """'Does this context let the model state fact X?': the most specific token is blanked."""
    prompt, answer = cloze("The staging API listens on port 8443 behind nginx")
    assert answer == "8443" and "port ____ behind" in prompt
    assert key_tokens("Use snake_case for module names") == ["snake_case"]
    live_env.script("messages", Reply.message("8443"), Reply.message("UNKNOWN"))
    b = AnthropicBackend()
    v = b.judge(request(), "The staging API listens on port 8443 behind nginx")
    assert v.known and v.expected == "8443"
    assert "port ____ behind nginx" in live_env.received[-1]["body"]["messages"][-1]["content"][-1]["text"]
    assert live_env.received[-1]["body"]["max_tokens"] == 200
    assert not b.judge(request(), "The staging API listens on port 8443 behind nginx").known


def test_usage_without_ttl_split_uses_the_breakpoints_ttl():
    u = {"input_tokens": 5, "cache_creation_input_tokens": 40, "cache_read_input_tokens": 3, "output_tokens": 2}
    assert usage_from_api(u, "1h") == Usage(5, 0, 40, 3, 2)
    assert usage_from_api(u) == Usage(5, 40, 0, 3, 2)


def test_record_then_replay_with_no_server(live_env, tmp_path):
    """Every live answer and failure is recorded; replay serves them in order with the server gone."""
    server = live_env
    store = tmp_path / "store.jsonl"
    server.script("messages", Reply.message("one", output_tokens=4), *[Reply.error(529, "Overloaded", 0.001)] * 3)
    live = make_backend("live", store, max_failures=3)   # the failure is recorded, not the run stopped
    first = live.respond(request(), SPEC)
    with pytest.raises(SideCallFailed):
        live.respond(request(text="v" * 40), SPEC)
    n_tokens = live.count_tokens(request())
    server.close()

    replay = make_backend("replay", store)
    assert replay.respond(request(), SPEC) == first
    with pytest.raises(SideCallFailed) as e:
        replay.respond(request(text="v" * 40), SPEC)
    assert e.value.reason == "overloaded"
    assert replay.count_tokens(request()) == n_tokens == 110
    with pytest.raises(StoreMiss, match="kind 'summary'"):
        replay.respond(request(text="w" * 40), SPEC)
    assert len(ResponseStore(store)) == 3


def test_make_backend_modes(tmp_path, monkeypatch):
    assert make_backend("simulated") is None  # the engine builds its own simulated backend
    with pytest.raises(ValueError, match="needs --llm-store"):
        make_backend("replay")
    with pytest.raises(LiveError, match="does not exist"):
        make_backend("replay", tmp_path / "none.jsonl")
    with pytest.raises(ValueError, match="valid: simulated, live, replay"):
        make_backend("psychic")
    (tmp_path / "s.jsonl").write_text("")
    assert isinstance(make_backend("replay", tmp_path / "s.jsonl"), ReplayBackend)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    assert isinstance(make_backend("live"), AnthropicBackend)

"""Prices, usage normalisation (N-CACHE-4, N-CACHE-5), latency, token counting."""

from dataclasses import replace

import pytest
from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolSet,
    Usage,
)
from ctxsim.harness.provider import Provider
from ctxsim.harness.provider.latency import duration_s, ttft_s
from ctxsim.harness.provider.models import load_table
from ctxsim.harness.provider.tokenizer import REQUEST_OVERHEAD, Tokenizer
from ctxsim.harness.provider.usage import from_anthropic, from_gemini, from_openai, normalise


def test_five_minute_vs_one_hour_write_priced_125_vs_2x():
    p = Provider("claude-sonnet-4-6")
    base = p.price(Usage(input_uncached=10_000))
    assert base == pytest.approx(0.03)  # 10k x $3/M
    assert p.price(Usage(cache_write_5m=10_000)) == pytest.approx(1.25 * base)
    assert p.price(Usage(cache_write_1h=10_000)) == pytest.approx(2.0 * base)


def test_n_cache_4_reads_cost_a_tenth():
    p = Provider("claude-opus-4-6")
    assert p.price(Usage(cache_read=1_000_000)) == pytest.approx(0.1 * p.price(Usage(input_uncached=1_000_000)))


def test_sonnet_45_long_context_rule_bills_whole_request():
    p = Provider("claude-sonnet-4-5", window=1_000_000)
    small = Usage(input_uncached=200_000, output=1000)
    big = Usage(input_uncached=200_001, output=1000)
    assert p.price(small) == pytest.approx(200_000 * 3e-6 + 1000 * 15e-6)
    assert p.price(big) == pytest.approx(200_001 * 6e-6 + 1000 * 22.5e-6)
    # the 4.6 generation keeps standard rates across 1M
    assert Provider("claude-sonnet-4-6").price(big) == pytest.approx(200_001 * 3e-6 + 1000 * 15e-6)


def test_n_cache_5_normalise_real_anthropic_usage():
    # a real Claude Code 2.1.39 usage object (spotter log): creation split into 5m/1h
    raw = {"input_tokens": 3, "cache_creation_input_tokens": 8037, "cache_read_input_tokens": 17842,
           "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 8037}, "output_tokens": 10}
    u = from_anthropic(raw)
    assert u == Usage(3, 0, 8037, 17842, 10)
    assert u.input_total == 3 + 8037 + 17842


def test_n_cache_5_normalise_openai_cached_is_inside_prompt_tokens():
    chat = {"prompt_tokens": 20_000, "completion_tokens": 500, "prompt_tokens_details": {"cached_tokens": 18_944}}
    assert from_openai(chat) == Usage(1056, 0, 0, 18_944, 500)
    # Codex CLI token_count (Responses API names), real shape from the codex rollout
    codex = {"input_tokens": 18703, "cached_input_tokens": 0, "output_tokens": 167}
    assert from_openai(codex) == Usage(18703, 0, 0, 0, 167)
    assert normalise("openai", {"input_tokens": 5000, "cached_input_tokens": 4096, "output_tokens": 9}).input_total == 5000


def test_n_cache_5_normalise_gemini():
    g = {"promptTokenCount": 12_000, "cachedContentTokenCount": 8_000, "candidatesTokenCount": 300, "thoughtsTokenCount": 50}
    assert from_gemini(g) == Usage(4000, 0, 0, 8000, 350)


def test_latency_fitted_to_caching_launch_figures():
    spec = load_table().get("claude-sonnet-4-6")
    assert ttft_s(spec, Usage(input_uncached=100_000)) == pytest.approx(11.5, abs=0.05)
    assert ttft_s(spec, Usage(input_uncached=10_000)) == pytest.approx(1.6, abs=0.05)
    assert ttft_s(spec, Usage(cache_read=100_000)) == pytest.approx(2.4, abs=0.1)
    assert duration_s(spec, Usage(output=630)) - ttft_s(spec, Usage(output=630)) == pytest.approx(10.0)


def test_tokens_are_real_bpe_counts():
    t = Tokenizer()
    assert t.count("hello world") == 2
    assert t.count("def foo(x):\n    return x + 1\n") == 11


def test_loading_the_tokenizer_writes_no_file(tmp_path, monkeypatch):
    """tiktoken copied the bundled cl100k file into <temp dir>/data-gym-cache at the first count of
    each install (1.6 MB outside any run: the kit's run_dir check blamed it on the strategy under
    test). Loaded afresh with the temp dir at ``tmp_path``, nothing is written there, the count is the
    same (``hello world``: 2 tokens) and a user's TIKTOKEN_CACHE_DIR is left as it was."""
    import os
    import tempfile

    import tiktoken.registry
    from ctxsim.harness.provider.tokenizer import _cl100k

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    assert _cl100k()("hello world") == 2
    assert list(tmp_path.iterdir()) == [] and "TIKTOKEN_CACHE_DIR" not in os.environ
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    assert _cl100k()("hello world") == 2
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tmp_path / "mine")


def test_token_scale_multiplies_text_not_opaque_prefix():
    msgs = History([Message.user("hello world " * 100)])
    r = Request(SystemPrompt.of("", opaque_tokens=5000), ToolSet(), msgs)
    one, two = Provider(token_scale=1.0), Provider(token_scale=2.0)
    fixed = 5000 + REQUEST_OVERHEAD  # recorded-model tokens and the request framing are not scaled
    a, b = one.request_tokens(r), two.request_tokens(r)
    assert b - fixed == pytest.approx(2 * (a - fixed), abs=1)


def test_bill_reports_cache_split_as_the_api_does():
    p = Provider("claude-sonnet-4-5")  # minimum cacheable 1,024
    msgs = History([Message.user("word " * 3000)])
    r = Request(SystemPrompt.of("sys"), ToolSet(), msgs, (Breakpoint(0),))
    first = p.bill(r, now=0, output_tokens=100)
    second = p.bill(r, now=10, output_tokens=100)
    assert first.usage.cache_read == 0 and first.usage.cache_write_5m == first.context_tokens
    assert second.usage.cache_read == first.context_tokens and second.usage.cache_write == 0
    off = Provider("claude-sonnet-4-5", cache=False)
    off.bill(r, 0, 100)
    assert off.bill(r, 10, 100).usage.cache_read == 0


def test_unknown_model_lists_known_ones():
    with pytest.raises(KeyError, match="claude-sonnet-4-6"):
        load_table().get("no-such-model")


def test_dated_model_ids_resolve():
    assert load_table().get("claude-sonnet-4-5-20250929").name == "claude-sonnet-4-5"


def test_block_token_count_is_cached_on_the_block():
    t = Tokenizer()
    b = Block.text_block("some text " * 50)
    t.block(b)
    t.block(b)
    assert t.encode_calls == 1


def test_token_scale_per_model_for_mixed_logs():
    msgs = History([Message.user("hello world " * 100)])
    main = Request(SystemPrompt(), ToolSet(), msgs)
    side = Request(SystemPrompt(), ToolSet(), msgs, model="claude-haiku-4-5")
    p = Provider("claude-opus-4-6", token_scale={"claude-opus-4-6": 1.0, "claude-haiku-4-5": 2.0})
    a, b = p.request_tokens(main) - REQUEST_OVERHEAD, p.request_tokens(side) - REQUEST_OVERHEAD
    assert b == pytest.approx(2 * a, abs=1)
    assert Provider("claude-opus-4-6").scale_for(None) == 1.5  # the table's calibrated default


def test_each_route_of_a_mixed_log_reads_only_its_own_cache():
    """A log whose calls went by Vertex and by Anthropic's API: one cache each. Calls of the same
    conversation, each one message longer (sizes s0 < s1 < s2 < s3 as the provider counts them):
    Anthropic at 0 s writes s0; Vertex at 10 s finds nothing of it (writes s1 whole); Anthropic at
    20 s reads s0, its own, and writes s2 − s0; Vertex at 30 s reads s1 and writes s3 − s1. One
    route for all (None) would have read each previous call whole."""
    p = Provider("claude-opus-4-6", token_scale=1.0)
    msgs = [Message.user("word " * 6_000)]
    for i in range(3):
        msgs += [Message("assistant", (Block.text_block("ok " * 10),)), Message.user(f"more {i} " * 300)]
    reqs = [Request(SystemPrompt(), ToolSet(), History(msgs[:2 * k + 1]), (Breakpoint(2 * k),))
            for k in range(4)]
    s = [p.request_tokens(r) for r in reqs]
    got = [p.bill(replace(r, route=route), 10.0 * k, 10).usage
           for k, (r, route) in enumerate(zip(reqs, ("anthropic", "vertex", "anthropic", "vertex")))]
    assert [(u.cache_read, u.cache_write_5m) for u in got] == [(0, s[0]), (0, s[1]), (s[0], s[2] - s[0]),
                                                               (s[1], s[3] - s[1])]
    one = Provider("claude-opus-4-6", token_scale=1.0)
    got = [one.bill(r, 10.0 * k, 10).usage for k, r in enumerate(reqs)]
    assert [u.cache_read for u in got] == [0, s[0], s[1], s[2]]


def test_nul_characters_count_as_nothing():
    """A tool result padded with NULs (a log file): cl100k makes a token of each NUL, Anthropic's API
    counts them as nothing (tokenizer.NUL: the logs' steps grew by the other text alone). 1,000 NULs
    between two words count as the two words."""
    t = Tokenizer()
    assert t.count("GET / 200" + "\x00" * 1_000 + " compiled") == t.count("GET / 200 compiled")
    assert t.count("\x00" * 50) == 0


def test_a_claude_model_reads_a_tool_call_with_its_string_parameters_as_they_are():
    """Claude's function-call format (tokenizer.TOOL_FORMAT): string and scalar parameters as they are,
    lists and objects as JSON, each in a <parameter> tag of an <invoke>. A Write of a two-line file is
    counted on that text by a Claude model's provider (its newline and quotes unescaped), and on the
    canonical JSON by an OpenAI model's; each text is encoded once for both."""
    from ctxsim.harness.provider.tokenizer import claude_call, for_provider, get_tokenizer

    b = Block.tool_use("t1", "Write", {"file_path": "/a.py", "content": 'def f():\n    return "x"\n', "lines": [1, 2]})
    text = ('<invoke name="Write"><parameter name="content">def f():\n    return "x"\n</parameter>'
            '<parameter name="file_path">/a.py</parameter><parameter name="lines">[1, 2]</parameter></invoke>')
    assert claude_call(b) == text
    plain = get_tokenizer()
    assert Provider("claude-opus-4-6").tok.block(b) == plain.count(text) + 8          # BLOCK_OVERHEAD["tool_use"]
    assert Provider("gpt-5.2").tok.block(b) == plain.count(b.payload) + 8
    before = plain.encode_calls
    assert for_provider("anthropic").count(text) == plain.count(text) and plain.encode_calls == before



def test_a_claude_model_reads_each_tool_result_with_its_measured_framing():
    """tokenizer.XML_RESULT_FRAMING: a step that adds one tool result grew the development population's
    Claude contexts by ~30 recorded tokens more than its content, whatever its size (25 cl100k tokens
    at Claude's scales). A Claude model's provider counts a result's text + 6 (BLOCK_OVERHEAD) + 25; an
    OpenAI model's + 6; the result's text is encoded once for both."""
    from ctxsim.harness.provider.tokenizer import XML_RESULT_FRAMING, get_tokenizer

    b = Block.tool_result("t1", "3 passed, 1 failed in 0.42s")
    plain = get_tokenizer()
    text = plain.count("3 passed, 1 failed in 0.42s")
    before = plain.encode_calls
    assert XML_RESULT_FRAMING == 25
    assert Provider("claude-opus-4-6").tok.block(b) == text + 6 + 25
    assert Provider("gpt-5.2").tok.block(b) == text + 6
    assert plain.encode_calls == before

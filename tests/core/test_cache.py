"""The provider's cache models, with expectations worked out by hand from the API docs."""

from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolSet,
)
from ctxsim.harness.provider.cache import AnthropicCache, Layout, OpenAICache, openai_steps

TOK = 100  # every message is one block of 100 tokens in these tests


def req(n: int, *bps, ttl="5m", start: int = 0) -> Request:
    msgs = [Message("user" if i % 2 == 0 else "assistant", (Block.text_block(f"m{i}"),)) for i in range(start, start + n)]
    return Request(SystemPrompt(), ToolSet(), History(msgs), tuple(Breakpoint(b, ttl) for b in bps))


def lay(r: Request) -> Layout:
    return Layout(r, 0, 0, lambda i: TOK * (i + 1))


def test_lookback_write_25_blocks_back_is_not_found_second_breakpoint_finds_it():
    """The lookback (LOOKBACK_BLOCKS = 24, measured on the development population; Anthropic's docs say 20 as the
    API counts blocks): a write at block 14, a breakpoint at block 39 checks its own block and the 24 before it,
    39..15, and misses it; a second breakpoint at block 20 checks 20..1 and finds it."""
    from ctxsim.harness.provider.cache import LOOKBACK_BLOCKS

    assert LOOKBACK_BLOCKS == 24
    c = AnthropicCache(min_cacheable=1024)
    first = c.process(lay(req(14, 13)), now=0)
    assert (first.read, first.write_5m) == (0, 1400)  # 14 blocks x 100 tokens written
    miss = c.process(lay(req(39, 38)), now=10)
    assert miss.read == 0 and miss.write_5m == 3900
    c = AnthropicCache(min_cacheable=1024)
    c.process(lay(req(14, 13)), now=0)
    hit = c.process(lay(req(39, 38, 19)), now=10)
    assert hit.read == 1400  # the prefix of 14 blocks
    assert hit.write_5m == 3900 - 1400  # written from block 15 to 39 (both breakpoints)


def test_lookback_24_blocks_back_is_found():
    """The edge the logs show: a request that added up to 23 or 24 blocks (as ctxsim counts them) read the previous
    call's whole context; 25 and more fell back."""
    c = AnthropicCache(min_cacheable=1024)
    c.process(lay(req(15, 14)), now=0)  # write at block 15
    hit = c.process(lay(req(39, 38)), now=1)  # checks 39..15
    assert hit.read == 1500 and hit.write_5m == 2400
    c = AnthropicCache(min_cacheable=1024, lookback=20)   # the docs' count, a parameter
    c.process(lay(req(15, 14)), now=0)
    assert c.process(lay(req(39, 38)), now=1).read == 0


def test_ttl_expiry_and_refresh_on_hit():
    c = AnthropicCache(min_cacheable=1024)
    r = req(12, 11)
    assert c.process(lay(r), now=0).write_5m == 1200
    assert c.process(lay(r), now=299).read == 1200  # 299 s < 300 s: hit, TTL refreshed to 599
    assert c.process(lay(r), now=598).read == 1200  # alive only thanks to the refresh
    late = c.process(lay(r), now=598 + 301)  # idle 301 s: expired
    assert late.read == 0 and late.write_5m == 1200 and late.miss_reason == "ttl"


def test_a_log_clocks_grace_reads_past_the_ttl_by_its_measured_seconds():
    """On a recorded log's clock (the client's record of each answer) an entry is still read 12 s past
    its TTL (LOG_CLOCK_GRACE_S, measured on the development population): written at 0, read at 311 s,
    refreshed there; then idle 313 s: expired. A synthetic clock has no grace (301 s: expired)."""
    from ctxsim.harness.provider.cache import LOG_CLOCK_GRACE_S

    assert LOG_CLOCK_GRACE_S == 12.0
    c = AnthropicCache(min_cacheable=1024, grace_s=LOG_CLOCK_GRACE_S)
    r = req(12, 11)
    c.process(lay(r), now=0)
    assert c.process(lay(r), now=311).read == 1200
    late = c.process(lay(r), now=311 + 313)
    assert late.read == 0 and late.miss_reason == "ttl"


def test_one_hour_ttl_outlives_five_minutes():
    c = AnthropicCache(min_cacheable=1024)
    r = req(12, 11, ttl="1h")
    assert c.process(lay(r), now=0).write_1h == 1200
    assert c.process(lay(r), now=3000).read == 1200
    assert c.process(lay(r), now=3000 + 3601).read == 0


def test_minimum_cacheable_length_no_write_both_counters_zero():
    c = AnthropicCache(min_cacheable=1024)
    small = req(10, 9)  # 1,000 tokens < 1,024
    o = c.process(lay(small), now=0)
    assert (o.read, o.write_5m, o.write_1h) == (0, 0, 0)
    assert c.process(lay(small), now=1).read == 0


def test_breakpoint_below_minimum_is_folded_into_the_next_write():
    c = AnthropicCache(min_cacheable=1024)
    o = c.process(lay(req(20, 4, 19)), now=0)  # block 5 = 500 tokens: not written on its own
    assert o.write_5m == 2000 and len(c.entries) == 1


def test_prefix_change_invalidates_everything_after_it():
    c = AnthropicCache(min_cacheable=1024)
    c.process(lay(req(15, 14)), now=0)
    changed = req(15, 14, start=1)  # different first message: every prefix digest changes
    o = c.process(lay(changed), now=1)
    assert o.read == 0 and o.write_5m == 1500


def test_tools_then_system_then_messages_order():
    tools = ToolSet(())
    sys_a, sys_b = SystemPrompt.of("A" * 10), SystemPrompt.of("B" * 10)
    msgs = History([Message.user(f"u{i}") for i in range(12)])
    c = AnthropicCache(min_cacheable=1024)
    ra = Request(sys_a, tools, msgs, (Breakpoint(11),))
    rb = Request(sys_b, tools, msgs, (Breakpoint(11),))
    c.process(Layout(ra, 0, 50, lambda i: TOK * (i + 1)), now=0)
    o = c.process(Layout(rb, 0, 50, lambda i: TOK * (i + 1)), now=1)  # system edited: all messages re-written
    assert o.read == 0 and o.write_5m == 50 + 1200


def test_openai_128_token_steps():
    assert openai_steps(1000) == 0
    assert openai_steps(1024) == 1024
    assert openai_steps(1500) == 1024 + 3 * 128  # 476 tokens past the minimum -> 3 full steps
    c = OpenAICache(ttl_s=300)
    c.process(lay(req(15)), now=0)  # 1,500 tokens: cacheable, nothing read
    o = c.process(lay(req(20)), now=5)  # shares 15 messages = 1,500 tokens
    assert o.read == 1408 and o.write_5m == 0 and o.write_1h == 0
    assert c.process(lay(req(20)), now=5 + 301).read == 0  # idled out

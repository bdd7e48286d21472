"""Prices you can trust: every bundled row names its source and date; a model id resolves to a row
only by the documented rules (exact, snapshot date dropped, Bedrock form), never by a partial match;
an unknown model stops a run with exit 2 naming it and --models FILE."""

from __future__ import annotations

import re

import pytest
from ctxsim.harness.cli import main as cli
from ctxsim.harness.model import trace as tr
from ctxsim.harness.provider import Provider
from ctxsim.harness.provider.models import UnknownModelError, base_id, load_table


def test_every_bundled_row_says_its_source_and_date():
    for name, spec in load_table().models.items():
        assert spec.source, name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", spec.as_of), name


@pytest.mark.parametrize("given,row", [
    ("claude-opus-4-6", "claude-opus-4-6"),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),         # Anthropic snapshot
    ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
    ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),         # Vertex AI
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),  # Bedrock, regional
    ("anthropic.claude-haiku-4-5-20251001-v1", "claude-haiku-4-5"),
    ("gpt-4o-2024-08-06", "gpt-4o"),                             # OpenAI snapshot
    ("gpt-5.5", "gpt-5.5"),
    # issue 27: every region / cross-region prefix, route prefixes, a missing version suffix
    ("jp.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
    ("converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
    ("au.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
    ("ca.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
    ("apac.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
    ("global.anthropic.claude-opus-4-6-v1", "claude-opus-4-6"),
    ("us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
    ("bedrock/eu.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
    ("anthropic/claude-opus-4-6", "claude-opus-4-6"),
    ("anthropic.claude-opus-4-6", "claude-opus-4-6"),
    # OpenRouter spells the version with a dot
    ("anthropic/claude-opus-4.6", "claude-opus-4-6"),
    ("claude-sonnet-4.5", "claude-sonnet-4-5"),
    # rule 6: MiniMax's API writes its ids in capitals; any rule in another case
    ("MiniMax-M2.7", "minimax-m2.7"),
    ("MiniMax-M3", "minimax-m3"),
    ("Claude-Sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ("converse/JP.Anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
])
def test_alias_rule_resolves(given, row):
    assert load_table().get(given).name == row


@pytest.mark.parametrize("given", ["claude-sonnet-4-5-foo", "gpt-5-mini", "gpt-5.5-pro", "claude-opus-4-6-1",
                                   "claude-sonnet", "eu.anthropic.claude-nope-v1:0", "gpt-4o-2024",
                                   "converse/jp.anthropic.claude-nope-v1:0", "openai/gpt-5-mini",
                                   "claude-opus-4.6-fast", "claude-opus-4.6-1m", "gpt-5.5.1",
                                   "MiniMax-M2.7-highspeed", "MiniMax-M3.1-Flash"])
def test_no_partial_match(given):
    assert base_id(given, load_table().models) is None
    with pytest.raises(UnknownModelError) as e:
        load_table().get(given)
    assert f"unknown model {given!r}" in str(e.value) and "--models FILE" in str(e.value)


def test_gpt_5_5_has_its_published_prices():
    """5.00 input / 0.50 cached / 30.00 output per million, 10 / 1.00 / 45 past 272k input
    (the majority of the readings the row cites): 1M uncached + 1M cached + 100k output."""
    p = Provider("gpt-5.5")
    from ctxsim.harness.model.conversation import Usage

    assert p.price(Usage(1_000_000 - 1_000_000, 0, 0, 100_000, 10_000)) == pytest.approx(0.05 + 0.30)
    assert p.price(Usage(200_000, 0, 0, 0, 1_000)) == pytest.approx(1.0 + 0.03)
    assert p.price(Usage(300_000, 0, 0, 0, 1_000)) == pytest.approx(3.0 + 0.045)   # long context


def unknown_model_trace(tmp_path):
    evs = [tr.UserEvent(t=0, text="hi"),
           tr.AssistantEvent(t=1, content=[tr.TextContent(text="a")], model="claude-opus-4-6"),
           tr.UserEvent(t=2, text="more"),
           tr.AssistantEvent(t=3, content=[tr.TextContent(text="b")], model="acme-coder-9")]
    path = tmp_path / "t.jsonl"
    tr.write(tr.validate_events(tr.Header(name="t", model="claude-opus-4-6"), evs), path)
    return path


def test_unknown_model_exits_2_naming_it_and_models_file(tmp_path, capsys):
    path = unknown_model_trace(tmp_path)
    assert cli(["run", str(path), "--strategy", "append_only", "-q"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'acme-coder-9'" in err and "--models FILE" in err and "Traceback" not in err
    assert cli(["run", str(path), "--strategy", "append_only", "--model", "acme-coder-9", "-q"]) == 2
    assert "unknown model 'acme-coder-9'" in capsys.readouterr().err
    extra = tmp_path / "more.toml"
    extra.write_text('[models.acme-coder-9]\nprovider = "anthropic"\nwindow = 200_000\nmax_output = 8_000\n'
                     'input = 2.0\noutput = 10.0\ncache_read = 0.2\n', encoding="utf-8")
    assert cli(["run", str(path), "--strategy", "append_only", "--models", str(extra), "-q"]) == 0


def test_a_models_row_replaces_the_row_it_equals_but_for_case_and_one_file_may_not_hold_both(tmp_path, capsys):
    """Rule 6 matches an id in any case, so a ``--models`` row spelled ``MiniMax-M2.7`` prices what the
    bundled ``minimax-m2.7`` did (the one row left), and a file giving two rows that differ only in case
    is refused, naming both, rather than pricing one id by either."""
    row = 'provider = "minimax"\nwindow = 204_800\nmax_output = 8_000\ninput = 9.0\noutput = 10.0\ncache_read = 0.2\n'
    mine = tmp_path / "mine.toml"
    mine.write_text(f'[models."MiniMax-M2.7"]\n{row}', encoding="utf-8")
    t = load_table(str(mine))
    assert t.get("minimax-m2.7").input == t.get("MINIMAX-M2.7").input == 9.0
    assert [k for k in t.models if k.casefold() == "minimax-m2.7"] == ["MiniMax-M2.7"]
    both = tmp_path / "both.toml"
    both.write_text(f'[models."MiniMax-M2.7"]\n{row}\n[models."minimax-m2.7"]\n{row}', encoding="utf-8")
    assert cli(["run", str(unknown_model_trace(tmp_path)), "--strategy", "append_only", "--models", str(both),
                "-q"]) == 2
    err = capsys.readouterr().err
    assert "'MiniMax-M2.7' and 'minimax-m2.7' differ only in case" in err and str(both) in err
    assert "Traceback" not in err


def test_minimax_m3_bills_the_whole_request_at_the_tier_past_512k():
    """genai-prices 0.2.5 (MiniMax's pay-as-you-go page): 0.30 in / 0.06 cached / 1.20 out, and 2x on every
    token of a request past 512,000 input. By hand: 500k uncached + 1k out = 0.15 + 0.0012;
    600k of which 500k cached + 1k out = 100k x 0.60 + 500k x 0.12 + 1k x 2.40 = 0.06 + 0.06 + 0.0024."""
    from ctxsim.harness.model.conversation import Usage

    p = Provider("MiniMax-M3")
    assert p.price(Usage(500_000, 0, 0, 0, 1_000)) == pytest.approx(0.15 + 0.0012)
    assert p.price(Usage(100_000, 0, 0, 500_000, 1_000)) == pytest.approx(0.06 + 0.06 + 0.0024)


def test_bedrock_geographic_ids_carry_the_regional_premium():
    """AWS (global cross-Region inference page, read 2026-12-02): global inference is ~10% cheaper than
    geographic for Sonnet 4.5 and later; genai-prices 0.2.3 prices us./eu./jp./apac. and in-region
    ids of Sonnet 4.5+, Haiku 4.5, Opus 4.5+ at 1.1× and Sonnet 4 at 1×. By hand: Sonnet 4.5 on us.:
    3.3 in / 16.5 out / 0.33 read / 4.125 write 5m / 6.6 write 1h, long context 6.6 / 24.75."""
    from ctxsim.harness.provider.models import bedrock_regional, load_table

    t = load_table()
    us = t.get("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert (us.input, us.output, us.cache_read, us.cache_write_5m, us.cache_write_1h) == pytest.approx(
        (3.3, 16.5, 0.33, 4.125, 6.6))
    assert (us.long_context.input, us.long_context.output) == pytest.approx((6.6, 24.75))
    for same in ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929",
                 "anthropic/claude-sonnet-4-5"):   # global inference and the Anthropic API: list prices
        assert t.get(same).input == 3.0, same
    assert t.get("converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0").input == pytest.approx(1.1)
    assert t.get("anthropic.claude-opus-4-6-v1").output == pytest.approx(27.5)            # in-region
    assert t.get("us.anthropic.claude-sonnet-4-20250514-v1:0").input == 3.0                 # Sonnet 4: none
    assert bedrock_regional("bedrock/eu.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert not bedrock_regional("global.anthropic.claude-opus-4-6-v1") and not bedrock_regional("claude-opus-4-6")


def test_a_models_row_may_name_a_provider_of_its_own_which_caches_as_openai(tmp_path, capsys):
    """A user pricing a model the table lacks names its provider (``moonshot`` for Kimi, refused by a closed
    list before): anthropic has breakpoints and a write premium, any other caches automatically. A name that
    is no lower-case word is refused, naming the file."""
    from ctxsim.harness.provider import Provider

    row = 'window = 262_144\nmax_output = 8_000\ninput = 0.6\noutput = 2.5\ncache_read = 0.15\n'
    mine = tmp_path / "mine.toml"
    mine.write_text(f'[models."kimi-k2.5"]\nprovider = "moonshot"\n{row}', encoding="utf-8")
    spec = load_table(str(mine)).get("kimi-k2.5")
    assert spec.provider == "moonshot"
    assert type(Provider("kimi-k2.5", models_file=mine)._cache_for(spec)).__name__ == "OpenAICache"
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[models."kimi-k2.5"]\nprovider = "Moon Shot!"\n{row}', encoding="utf-8")
    assert cli(["run", str(unknown_model_trace(tmp_path)), "--strategy", "append_only", "--models", str(bad),
                "-q"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "provider" in err and "Traceback" not in err

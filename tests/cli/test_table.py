"""The terminal table fits a 100-column terminal, lists failed runs last and marks them."""

from ctxsim.harness.cli.table import print_table
from rich.console import Console


def _m(strategy, cost, completed=True, failed_at=None, **kw):
    return {"strategy": strategy, "trace": "t.jsonl", "completed": completed, "failed_at_call": failed_at,
            "cost_usd": cost, "cache_hit_rate": 0.98, "latency_s": {"p50": 3.8, "p95": 16.56},
            "compactions": {"succeeded": 5}, "rejected_requests": 0 if completed else 1,
            "peak_context_tokens": 906_365, "retention": {"score": 0.547, "goal": 0.595, "ci95": [0.521, 0.583]},
            "tokens": {"input_uncached": 14_545_001, "cache_write": 73_990_812, "cache_read": 79_846_825,
                       "output": 216_407}, **kw}


ROWS = [_m("append_only", 44.151, False, 142), _m("observation_masking", 281.229), _m("amortized_forgetting", 33.248),
        _m("on_demand_reading", 6.68, False, 150)]


def _render(width):
    c = Console(width=width, record=True)
    print_table(ROWS, "4 strategies on long.jsonl (claude-sonnet-4-6, window 200,000, prompt caching on)", console=c)
    return c.export_text()


def test_fits_100_columns_without_cutting_a_value():
    text = _render(100)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "…" not in text
    for v in ("observation_masking", "amortized_forgetting", "281.23", "(44.15)", "FAILED@142", "906,365", "0.547",
              "0.52–0.58"):
        assert v in text


def test_failed_runs_last_never_ranked_by_cost():
    lines = [line for line in _render(100).splitlines() if line[:4] in ("appe", "obse", "amor", "on_d")]
    assert [line.split()[0] for line in lines] == ["amortized_forgetting", "observation_masking", "on_demand_reading",
                                                   "append_only"]
    assert "spend until the session failed" in _render(100)


def test_a_wide_terminal_gets_the_token_columns():
    assert "14,545,001" not in _render(100) and "14,545,001" in _render(200)


def test_a_configuration_that_failed_in_some_seeds_says_how_many_and_the_earliest_call():
    from ctxsim.harness.cli.compare import mark_failed, seed_outcome

    seeds = [{"completed": True, "failed_at_call": None}, {"completed": False, "failed_at_call": 700},
             {"completed": False, "failed_at_call": 678}]
    o = seed_outcome(seeds)  # a mean of the calls (689) or the first seed's None would name no failure
    assert o == {"completed": False, "failed_at_call": 678, "runs": 3, "runs_failed": 2}
    c = Console(width=100, record=True)
    print_table([_m("gemini_cli", 30.0, **o), _m("codex", 32.2)], console=c)
    text = c.export_text()
    assert "2/3 FAILED@678" in text and "2 of 3 seeds failed, the earliest at call k" not in text
    assert "1/3 FAILED@k = 1 of 3 seeds failed, the earliest at call k" in " ".join(text.split())
    assert text.index("codex") < text.index("gemini_cli")
    line = "- `gemini_cli`: 0.225 [0.178, 0.273]"
    assert mark_failed(line, {"gemini_cli": o, "codex": seed_outcome([{"completed": True}])}) == (
        "- `gemini_cli` (failed in 2 of 3 runs, first at call 678; probes after it score 0): 0.225 [0.178, 0.273]")
    every = seed_outcome([{"completed": False, "failed_at_call": 142}] * 3)
    assert mark_failed("- `append_only`: 0.120 [0.074, 0.166]", {"append_only": every}).startswith(
        "- `append_only` (failed at call 142; probes after it score 0):")
    assert mark_failed("- `codex`: 0.485 [0.457, 0.511]", {"append_only": every}) == "- `codex`: 0.485 [0.457, 0.511]"


def test_on_a_real_terminal_the_columns_that_fit_are_shown(monkeypatch):
    """Measured without the styles' escape codes: a colour terminal 100 columns wide gets the cache
    columns of one run (99 columns) as a pipe does."""
    one = [_m("novacode", 33.47)]
    monkeypatch.setenv("FORCE_COLOR", "1")  # every Console rich makes here believes it is on a terminal
    for terminal in (True, False):
        c = Console(width=100, record=True, force_terminal=terminal)
        print_table(one, console=c)
        text = c.export_text()
        assert "79,846,825" in text and "73,990,812" in text, terminal
        assert max(len(ln) for ln in text.splitlines()) <= 100

"""NovaCode's readings and constants where the seed (spec/novacode.md) is ambiguous or silent.

The parameters whose description starts with "not in the seed" are found by
:mod:`ctxsim.strategies.departures` on their own; these are the rest: values the seed does not fix, each
with the rule it reads and the alternative. ``ctxsim strategies novacode`` lists them with their
defaults, and a report's Assumptions states them for every NovaCode run.
"""

from __future__ import annotations

from ctxsim.strategies.departures import Departure

SEED_READINGS = (
    Departure("tail_rule", "N-COMP-6 reading",
              "'both' = the tail holds at least 10,000 tokens and 5 messages, 'either' = one of them"),
    Departure("breaker_reset", "N-COMP-4 reading",
              "'never' = an open breaker stays open for the session, 'cooldown' = one attempt after "
              "breaker_cooldown_s (not in the seed)"),
    Departure("restore_file_tokens", "N-COMP-11, seed silent",
              "a restored file over this many tokens is cut to them (Claude Code, reported, sends only a path "
              "reference for a file over 5,000)"),
    Departure("memory_index_max_bytes", "N-MEM-3 reading", "the index's '25 KB' in bytes (25,000; alternative 25,600)"),
    Departure("memory_lock_stale_after_s", "N-MEM-7, seed silent",
              "a consolidation lock older than this many seconds may be taken over (assumed)"),
)

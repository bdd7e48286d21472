"""Whether a log's requests kept the previous turns' thinking at a new user turn (issue 41).

On the models before Opus 4.5 the API drops the thinking of earlier assistant turns by default
(Anthropic's extended-thinking docs; ``strategies.recorded.STRIPS_PREVIOUS_ANTHROPIC``). A client
can ask it to keep them: ``context_management: {"edits": [{"type": "clear_thinking_20251015",
"keep": "all"}]}`` (Anthropic's context-editing docs: "to maximise cache hits, keep all thinking
blocks"). Claude Code does: router-for-me/CLIProxyAPI, internal/runtime/executor/
claude_executor_cloaking.go, ``claudeCodeContextManagement``, records that object as what Claude
Code 2.1.220 sends on every Messages request (captured 2026-08-01).

The log tells the two apart at a new turn that follows a turn whose earlier answers thought (the
requests the cache holds carry that thinking: ``RecordedCall.thought_in_prefix``): kept, the new
turn reads the whole cached context; dropped, it reads only up to the first answer that thought.
The development population (issue 41; sonnet-4.5 and haiku-4.5 sessions, no TTL expiry, same
model, no thinking switch) shows both:

* Claude Code 2.1.2-2.1.15 (January 2026): 26 such new turns read short, 11 read whole, two
  sessions of eight holding both;
* Claude Code 2.1.72 (March 2026): 3 of 3 read whole;
* Claude Code 1.0.x (budget thinking, August 2025): every one read short.

So each log is judged on its own first part (the calls the token scale is fitted on, the rest held
out), by the majority of those new turns; where it has none (or a tie), on all its calls, in sample
and labelled so (a client's setting, one bit, not a rate fitted to the calls it is scored on); where
the log has none at all, the agent's version decides (:data:`KEPT_FROM_VERSION`), and before it the
API's default stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxsim.harness.fidelity.cache_misses import expired_since, read_tolerance
from ctxsim.harness.fidelity.first_part import judged
from ctxsim.harness.fidelity.recorded import CHANGES_PREFIX, other_cache
from ctxsim.strategies.recorded import strips_previous_thinking

# the first Claude Code version whose logs in the development population show the previous turns'
# thinking kept (2.1.72: 3 of 3 new turns read the whole cached context); 2.1.220 sends keep "all"
# (CLIProxyAPI's capture, above). Where in 2.1.16-2.1.71 it began is not measured: assumed 2.1.72
KEPT_FROM_VERSION = (2, 1, 72)


def _version(v: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in (v or "").split("."))
    except ValueError:
        return ()


def new_turn_reads(calls: Sequence[Any], upto: int) -> tuple[int, int]:
    """``(whole, short)``: of the main context's new turns among ``calls[:upto]`` that follow a turn
    whose earlier answers thought, on a model whose API drops that thinking by default, how many read
    the previous call's whole context and how many fell short. A new turn after a TTL expiry, a model
    or route change (another cache: ``RecordedCall.route``), a compaction, a thinking switch or a changed
    prefix (``/mcp``, ``/effort``, a resumed launch) says nothing of it and is left out."""
    whole = short = 0
    for c in calls[:upto]:
        if (c.thread != "main" or not c.new_turn or not c.thought_in_prefix or c.usage is None or c.after_compact
                or c.thinking_switch or c.trigger in CHANGES_PREFIX or not strips_previous_thinking(c.model)
                or c.prev_in_thread is None):
            continue
        prev = calls[c.prev_in_thread]
        if prev.usage is None or other_cache(c, prev) or expired_since(prev, c):
            continue
        if c.usage.cache_read + read_tolerance(prev.cached) >= prev.cached:
            whole += 1
        else:
            short += 1
    return whole, short


def previous_thinking_kept(calls: Sequence[Any], upto: int, version: str | None) -> tuple[bool | None, str, bool]:
    """Whether the log's requests kept the previous turns' thinking, and the evidence: the majority
    of :func:`new_turn_reads` over ``calls[:upto]``; else over all ``calls`` (in sample, said so in
    the evidence); else the agent's ``version`` (kept from
    :data:`KEPT_FROM_VERSION`); else ``None`` (the API's default). ``None`` too for a log with no
    call on a model whose API drops it: there is nothing to keep. The third value: decided in sample."""
    if not any(c.usage is not None and strips_previous_thinking(c.model) for c in calls):
        return None, "no call on a model whose API drops the previous turns' thinking by default", False
    kept, seen, in_sample = judged(lambda k: new_turn_reads(calls, k), upto, len(calls),
                        lambda f: (f"of the new turns in the first {upto} calls after a turn whose earlier answers "
                                   f"thought, {f[0]} read the whole cached context and {f[1]} read short"),
                        ("whole", "short"),
                        ("the previous turns' thinking was kept", "the previous turns' thinking was dropped"))
    if kept is not None:
        return kept, seen, in_sample
    v = _version(version)
    if v and v >= KEPT_FROM_VERSION:
        return True, (f"{seen}; Claude Code {version} keeps it (from "
                      f"{'.'.join(map(str, KEPT_FROM_VERSION))}: harness/fidelity/kept_thinking.py)"), False
    return None, f"{seen}; the API's default", False


__all__ = ["KEPT_FROM_VERSION", "new_turn_reads", "previous_thinking_kept"]

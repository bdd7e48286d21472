"""What a compaction put back, as the log measured it: the first main call after each compaction.

After a compaction Claude Code sends its summary and what it re-attaches (files, plan, skills, todo
list), which :mod:`ctxsim.strategies.reattach` rebuilds from what the log shows: the files the log
read and edited, as far as the log holds their lines. The log's first main call after the compaction
measures the whole: its context is the prefix, the re-sent startup content, the summary, what was
re-attached and what came in since. Where it differs from what the replay sends there, by more than
the floors, the rebuild missed (a file's lines the log never showed, an attachment it does not know)
or over-did it (a file the agent did not re-attach), and the rest of the conversation until the next
compaction carries that error in every request.

So each compaction carries its measured difference (``meta.reattach_measured``, recorded tokens) and
the ``recorded`` strategy follows it: more, as content the log has no text for (an opaque message
after the re-attachments, as :mod:`ctxsim.harness.fidelity.measured` puts back the hidden content of
a growth step); less, by leaving out the rebuilt re-attachments last first (the todo list, skills
and plan, then the least recently modified file) as many as bring it closest (which ones is
assumed). The sizes are the log's measure of its own calls, as measured.py's growth steps are: the
held-out calls' cache behaviour, not their sizes, is what fidelity scores.

Development population (issue 41, 2026-12, the 166 sessions billed by Anthropic, each calibrated again
and replayed by `ctxsim fidelity`): sessions whose held-out context is off by over 5% (median per call)
14 -> 3; within 2 / 5% of the bill 68.1 / 85.5% -> 71.7 / 86.1%; median |error| 1.09% -> 0.90%, median
signed -0.04% -> -0.03% (the same by `ctxsim import` and `ctxsim fidelity` of the folder). Two outside
samples it was not fitted on: 129 sessions 86% -> 88% within 5%, 130 sessions 74% -> 75%. A session whose context had been 16-19k short after its compactions went from
-7.1% to +6.2%: the missing context had hidden fall-backs the replay places elsewhere (the dice,
harness/fidelity/dice.py); a Claude Code 1.0.x session whose compaction the importer infers (no
boundary record) follows a first call of 89k and then runs above its log (context error 5.5% ->
18.4%, cost +6.6% -> +3.1%).
"""

from __future__ import annotations

from collections.abc import Callable

from ctxsim.harness.fidelity.recorded import RecordedCall
from ctxsim.harness.model.trace import REATTACH_MEASURED as MEASURED
from ctxsim.harness.model.trace import CompactEvent, SubtaskEnd, SubtaskStart, Trace, with_events

# below this many recorded tokens a difference is the summary's and the scale's noise (measured.py's
# hidden-content floor); assumed, a parameter of :func:`differences`
MIN_TOKENS = 200


def first_calls(trace: Trace, calls: list[RecordedCall]) -> dict[int, RecordedCall]:
    """Each main-conversation compaction (its 0-based index among all the trace's compactions, the
    strategy's count) and the first main call after it that has usage, if one came before the next."""
    by_event = {c.event: c for c in calls}
    out: dict[int, RecordedCall] = {}
    depth, n, open_at = 0, -1, None
    for i, e in enumerate(trace.events):
        if isinstance(e, CompactEvent):
            n += 1
            if not depth:
                open_at = n
        elif isinstance(e, SubtaskStart) and e.isolated:
            depth += 1
        elif isinstance(e, SubtaskEnd) and depth:
            depth -= 1
        c = by_event.get(i)
        if c is not None and not depth and c.thread == "main" and open_at is not None:
            if c.usage is not None and c.after_compact:
                out[open_at] = c
            open_at = None
    return out


def differences(trace: Trace, calls: list[RecordedCall], sent: Callable[[RecordedCall], float],
                min_tokens: int = MIN_TOKENS) -> dict[int, int]:
    """Compaction index -> recorded tokens its first main call holds beyond (or, negative, short of)
    what the replay sends there (``sent``: recorded tokens), where it passes ``min_tokens``."""
    out = {}
    for n, c in first_calls(trace, calls).items():
        diff = int(round(c.context - sent(c)))
        if abs(diff) >= min_tokens:
            out[n] = diff
    return out


def apply(trace: Trace, measured: dict[int, int]) -> Trace:
    """``trace`` with each compaction's measured difference (``meta.reattach_measured``); the others
    lose any an earlier calibration left."""
    events = list(trace.events)
    changed, n = False, -1
    for i, e in enumerate(events):
        if not isinstance(e, CompactEvent):
            continue
        n += 1
        want = measured.get(n)
        if want == e.meta.get(MEASURED):
            continue
        meta = {k: v for k, v in e.meta.items() if k != MEASURED}
        if want:
            meta[MEASURED] = want
        events[i] = e.model_copy(update={"meta": meta})
        changed = True
    if not changed:
        return trace
    return with_events(trace, events)


def evidence(measured: dict[int, int]) -> str:
    if not measured:
        return ""
    more = sum(1 for v in measured.values() if v > 0)
    return (f"{len(measured)} compaction(s) whose first call differs from the rebuilt re-attachments by "
            f"{sum(abs(v) for v in measured.values()):,} recorded tokens ({more} more, {len(measured) - more} less): "
            "more sent as content with no text, less by leaving rebuilt re-attachments out where there are any "
            "(harness/fidelity/reattached.py)")


__all__ = ["MEASURED", "MIN_TOKENS", "apply", "differences", "evidence", "first_calls"]

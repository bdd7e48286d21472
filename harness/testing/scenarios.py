"""Hand-written sessions every strategy meets before the generated ones: the seeded corpus's fixed
part. Each is a situation that broke a registered strategy (issue #29) and that a random search
reaches only by luck, so a verdict never depends on whether the draws happened to meet it:

* ``dense_step``: dense files read one by one (each under a spill threshold), then one step of dense
  results, each under the threshold and together under the aggregate budget, that push the request
  past the window unforeseen (NovaCode's finding #17 with the seed's budgets);
* ``clear_then_subagent``: results enough to pass a clearing or compaction trigger, then an isolated
  sub-agent, then more work in the parent (what the parent had cleared must stay cleared, or the
  change be declared);
* ``clear_then_crash``: crashes with calls open, resumes, enough work to clear the repairs, more
  crashes and resumes;
* ``crash_mid_results``: crashes while parallel calls ran, some of their results written and the
  rest never (the resumed history answers the missing ones), twice, with enough work between to compact;
* ``parallel_results``: steps of six parallel results, spills, a sub-agent, a crash and a resume,
  across a DST change (what the cross-process check replays besides the longest generated session);
* ``clock_edges``: one short launch across each edge of the kit's clock (midnight UTC and local,
  DST changes) and across midnight on the strategy's own clock (``Strategy.clock_epochs``: a date
  stamped from its own epoch changes there), so a date or zone stamped per request is met whatever
  the draws;
* ``empty_results_tail``: a history long enough to compact, whose newest steps return nothing (every
  result of a call empty, the answers carrying the text), so a compaction boundary or a kept tail
  falls on or after a message of empty results (issue #45);
* ``fresh_conversations``: one opening (small results, then large ones) in the first launch, in an
  isolated sub-agent and in a new launch: what a strategy keeps per conversation starts afresh;
* ``long_thinking``: six user turns answered with thinking of thousands of characters, most of the
  context thinking of earlier turns;
* ``cleared_after_sent``: a large result sent whole once (so the usage the API reports counts it at
  its true density), then pushed out of the kept tool uses by one more call: an estimate that takes
  away what it clears at a fixed rate of characters per token runs high (issue #45, context_editing);
* ``day_long_launch``: one launch of 27 hours, the user back every three: every clock's midnight falls
  inside it, so a date stamped per request on an epoch the strategy does not declare changes within it;
* ``subagent_larger_than_parent``: a long parent history of few tokens, an isolated sub-agent of a few
  large reads, more parent steps: the parent's estimate after the sub-agent is its own;
* ``thinking_then_small_results``: long thinking in every answer, tiny tool results: past a clearing
  trigger the results free next to nothing while the thinking cleared beside them frees much more;
* ``spans_across_resume``: spans of work the recorded agent did in its main context (a strategy may
  delegate each to a sub-agent of its own, with a call it makes and numbers itself) before a crash
  and after the resume, the first one's call still in the window: an id numbered afresh per launch
  repeats one the resumed history holds, which the API refuses (issue #45);
* ``heavy_tools``: an agent whose tool definitions and instructions fill over a quarter of the window
  (five MCP servers' tools, :data:`conversations.HEAVY_PROMPT_SHARE`), past a compaction trigger: an
  estimate that leaves the prompt out, or sizes a tail as if the window were the agent's alone, is
  off by more than the kit allows;
* ``failures_apart``: enough work for six compactions or more, the first, third and fifth summary calls
  failing (never three in a row): a breaker declared to open on three consecutive failures stays closed;
* ``short_exchanges``: thirty short user turns (a question, a small read every third turn, an answer): a walk
  over the newest finished messages under a budget crosses turns, so one sized in another unit shows (aider);
* ``memory_then_compaction``: three short turns answered without a tool call, then one long enough to compact:
  what a strategy recalled into the conversation before a compaction is met after it (NovaCode's memories); then a
  new launch, replayed again with the strategy built anew there: a new process holds only the run's files, so what
  one instance kept in memory across the launch (memories marked as injected in the last conversation) shows;
* ``small_reads_then_idle``: thirty reads just over a thousand characters, then the user comes back after fifteen
  minutes: a round that replaces old reads down to a budget of a few reads shows when it replaces more (one that
  never counts down what it took replaces all but the newest; on_demand_reading);
* ``copied_history``: a conversation resumed into a new session file (Claude Code 1.0.x): the earlier
  session's calls copied in, answers with no usage and no request of their own, then the launch's own
  steps past a compaction trigger: a strategy that takes an answer's usage for granted raises there;
* ``subagent_after_clearing``: the session the corpus found context_editing un-clearing on after an
  isolated sub-agent (traces/kit/subagent_after_clearing.jsonl, as written by check-strategy; at the
  kit's window only).

Sizes are given for the kit's 32,000-token window and scaled with the window. The dense scenario
is judged without ``estimate`` (text of about a token per character is there to exercise the
reaction to a refusal, as in the generated sessions).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ctxsim.harness.llm.services import SUMMARY, VERIFY
from ctxsim.harness.model import trace as tr
from ctxsim.harness.testing import conversations as conv

BASE_WINDOW = 32_000


def _scale(n: int, window: int) -> int:
    return max(1, n * window // BASE_WINDOW)


def dense_step(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(300, 1)
    for k in range(5):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(4_000, window), seed=k, dense=True),)))
    b.call(conv.Turn(calls=tuple(conv.ToolCall("Bash", _scale(6_000, window), seed=200 + i, dense=True)
                                 for i in range(2))))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def dense_resume(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """Dense output read step by step (about a token per character: a strategy that measures its rate
    learns it), a crash with calls open, a resume, then more of it: the resumed launch's estimate is as
    good as the one before the crash, or it lost what it had measured (issue #45). Judged without the
    absolute ``estimate`` (a fixed rate is far off here, rightly), with ``resume_estimate``."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(300, 31)
    for k in range(4):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(2_500, window), seed=700 + k, dense=True),)))
    b.call(conv.Turn(calls=(conv.ToolCall("Bash", 300, seed=710, dense=True),)), crash=True)
    b.start_session(resume=True)
    b.user(40, 32)
    for k in range(2):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(1_500, window), seed=720 + k, dense=True),)))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def _history(b: conv.ConversationBuilder, window: int, steps: int = 9) -> None:
    b.start_session()
    b.user(300, 2)
    for k in range(steps):  # ~3,000 tokens a step: past a trigger at half the window by the sixth
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(5_000, window), seed=10 + k),
                                conv.ToolCall("Bash", _scale(3_500, window), seed=30 + k))))


def copied_history(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """A conversation resumed into a new session file, as Claude Code 1.0.x did: six steps of an earlier
    session's calls copied in (history the session starts from: no request is sent for them, the strategy
    receives their answers with no usage), then the resumed launch's own steps, past a trigger at
    three quarters of the window. What a strategy anchors on usage has none until its first call."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(300, 51)
    b.copying = True
    for k in range(6):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(5_000, window), seed=60 + k),
                                conv.ToolCall("Bash", _scale(3_500, window), seed=70 + k))))
    b.call(conv.Turn(text=200))
    b.copying = False
    b.end_session()
    b.start_session(resume=True)
    b.user(120, 52)
    for k in range(4):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(5_000, window), seed=80 + k),
                                conv.ToolCall("Grep", _scale(2_000, window), seed=90 + k))))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def clear_then_subagent(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """Crashes that leave calls open (answered by the strategy's synthetic results on resume), two
    steps of results just past a trigger at half the window (so they and the synthetic results are
    cleared), then an isolated sub-agent and one more call in the parent: the shape of the session
    the corpus found context_editing forgetting its cleared set on (#29)."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(170, 2)
    for k, n in enumerate((2, 1, 2, 3)):  # a crash chain: each launch dies with its reads open
        b.call(conv.Turn(calls=tuple(conv.ToolCall("Read", 500, seed=40 + k + j) for j in range(n))), crash=True)
        b.start_session(resume=True)
        b.user(140, 3 + k)
    step1 = (7_192, 7_270, 5_636, 2_473, 2_529)
    step2 = (9_058, 2_980, 3_628, 6_459)
    b.call(conv.Turn(calls=tuple(conv.ToolCall("Read", _scale(n, window), seed=10 + i) for i, n in enumerate(step1))))
    b.call(conv.Turn(calls=tuple(conv.ToolCall("Bash", _scale(n, window), seed=20 + i) for i, n in enumerate(step2))))
    b.subtask([conv.Turn(calls=(conv.ToolCall("Read", _scale(57_299, window), seed=5),
                                conv.ToolCall("Read", _scale(2_802, window), seed=6))),
               conv.Turn(calls=(conv.ToolCall("Read", 0, seed=7),))], isolated=True)
    b.call(conv.Turn(calls=(conv.ToolCall("Skill", 0, seed=3),)))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def clear_then_crash(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """A crash early (its calls answered on resume by the strategy's own synthetic results), then
    enough work to clear those too, then crashes and resumes again (the repaired history is read
    back each time)."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(300, 2)
    b.call(conv.Turn(calls=(conv.ToolCall("Bash", 400, seed=7), conv.ToolCall("Read", 400, seed=8))), crash=True)
    b.start_session(resume=True)
    b.user(40, 3)
    for k in range(9):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(5_000, window), seed=10 + k),
                                conv.ToolCall("Bash", _scale(3_500, window), seed=30 + k))))
    for r in range(2):
        b.call(conv.Turn(calls=(conv.ToolCall("Bash", 300, seed=80 + r),)), crash=True)
        b.start_session(resume=True)
        b.user(40, 4 + r)
        for k in range(2):
            b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(2_000, window), seed=70 + k),)))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def crash_mid_results(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """Crashes while parallel calls ran: the first of three results came back and was written, the
    other two never did (a real agent writes each result as its tool returns); resumed, the user
    says "continue". Then enough reads to compact, and the same again with two of four answered: the
    resumed history must answer the missing calls, in the message that holds the others (issue #45)."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(300, 21)
    b.call(conv.Turn(calls=tuple(conv.ToolCall(n, 400, seed=600 + i) for i, n in enumerate(("Read", "Grep", "Bash")))),
           crash=True, answered=1)
    b.start_session(resume=True)
    b.user(40, 22)
    for k in range(8):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(5_000, window), seed=610 + k),
                                conv.ToolCall("Bash", _scale(3_500, window), seed=630 + k))))
    b.call(conv.Turn(calls=tuple(conv.ToolCall("Read", 300, seed=650 + i) for i in range(4))), crash=True, answered=2)
    b.start_session(resume=True)
    b.user(40, 23)
    b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(2_000, window), seed=660),)))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def parallel_results(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """Steps of six parallel results (a set of ids, paths or tools would shuffle them), results over a
    spill threshold, six under it and over a message budget together, an isolated sub-agent of parallel reads, a crash with four calls open and a
    resume, enough reads to compact; starting 40 s before America/New_York's DST change (the kit's
    local zone), so a local time or zone stamped per request changes within the launch. The
    cross-process check replays it in two processes (another hash seed, another time zone)."""
    from ctxsim.harness.testing.clock import EDGES, ZONE

    b = conv.ConversationBuilder()
    b.t = next(e.t for e in EDGES if "start of DST in " + ZONE in e.label) - 40
    b.start_session()
    b.user(300, 5)
    names = ("Read", "Grep", "Read", "Bash", "Read", "Grep")
    for k in range(8):
        b.call(conv.Turn(calls=tuple(conv.ToolCall(n, _scale(1_800, window), seed=100 + 6 * k + j)
                                     for j, n in enumerate(names))))
    b.call(conv.Turn(calls=(conv.ToolCall("Bash", _scale(12_000, window), seed=150),
                            conv.ToolCall("Read", _scale(12_000, window), seed=151))))
    # six results each under NovaCode's spill threshold at the kit's window (8,000 characters) and over its message
    # budget together (33,000 of 32,000): a budget spilled from the wrong end shows (N-SPILL-2)
    b.call(conv.Turn(calls=tuple(conv.ToolCall("Read", _scale(n, window), seed=152 + j)
                                 for j, n in enumerate((3_500, 7_500, 4_000, 7_000, 5_000, 6_000)))))
    b.subtask([conv.Turn(calls=tuple(conv.ToolCall("Read", 800, seed=160 + j) for j in range(5)))], isolated=True)
    b.call(conv.Turn(calls=tuple(conv.ToolCall("Read", 300, seed=170 + j) for j in range(4))), crash=True)
    b.start_session(resume=True)
    b.user(60, 6)
    for k in range(4):
        b.call(conv.Turn(calls=tuple(conv.ToolCall("Read", _scale(2_500, window), seed=180 + 3 * k + j)
                                     for j in range(3))))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def clock_edges(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """One short launch across each of the clock's edges (:data:`clock.EDGES`: midnight UTC and
    local, DST changes) and each of ``edges`` (the strategy's own, :func:`clock.own_edges`): two
    calls 40 s before it, the user back two minutes later, two calls after it. A date, a time or a
    zone stamped per request changes within each launch; the generated sessions cross one edge
    each, and their draws may not reach it."""
    from ctxsim.harness.testing.clock import EDGES

    b = conv.ConversationBuilder()
    for k, edge in enumerate(sorted({e.t: e for e in (*EDGES, *edges)}.values(), key=lambda e: e.t)):
        b.t = edge.t - 70
        b.start_session()  # 30 s later: 40 s before the edge
        b.user(200, 20 + k)
        b.call(conv.Turn(calls=(conv.ToolCall("Read", 600, seed=300 + k), conv.ToolCall("Grep", 300, seed=310 + k))))
        b.call(conv.Turn(text=100))
        b._tick(120)  # the user reads the answer: past the edge
        b.user(100, 30 + k)
        b.call(conv.Turn(calls=(conv.ToolCall("Bash", 400, seed=320 + k),)))
        b.call(conv.Turn(text=100))
        b.end_session()
    return b.trace()


def empty_results_tail(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """Steps whose calls all return nothing (a search that finds nothing, a command that prints
    nothing) from the start, between reads of ~1,700 tokens a step that fill the window (a strategy
    that compacts at 90% of it still fits its summary request), so every compaction has messages of
    empty results behind it; then, three times over, more reads and an answer longer than any kept
    tail (a long plan, ~8,000 tokens at the kit's window) whose calls return nothing, then a few small
    steps: a compaction whose kept tail stops before that answer (a tail's cap) starts on the message
    of its empty results, a message of zero characters that still holds the results of its call
    (issue #45). Then steps whose results are all empty while the answers carry the text, the user
    interjecting once among them (one message, so a boundary counted in messages falls on a message
    of empty results as well as on an answer), and the final answer."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(300, 7)

    def empty(seed: int, text: int = 40) -> None:
        b.call(conv.Turn(text=text, calls=(conv.ToolCall("Grep", 0, seed=seed), conv.ToolCall("Bash", 0, seed=seed + 1))))

    for k in range(16):  # ~1,700 tokens a step: past a line at 85% of the window by the sixteenth
        if k % 5 == 0:
            empty(380 + k)
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(2_500, window), seed=400 + k),
                                conv.ToolCall("Grep", _scale(2_500, window), seed=420 + k))))
    for r in range(3):
        for k in range(3):
            b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(5_000, window), seed=470 + 3 * r + k),
                                    conv.ToolCall("Grep", _scale(5_000, window), seed=480 + 3 * r + k))))
        empty(440 + 2 * r, _scale(24_000, window))
        for k in range(2):
            b.call(conv.Turn(calls=(conv.ToolCall("Bash", _scale(300, window), seed=460 + 3 * r + k),)))
    for k in range(10):  # the newest steps: the answers hold the text, every result is empty
        if k == 5:  # the user interjects (one message): a boundary counted in messages falls on the other parity
            b.user(200, 13)
        empty(490 + 2 * k, _scale(2_500, window))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def cleared_after_sent(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """A long request (the user pastes a log), then one large result of tool output at its common
    density (~2.7 characters per token, :data:`conversations.LOG_POOL`) beside two small ones, all
    three sent whole; then one call at a time, so the large result becomes the fourth-newest tool use
    (past context_editing's ``keep`` of 3, its trigger at half the window), then the sixth-newest
    observation (past SWE-agent's masking of all but the last 5). What the request still holds after
    a clearing is over a quarter of the window, so the estimate is judged there: taking
    the cleared result away at 4 characters per token from a usage that counted it at 2.7 leaves the
    estimate ~70% high (issue #45; the same defect openhands had, known finding #18)."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(_scale(24_000, window), 8)
    b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(54_000, window), seed=500, pool=conv.LOG_POOL),
                            conv.ToolCall("Read", 300, seed=501), conv.ToolCall("Grep", 300, seed=502))))
    for k in range(6):  # each a newer tool use: past keep 3 after the first, past 5 (SWE-agent's n) after the third
        b.call(conv.Turn(calls=(conv.ToolCall("Bash" if k % 2 else "Read", 300, seed=503 + k),)))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def _opening(b: conv.ConversationBuilder, window: int, seed: int) -> None:
    """A dozen tiny results first (``ls``, a grep that finds one line), then large ones: a trigger
    at half the window, or at a dozen tool uses, is crossed while the oldest results are still tiny
    (a first clearing that frees little), then again with large ones."""
    for k in range(13):
        b.call(conv.Turn(calls=(conv.ToolCall("Read" if k % 3 else "Bash", 100, seed=seed + k),)))
    for k in range(5):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(12_000, window), seed=seed + 10 + k),)))


def fresh_conversations(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """The same opening in three conversations of one run: the first launch's, an isolated
    sub-agent's (a conversation of its own, inside the first), and a new launch's after a restart.
    What a strategy keeps per conversation (a cleared set, a breaker, a flag "the minimum was met
    once") must start afresh in each; state kept per instance shows in the second and third (issue
    #45)."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(_scale(30_000, window), 9)
    _opening(b, window, 600)
    sub = [conv.Turn(calls=(conv.ToolCall("Read", 300, seed=640 + k),)) for k in range(4)]
    sub += [conv.Turn(calls=(conv.ToolCall("Read", _scale(20_000, window), seed=650 + k),)) for k in range(3)]
    b.subtask(sub, isolated=True)
    b.call(conv.Turn(text=200))
    b.end_session()
    b.start_session(pause=60.0)
    b.user(_scale(30_000, window), 10)
    _opening(b, window, 700)
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def long_thinking(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """A long request, then six user turns each answered with extended thinking of 4,000 characters
    before a call and again before the answer (thinking blocks of thousands of characters are
    common; the generated sessions draw at most 1,500): most of the context is thinking of earlier
    turns, what a strategy that clears or drops thinking must account for (issue #45)."""
    return _thinking_turns(window, opening=24_000, turns=6, thinking=4_000, said=200, read=600, seeds=(11, 12, 800))


def day_long_launch(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """One launch that lasts 27 hours: the user comes back every three hours for a short exchange (two
    reads of ~1,500 tokens, an answer). Every clock's midnight falls inside it, whatever its epoch or
    zone, so a date stamped per request on a clock the strategy does not declare (an epoch of its own
    hidden in a constant) changes within the launch, where the clock-edge scenario only crosses the
    edges it knows; and the cache is cold at every return, so a strategy that clears old results then
    (Claude Code's microcompact) re-bases its estimate there every time (issue #45)."""
    b = conv.ConversationBuilder()
    b.t = 3_600.0
    b.start_session()
    b.user(300, 40)
    for k in range(10):
        if k:
            b._tick(3 * 3_600)
            b.user(120, 41 + k)
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(4_500, window), seed=900 + k),
                                conv.ToolCall("Grep", _scale(4_500, window), seed=920 + k))))
        b.call(conv.Turn(text=120))
    b.end_session()
    return b.trace()


def subagent_larger_than_parent(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """A parent of many small steps (twenty reads of a few lines: a long history of few tokens), then an
    isolated sub-agent that reads three large files (a short history of many tokens), then two more
    small steps in the parent. The parent's first request after the sub-agent returns is small, and an
    estimate anchored on the sub-agent's last usage (one usage anchor for the process, not restored
    when the span ends) counts the sub-agent's context for the parent's, whatever the two histories'
    lengths (issue #45)."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(300, 15)
    for k in range(20):
        b.call(conv.Turn(calls=(conv.ToolCall("Read" if k % 2 else "Grep", 200, seed=700 + k),)))
    b.subtask([conv.Turn(calls=(conv.ToolCall("Read", _scale(20_000, window), seed=730 + k),)) for k in range(3)],
              isolated=True)
    for k in range(2):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", 200, seed=740 + k),)))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def thinking_then_small_results(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """A long request, then turns whose answers carry long thinking (thousands of characters before each
    call and each answer) while every tool result is tiny: past a trigger at half the window, what a
    clearing of the old results frees is far under any minimum, while the thinking cleared in the same
    request frees much more. A gate that counts the thinking with the results (context_editing's
    ``clear_at_least`` held against both edits) clears results that free next to nothing (issue #45)."""
    return _thinking_turns(window, opening=40_000, turns=8, thinking=6_000, said=100, read=150, seeds=(14, 50, 950))


def _thinking_turns(window: int, *, opening: int, turns: int, thinking: int, said: int, read: int,
                    seeds: tuple[int, int, int]) -> tr.Trace:
    """A long request (``opening`` characters at 200k), then ``turns`` user turns each answered with
    ``thinking`` characters of thinking before one Read of ``read`` characters and again before an
    answer of ``said`` characters; ``seeds``: the opening's, the turns' first and the reads' first."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(_scale(opening, window), seeds[0])
    for k in range(turns):
        if k:
            b.user(said, seeds[1] + k)
        b.call(conv.Turn(thinking=_scale(thinking, window), calls=(conv.ToolCall("Read", read, seed=seeds[2] + k),)))
        b.call(conv.Turn(thinking=_scale(thinking, window), text=said))
    b.end_session()
    return b.trace()


FOUND = Path(__file__).resolve().parents[2] / "traces" / "kit"


def spans_across_resume(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """Two spans of main-context work (``isolated=False``: the recorded agent's own exploration, which
    a strategy may run as a sub-agent of its own), a crash with a call open, a resume, two more
    spans, a second crash and resume and one more: every span's call is still in the window."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(300, 31)
    for launch in range(3):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", 600, seed=700 + 10 * launch),)))
        for k in range(2 if launch < 2 else 1):
            b.subtask([conv.Turn(calls=(conv.ToolCall("Grep", 400, seed=701 + 10 * launch + k),))], isolated=False)
        if launch < 2:
            b.call(conv.Turn(calls=(conv.ToolCall("Bash", 300, seed=705 + 10 * launch),)), crash=True)
            b.start_session(resume=True)
            b.user(40, 32 + launch)
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def heavy_tools(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """The agent's prompt at :data:`conversations.HEAVY_PROMPT_SHARE` of the window (40% of it an
    opaque prefix), then two user turns of reads and commands enough to pass a trigger at half the
    window, and a last answer."""
    b = conv.ConversationBuilder()
    b.header = conv.realistic_header(window, conv.HEAVY_PROMPT_SHARE, seed=41)
    b.start_session()
    b.user(300, 41)
    for k in range(5):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(4_000, window), seed=720 + k),
                                conv.ToolCall("Bash", _scale(2_000, window), seed=740 + k))))
    b.call(conv.Turn(text=200))
    b.user(200, 42)
    for k in range(4):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(4_000, window), seed=760 + k),)))
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def long_turns(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """Three user turns, the first two of twelve reads and commands each (42,000 characters of output a turn at
    32k, about 15,000 tokens: past a budget of the newest output kept at a fifth of the window by more than a
    tenth of it): a rule kept in turns (opencode never prunes the last two) binds only where one turn outgrows the
    budget kept in tokens."""
    return _tool_turns(window, turns=2, calls=12, size=3_500, seed=800, stride=10, user_seed=51,
                       tool=lambda k: "Read" if k % 2 == 0 else "Bash")


def failures_apart(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """Three user turns of 24 reads and commands each (about 100,000 tokens of output at 32k: a summarising
    strategy compacts six times or more), its first, third and fifth summary calls failing (SCENARIO_FAILS): never
    three in a row, so a breaker that opens on three consecutive failures stays closed, and one that counts them over
    the session opens (issue #45)."""
    return _tool_turns(window, turns=3, calls=24, size=4_000, seed=900, stride=30, user_seed=61,
                       tool=lambda k: "Read" if k % 3 else "Bash")


def short_exchanges(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """Thirty short user turns, each a question, every third a read of 1,200 characters, and an answer of 900 (about
    1,300 characters a turn at 32k): a chat of the kind aider holds, where a walk from the newest finished message
    under a budget of a few thousand tokens (aider's half of ``min(max(window / 16, 1024), 8192)``) crosses several
    turns, and one that sizes the messages in another unit stops a turn or two short (issue #45)."""
    b = conv.ConversationBuilder()
    b.start_session()
    for t in range(30):
        b.user(_scale(200, window), 70 + t)
        if t % 3 == 1:
            b.call(conv.Turn(calls=(conv.ToolCall("Read", _scale(1_200, window), seed=950 + t),)))
        b.call(conv.Turn(text=_scale(900, window)))
    b.end_session()
    return b.trace()


# what the user says in the memory scenario's first turns: what a memory keeps (a preference, feedback), each a fact
# the simulated model's extraction knows (harness/llm/simulated.py)
MEMORY_FACTS = (("preference", "I prefer small commits with a test for each fix."),
                ("feedback", "Do not reformat files you did not otherwise change."),
                ("preference", "Always run the unit tests with pytest -q before saying a fix is done."))


def memory_then_compaction(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """Three short user turns, each saying a preference or feedback (:data:`MEMORY_FACTS`), answered without a tool call
    (where a strategy with memory extracts what was said), then
    a turn of twenty reads and commands of 3,500 characters each (about 25,000 tokens at 32k: past a compaction
    trigger), and a last answer: what a strategy recalled into the conversation before its compaction is met after it
    (NovaCode injects its memories again on the next request, N-COMP-12; issue #45). Then a new launch and one short
    turn: a new conversation recalls the memories on disk as a new process would (nothing injected in it yet)."""
    b = conv.ConversationBuilder()
    b.start_session()
    for t, (category, said) in enumerate(MEMORY_FACTS):
        b.user(_scale(300, window), 90 + t, said=said)
        b.fact(f"kit_memory_{t}", category, said)
        b.call(conv.Turn(text=_scale(600 + 11 * t, window)))
        b._tick(60)   # the user reads the answer: what was extracted from it is on disk by the next message
    b.user(_scale(200, window), 95)
    b._tick(30)   # a recall started with the message is ready by the work it asked for
    for k in range(20):
        b.call(conv.Turn(calls=(conv.ToolCall("Read" if k % 2 == 0 else "Bash", _scale(3_500, window), seed=980 + k),)))
    b.call(conv.Turn(text=_scale(300, window)))
    b.end_session()
    # a new launch ten minutes later: a new process recalls from disk what the last one kept (built anew there, the
    # strategy must send what one instance throughout sends: ``deterministic``)
    b.start_session(pause=600.0)
    b.user(_scale(200, window), 97)
    b._tick(30)
    b.call(conv.Turn(text=_scale(300, window)))
    b.end_session()
    return b.trace()


def small_reads_then_idle(window: int = BASE_WINDOW, edges=()) -> tr.Trace:
    """A request, thirty reads of 1,100 characters each (over on_demand_reading's 1,000-character floor for a pointer,
    which does not scale with the window; about 9,400 tokens, past its trigger of 4,800 at 32k) and an answer; the user
    writes again after fifteen minutes (past twice its 5-minute cold cache) and two more reads follow: a round replaces the
    oldest reads until the rest fit its 1,600 tokens, about five of them, where reads of several thousand characters
    leave any round only the protected newest (issue #45)."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(_scale(300, window), 120)
    for k in range(30):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", 1_100, seed=1_200 + k),)))
    b.call(conv.Turn(text=_scale(300, window)))
    b._tick(900)
    b.user(_scale(200, window), 121)
    for k in range(2):
        b.call(conv.Turn(calls=(conv.ToolCall("Read", 1_100, seed=1_240 + k),)))
    b.call(conv.Turn(text=_scale(300, window)))
    b.end_session()
    return b.trace()


def _tool_turns(window: int, *, turns: int, calls: int, size: int, seed: int, stride: int, user_seed: int,
                tool: Callable[[int], str]) -> tr.Trace:
    """A request, then ``turns`` user turns of ``calls`` single tool calls each (``tool(k)`` the k-th's tool, its
    result ``size`` characters at 32k, seeded ``seed + stride × turn + k``), each turn ending in a short answer."""
    b = conv.ConversationBuilder()
    b.start_session()
    b.user(300, user_seed)
    for t in range(turns):
        for k in range(calls):
            b.call(conv.Turn(calls=(conv.ToolCall(tool(k), _scale(size, window), seed=seed + stride * t + k),)))
        b.call(conv.Turn(text=200))
        b.user(200, user_seed + 1 + t)
    b.call(conv.Turn(text=200))
    b.end_session()
    return b.trace()


def _found(name: str) -> Callable[..., tr.Trace | None]:
    def load(window: int, edges=()) -> tr.Trace | None:
        path = FOUND / f"{name}.jsonl"
        return tr.load(path) if window == BASE_WINDOW and path.is_file() else None
    return load


# name -> (builder(window, edges), dense); edges: the strategy's own clock edges (clock.own_edges)
SCENARIOS: dict[str, tuple[Callable[..., tr.Trace | None], bool]] = {
    "dense_step": (dense_step, True),
    "dense_resume": (dense_resume, True),
    "clear_then_subagent": (clear_then_subagent, False),
    "clear_then_crash": (clear_then_crash, False),
    "crash_mid_results": (crash_mid_results, False),
    "spans_across_resume": (spans_across_resume, False),
    "heavy_tools": (heavy_tools, False),
    "long_turns": (long_turns, False),
    "subagent_after_clearing": (_found("subagent_after_clearing"), False),
    "parallel_results": (parallel_results, False),
    "clock_edges": (clock_edges, False),
    "empty_results_tail": (empty_results_tail, False),
    "cleared_after_sent": (cleared_after_sent, False),
    "fresh_conversations": (fresh_conversations, False),
    "long_thinking": (long_thinking, False),
    "day_long_launch": (day_long_launch, False),
    "subagent_larger_than_parent": (subagent_larger_than_parent, False),
    "thinking_then_small_results": (thinking_then_small_results, False),
    "failures_apart": (failures_apart, False),
    "short_exchanges": (short_exchanges, False),
    "memory_then_compaction": (memory_then_compaction, False),
    "small_reads_then_idle": (small_reads_then_idle, False),
    "copied_history": (copied_history, False),
}
# the side calls a scenario fails (the n-th summary and verify calls, counted from 0; RunConfig.fail_calls), as the
# generated sessions fail them (machine.FAILING_KINDS)
SCENARIO_FAILS: dict[str, tuple[int, ...]] = {"failures_apart": (0, 2, 4)}


def build(name: str, window: int, cls=None, params: Mapping[str, Any] | None = None) -> tr.Trace | None:
    """Scenario ``name`` at ``window`` for strategy ``cls`` run with ``params`` (whose own clock, if it
    declares one, the clock-edge scenario crosses too); None when it does not apply."""
    edges = ()
    if cls is not None:
        from ctxsim.harness.testing.clock import own_edges
        from ctxsim.harness.testing.declared import declared

        edges = own_edges(declared(cls, params).epochs)
    return SCENARIOS[name][0](window, edges)


def check_scenario(name: str, cls, params: Mapping[str, Any], window: int, promised: frozenset[str],
                   model: str) -> tuple[tr.Trace | None, list]:
    """The violations ``cls`` commits on scenario ``name`` (a strategy raising is ``crash``); no
    trace when the scenario does not apply (a found session at another window)."""
    from ctxsim.harness.replay.engine import RunConfig
    from ctxsim.harness.testing.declared import fresh_at_launches
    from ctxsim.harness.testing.invariants import Violation, check
    from ctxsim.harness.testing.recording import record

    dense = SCENARIOS[name][1]
    trace = build(name, window, cls, params)
    if trace is None:
        return None, []
    held = promised - {"estimate"} if dense else promised
    fails = SCENARIO_FAILS.get(name, ())
    cfg = RunConfig(model=model, window=window, seed=0, fail_calls={k: fails for k in (SUMMARY, VERIFY)} if fails else {})
    try:
        rec = record(trace, cls, dict(params), cfg)
    except Exception as e:  # noqa: BLE001 - the strategy raised: a finding, reported as the kit does
        from ctxsim.harness.testing.crash import crash_site

        at = crash_site(e)
        return trace, [Violation("crash", -1, "", f"{type(e).__name__}: {e}" + (f" at {at}" if at else ""))]
    try:
        found = check(rec, held)
        if not found and "deterministic" in held and fresh_at_launches(cls, params, window):
            found = _kept_across_launches(trace, cls, params, cfg, rec)
        return trace, found
    finally:
        shutil.rmtree(rec.session_dir, ignore_errors=True)


def _kept_across_launches(trace: tr.Trace, cls, params: Mapping[str, Any], cfg, rec) -> list:
    """``deterministic`` on a scenario with a new launch after the first: the run again with the strategy built anew at
    each new launch (:func:`ctxsim.harness.testing.recording.fresh_at_launch`, a new process of the agent) sends the
    same requests as ``rec`` (one instance throughout); the first that differs, reported."""
    from ctxsim.harness.testing.determinism import Canon, first_difference
    from ctxsim.harness.testing.invariants import Violation
    from ctxsim.harness.testing.recording import fresh_at_launch, record, relaunched_note

    if sum(isinstance(e, tr.SessionStart) and not e.resume for e in trace.events) < 2:
        return []
    try:
        again = record(trace, fresh_at_launch(cls), dict(params), cfg)
    except Exception as e:  # noqa: BLE001 - raised only when built anew: a finding of the same kind
        return [Violation("deterministic", -1, "", f"built anew at a new launch, the strategy raised {type(e).__name__}: "
                          f"{e} (one instance throughout did not)")]
    try:
        found = first_difference(rec.requests, again.requests, Canon(), Canon(str(again.session_dir), str(rec.session_dir)))
        if found is None:
            return []
        at, diff = found
        note = relaunched_note(rec.entries, at) if at is not None else ""
        return [Violation("deterministic", at.call if at is not None else -1, at.kind if at is not None else "",
                          diff + (note or " (the second replay built the strategy anew at each new launch)"))]
    finally:
        shutil.rmtree(again.session_dir, ignore_errors=True)

"""NovaCode, the seed's context system, as a ctxsim strategy (spec/novacode.md), every layer on by
default (``--set memory=false`` and the like turn one off).

A thin wiring of the layers, each in its own module:

* ``spill``      layer 1: large tool results to real files before they enter history (N-SPILL-*),
                 under each launch's session directory ``transcripts/<launch>/tool-results/``;
* ``accounting`` the real-usage anchor plus a 3.5 chars/token estimate (N-COMP-5);
* ``compaction`` the triggers and the tail choice, pure (N-COMP-1…3, 6…8);
* ``breaker``    the circuit breaker (N-COMP-4);
* ``restore``    the restore attachment (N-COMP-11);
* ``caching``    the three cache breakpoints (N-CACHE-1…3);
* ``environment`` the environment block, resident, rendered again after a compaction (N-COMP-12);
* ``transcript`` (memory layer 3) the session transcript whose path the summary carries (N-COMP-10);
* ``memory_layer`` (memory layers 1–2: instruction files, auto memory), built when ``memory`` or
  ``instructions`` is on.

Compaction happens at the model call that first sees the estimate reach a trigger line: the summary
side call reuses the conversation's cached prefix (same system, tools and messages, the same
breakpoints; the engine appends the instructions as a final user message), and on success history
becomes summary message + restore attachment + verbatim tail (N-COMP-9); the memories injected so
far and a fresh environment block go into that very request (N-COMP-12), which declares the
rewrite (``Request.rewrite``). A prompt-too-long 400 forces the same compaction, bypassing the
breaker as the hard line does, on the API's own count (:meth:`NovaCode.on_rejected`).

Readings where the seed is silent (documented where they live): the summary request stops at the
tail boundary when the whole conversation would not fit the effective window (it loses nothing:
the tail stays verbatim; ``summary_request_without_tail``); memories re-injected after a compaction
are the 5 most recently injected (one injection block, N-MEM-5); the environment block's items.

Beyond the seed (each a parameter, each counted in ``strategy_counters``): ``calibrate_unanchored``
(on: an estimate with no anchor uses the conversation's measured characters per token, so the hard
line holds when 3.5 runs low; accounting.py); ``calibrate_budgets`` (on: the verbatim tail, the
restore attachment and the summary request sized at the lowest characters per token measured, not
3.5, so a forced compaction on dense output shrinks the request; accounting.py, #29); ``summary_input_fit`` (off: elide the newest summarised
messages from a summary request that still would not fit, losing their text); ``summary_input_last_resort``
(on: the same elision only when that request would pass the window itself, which the API refuses:
a message over the tail cap jumped past the hard line, as spill-heavy's bursts of results under
N-SPILL-2's 200,000-character budget do at ~2.7 chars/token; and once more, fitted to the size the API
states, when it refuses a summary request the estimate put within the window); ``restore_skip_in_tail``
(off: N-COMP-11 literally restores the 5 most recently read files); a product no smaller than what
it replaces is a failed compaction (``compaction_failed_no_shrink``); an isolated subtask (a
sub-agent) runs in a context of its own, with its own transcript.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Literal

from ctxsim.harness.llm.services import SUMMARY, CallSpec, SideCallFailed
from ctxsim.harness.model.conversation import Breakpoint, History, Message, Request, Usage
from ctxsim.strategies.base import (
    CallInfo,
    Rejection,
    Strategy,
    StrategyConfig,
    StrategyEnv,
    answer_dangling,
    check_room,
)
from ctxsim.strategies.novacode import caching, restore
from ctxsim.strategies.novacode import compaction as rules
from ctxsim.strategies.novacode import memory as mem
from ctxsim.strategies.novacode import spill as spilling
from ctxsim.strategies.novacode.accounting import (
    CHARS_PER_TOKEN,
    MIN_BUDGET_CPT,
    TokenLedger,
    chars_to_tokens,
    message_chars,
    message_tokens,
    prompt_chars,
)
from ctxsim.strategies.novacode.breaker import BREAKER_FAILURES, CircuitBreaker
from ctxsim.strategies.novacode.departures import SEED_READINGS
from ctxsim.strategies.novacode.environment import EPOCH_S as ENV_EPOCH_S
from ctxsim.strategies.novacode.environment import PLATFORM as ENV_PLATFORM
from ctxsim.strategies.novacode.environment import EnvironmentInjection
from ctxsim.strategies.novacode.lock import DEFAULT_STALE_AFTER_S
from ctxsim.strategies.novacode.transcript import TRANSCRIPT_FILE, Transcript
from pydantic import Field, model_validator

LAUNCHES_DIR = "transcripts"  # N-TRANS-1: <run>/transcripts/<launch>/ is each launch's session directory

# The summary's sections: the seed names none; these are the ones reported for Claude Code, the
# closest real relative (peers.md), and what real compaction requests ask for
# (traces/real/claude-code/spotter/*/subagents/agent-acompact-*.jsonl).
SUMMARY_SECTIONS = (
    "Primary request and intent",
    "Key technical concepts",
    "Files and code sections",
    "Errors and fixes",
    "Problem solving",
    "All user messages",
    "Pending tasks",
    "Current work",
    "Optional next step",
)

SUMMARY_INSTRUCTIONS = """\
Your task is to create a detailed summary of the conversation so far, so that the work can continue \
without it. {scope}
Capture the user's explicit requests and intent, the decisions taken and why, file names and code \
that matter, every error met and how it was fixed, every user message that is not a tool result, \
and what was being worked on at the end.

Your summary must have these sections, in this order:
{sections}

Answer with the summary only, inside <summary></summary> tags."""

SUMMARY_MESSAGE = """\
This session is being continued from an earlier conversation that ran out of context. The summary \
below covers the earlier part of it; the most recent messages follow verbatim after a restore \
attachment.

{summary}

The full transcript of this session is saved at: {transcript}
Read it back if you need exact details from before this summary."""


# the summary instructions' size with its longest scope line (the summary request's estimate needs it
# before the scope is chosen)
_INSTRUCTIONS_CHARS = len(SUMMARY_INSTRUCTIONS) + 200 + sum(len(s) + 4 for s in SUMMARY_SECTIONS)


def _dir_name(session: str | None) -> str:
    """A session id as a directory name (ids come from logs and may hold any character)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", session or "session")
    return "_" + name if name in (".", "..") else name


def _elided(m: Message, pointer: str) -> Message:
    """A message as the summary request carries it when it is too large to fit: its text blocks
    become a stub naming the transcript; tool_use blocks and ids stay, so pairs stay paired."""
    blocks = tuple(b if b.type == "tool_use" else b.with_text(
        f"[omitted from this summary request: {len(b.text):,} characters; the full text is in the "
        f"session transcript at {pointer}]", elided=True) for b in m.blocks)
    return Message(m.role, blocks, {**m.meta, "elided": True})


class NovaCodeConfig(StrategyConfig):
    """Every number of the seed is a field with the seed's default (spec/novacode.md)."""

    # --- layer 1: spill (N-SPILL-*) -----------------------------------------------------------
    spill: bool = Field(True, description="spill large tool results to files (layer 1)")
    spill_threshold_chars: int = Field(spilling.SPILL_THRESHOLD_CHARS, ge=1,
                                       description="N-SPILL-1: a single result longer than this is spilled")
    spill_preview_chars: int = Field(spilling.PREVIEW_CHARS, ge=0,
                                     description="N-SPILL-1: characters of the result kept in the placeholder")
    spill_budget_chars: int = Field(spilling.AGGREGATE_BUDGET_CHARS, ge=1,
                                    description="N-SPILL-2: aggregate budget of the tool results of one message")
    spill_failure_rate: float = Field(0.0, ge=0.0, le=1.0,
                                      description="N-SPILL-4: injected probability that a spill write fails (seeded)")
    # --- accounting (N-COMP-5) ------------------------------------------------------------------
    chars_per_token: float = Field(CHARS_PER_TOKEN, gt=0.0, le=100.0,
                                   description="N-COMP-5: characters per estimated token after the usage anchor")
    calibrate_unanchored: bool = Field(
        True, description="not in the seed: an estimate with no anchor (a new launch, after a compaction) uses the "
        "characters per token this conversation's last usage measured when lower than chars_per_token, so the "
        "hard line (N-COMP-3) holds when 3.5 runs low on the whole context (accounting.py)")
    calibrate_budgets: bool = Field(
        True, description="not in the seed: the verbatim tail (N-COMP-6), the restore attachment (N-COMP-11) and the "
        "summary request are sized at the lowest characters per token of chars_per_token, the conversation's last "
        "count and its newest text's (accounting.py, budget_cpt), not at chars_per_token: on dense output the "
        "seed's budgets hold 2-4x their tokens and the forced compaction cannot shrink the request (the session "
        "ends at ~1 char/token; at ~2.7, common tool output, the summary request and the main request are both "
        "refused as too long before the reaction recovers: tests/testing/test_dense_step.py) (#29; "
        "false: the seed's 3.5)")
    # --- layer 2: compaction (N-COMP-*) ---------------------------------------------------------
    compaction: bool = Field(True, description="threshold compaction (layer 2)")
    summary_reserve: int = Field(rules.SUMMARY_RESERVE_TOKENS, ge=0,
                                 description="N-COMP-1: tokens of the window reserved for the summary output")
    soft_margin: int = Field(rules.SOFT_MARGIN_TOKENS, ge=0,
                             description="N-COMP-2: soft trigger at effective window minus this")
    hard_margin: int = Field(rules.HARD_MARGIN_TOKENS, ge=0,
                             description="N-COMP-3: hard trigger (bypasses the breaker) at effective window minus this")
    breaker_failures: int = Field(BREAKER_FAILURES, ge=1,
                                  description="N-COMP-4: consecutive failed compactions that open the breaker")
    breaker_reset: Literal["never", "cooldown"] = Field(
        "never", description="N-COMP-4 reading: an open breaker stays open for the session (never) or "
        "allows one attempt after a cool-down (cooldown)")
    breaker_cooldown_s: float = Field(600.0, ge=0.0,
                                      description="cool-down before an open breaker allows an attempt "
                                      "(breaker_reset=cooldown; not in the seed)")
    tail_min_tokens: int = Field(rules.TAIL_MIN_TOKENS, ge=0,
                                 description="N-COMP-6: the verbatim tail holds at least this many tokens")
    tail_min_messages: int = Field(rules.TAIL_MIN_MESSAGES, ge=0,
                                   description="N-COMP-6: the verbatim tail holds at least this many messages")
    tail_max_tokens: int = Field(rules.TAIL_MAX_TOKENS, ge=0,
                                 description="N-COMP-6: the tail never holds more (the cap wins over the minimums)")
    tail_rule: Literal["both", "either"] = Field(
        "both", description="N-COMP-6 reading: both minimums must hold, or either one")
    min_compressible_tokens: int = Field(rules.MIN_COMPRESSIBLE_TOKENS, ge=0,
                                         description="N-COMP-8: give up when the compressible prefix is smaller")
    summary_max_output_tokens: int = Field(rules.SUMMARY_RESERVE_TOKENS, ge=1,
                                           description="max output tokens of the summary call")
    summary_input_fit: bool = Field(
        False, description="not in the seed (off: the seed's behaviour): when the summary request would not fit "
        "the effective window (one message jumped past it), elide the newest messages of the summarised part from "
        "that request, pointing to the transcript; their text is then in neither the summary nor the tail "
        "(counted: summary_input_elided, summary_input_elided_chars)")
    summary_input_last_resort: bool = Field(
        True, description="not in the seed (on: the window promise): when the summary request, already stopped at "
        "the tail boundary, would by the estimate pass the window itself (a message larger than the 40,000-token "
        "tail cap jumped past the hard line, so it is summarised, and the API would refuse the request and end "
        "the session), elide as summary_input_fit does; a request that fits the window is sent whole as the seed "
        "does, and one the API refuses as too long all the same (the estimate short on dense text) is fitted to "
        "the size the API stated and asked once more (counted: summary_input_last_resort, summary_input_elided, "
        "summary_input_elided_chars, summary_refit_after_refusal)")
    restore_max_files: int = Field(restore.RESTORE_MAX_FILES, ge=0,
                                   description="N-COMP-11: most recently read files restored after compaction")
    restore_skip_in_tail: bool = Field(
        False, description="not in the seed (N-COMP-11 alternative): skip files whose latest read is still in the "
        "verbatim tail, restoring the next most recent instead (off: the 5 most recently read, literally)")
    restore_file_tokens: int = Field(restore.RESTORE_FILE_TOKENS, ge=0,
                                     description="per restored file (Claude Code, reported)")
    restore_total_tokens: int = Field(restore.RESTORE_TOTAL_TOKENS, ge=0,
                                      description="all restored files (Claude Code, reported)")
    restore_skill_tokens: int = Field(restore.RESTORE_SKILL_TOKENS, ge=0,
                                      description="activated skills' procedures (Claude Code, reported)")
    # --- caching (N-CACHE-*) --------------------------------------------------------------------
    cache_breakpoints: bool = Field(True, description="N-CACHE-1: breakpoints on tools, system, last user message")
    cache_ttl: Literal["5m", "1h"] = Field("5m", description="TTL of the cache breakpoints")
    # --- memory seams (sections 3–5, strategies/novacode/memory_layer.py) -------------------------
    transcript: bool = Field(True, description="N-COMP-10 / N-TRANS: keep the session transcript on disk")
    open_loop_thinking: bool = Field(
        True, description="not in the seed (against N-TRANS-3, 'thinking blocks are not written to disk'): the "
        "thinking of the newest answer that called tools is written to open_loop_thinking.json beside the "
        "transcript, so a resume that continues that tool loop sends it back as the API requires with thinking on; "
        "off: the seed literally, no thinking on disk")
    memory: bool = Field(True, description="auto memory (N-MEM-*): the index resident, recalled injections, "
                         "extraction and consolidation side calls")
    instructions: bool = Field(True, description="instruction files (N-INST-*), resident in every request")
    environment: bool = Field(True, description="N-COMP-12: the environment block (working directory, git state, "
                              "platform, date), resident, rendered per launch and again after each compaction")
    environment_platform: str = Field(ENV_PLATFORM, min_length=1, max_length=40,
                                      description="platform the environment block names (assumed)")
    environment_epoch_s: float = Field(ENV_EPOCH_S, ge=0.0, le=4_102_444_800.0,
                                       description="Unix time of the trace's t=0, for the block's date (assumed: "
                                       "traces hold relative time)")
    # the memory layers' numbers (read by memory_layer.MemoryParams through the memory_ prefix)
    memory_recall_max: int = Field(mem.RECALL_MAX, ge=0, description="N-MEM-5: memories recalled per turn, at most")
    memory_recall_timeout_s: float = Field(mem.RECALL_TIMEOUT_S, ge=0.0,
                                           description="N-MEM-6: recall prefetch timeout (dropped when late)")
    memory_manifest_max_files: int = Field(mem.MANIFEST_MAX_FILES, ge=0,
                                           description="N-MEM-5: memory files scanned for recall, at most")
    memory_manifest_head_lines: int = Field(mem.MANIFEST_HEAD_LINES, ge=1,
                                            description="N-MEM-5: lines read of each memory file to parse frontmatter")
    memory_index_max_lines: int = Field(mem.INDEX_MAX_LINES, ge=1, description="N-MEM-3: index size limit, lines")
    memory_index_max_bytes: int = Field(mem.INDEX_MAX_BYTES, ge=1, description="N-MEM-3: index size limit, bytes")
    memory_consolidate_min_interval_s: float = Field(mem.CONSOLIDATE_MIN_INTERVAL_S, ge=0.0,
                                                     description="N-MEM-7: time since the last consolidation")
    memory_consolidate_min_sessions: int = Field(mem.CONSOLIDATE_MIN_SESSIONS, ge=0,
                                                 description="N-MEM-7: sessions since the last consolidation")
    memory_consolidate_scan_throttle_s: float = Field(mem.CONSOLIDATE_SCAN_THROTTLE_S, ge=0.0,
                                                      description="N-MEM-7: consolidation scans at most this often")
    memory_lock_stale_after_s: float = Field(DEFAULT_STALE_AFTER_S, ge=0.0,
                                             description="N-MEM-7: a consolidation lock older than this is taken over")

    @model_validator(mode="after")
    def _lines_in_order(self) -> NovaCodeConfig:
        if self.soft_margin < self.hard_margin:
            raise ValueError(f"soft_margin ({self.soft_margin}) must be >= hard_margin ({self.hard_margin}): "
                             "the soft line comes before the hard one")
        return self


class NovaCode(Strategy):
    name = "novacode"
    keeps_path_back = True  # what leaves the window leaves a summary or a path back (the seed's principle)
    summary = ("the seed, every layer: spill, anchored accounting, threshold compaction with breaker, 3 cache "
               "breakpoints, instruction files, auto memory, transcripts, environment block")
    Config = NovaCodeConfig
    manages_window = True  # the hard line (N-COMP-3) keeps requests under the window
    seed_readings = SEED_READINGS  # readings and constants where the seed is silent (ctxsim.strategies.departures)
    # the spec's absolute numbers (tuned for 200k) that the property kit scales to its small window
    CHECK_SCALED = ("summary_reserve", "soft_margin", "hard_margin", "tail_min_tokens", "tail_max_tokens",
                    "min_compressible_tokens", "summary_max_output_tokens", "restore_file_tokens",
                    "restore_total_tokens", "restore_skill_tokens", "spill_threshold_chars",
                    "spill_budget_chars", "spill_preview_chars")

    @classmethod
    def compaction_tail(cls, config: NovaCodeConfig, window: int, max_output_tokens: int) -> tuple:
        """N-COMP-6: the verbatim tail holds at least ``tail_min_tokens`` and ``tail_min_messages`` (both, the
        spec's reading; with ``tail_rule="either"`` one of them, so no least is declared) and never more than
        ``tail_max_tokens``, which wins over the minimums; sized at the strategy's own estimate of tokens."""
        both = config.tail_rule == "both"
        return ((config.tail_min_tokens if both else 0, config.tail_max_tokens, "tokens"),
                (config.tail_min_messages if both else 0, None, "messages"))

    @classmethod
    def reinjects_after_compaction(cls, config: NovaCodeConfig) -> tuple[str, ...]:
        """N-COMP-12: the memory markers are reset by a compaction and the memories injected so far go in again on the
        very next request (memory_layer.on_compacted)."""
        return ("memory",) if config.memory else ()

    @classmethod
    def keeps_results_whole(cls, config: NovaCodeConfig) -> tuple[int, int] | None:
        """N-SPILL-1 and N-SPILL-2: a result spills past ``spill_threshold_chars``, or while its message's results
        pass ``spill_budget_chars``; within both it goes whole (with ``spill`` off, always)."""
        return (config.spill_threshold_chars, config.spill_budget_chars) if config.spill else None

    @classmethod
    def spills_largest_first(cls, config: NovaCodeConfig) -> bool:
        """N-SPILL-2: a message over its budget spills its results largest first, one at a time."""
        return config.spill

    @classmethod
    def compaction_tail_calibrated(cls, config: NovaCodeConfig) -> bool:
        """``calibrate_budgets`` (beyond the seed): the tail is sized at the lowest of 3.5 characters a token, the
        conversation's measured figure and its newest text's (accounting.Ledger.budget_cpt)."""
        return config.calibrate_budgets

    @classmethod
    def compaction_tail_shortest(cls, config: NovaCodeConfig) -> bool:
        """N-COMP-6's walk stops as soon as both minimums hold (N-COMP-7 then adds the call a result answers)."""
        return config.tail_rule == "both"

    @classmethod
    def check_params(cls, window: int) -> dict[str, int]:
        """For the property kit's small windows (docs/writing-a-strategy.md section 5): the spec's
        absolute numbers scaled by window / 200k, so the same rules act at the same relative points.
        Read from ``cls.Config``, so a subclass (another name, other defaults) is scaled alike."""
        fields = cls.Config.model_fields
        return {n: max(1, int(fields[n].default * window / 200_000)) for n in cls.CHECK_SCALED}

    def __init__(self, config: NovaCodeConfig, env: StrategyEnv) -> None:
        super().__init__(config, env)
        c = self.config = config
        self.ledger = self._new_ledger()
        self.breaker = self._new_breaker()
        self.lines = rules.thresholds(env.window, c.summary_reserve, c.soft_margin, c.hard_margin)
        check_room(self.name, env.window, min(self.lines.effective, self.lines.hard),
                   {"summary_reserve": c.summary_reserve, "soft_margin": c.soft_margin, "hard_margin": c.hard_margin})
        self.reads = restore.ReadTracker()
        self.readback_ids: set[str] = set()
        self.launches = env.session_dir / LAUNCHES_DIR  # every launch's session directory (N-TRANS-1)
        self._launch_dirs: dict[str | None, Path] = {}    # session -> its directory under launches
        self._spill_dirs: dict[str | None, Path] = {}     # session -> its spill directory in that
        self.session: str | None = None
        self.transcript: Transcript | None = None
        self.environment = None
        if c.environment:
            self.environment = EnvironmentInjection(
                Path(env.project_dir) if env.project_dir is not None else env.session_dir / "project",
                c.environment_platform, c.environment_epoch_s, top=env.session_dir)
        self.memory = None
        if c.memory or c.instructions:
            from ctxsim.strategies.novacode.memory_layer import MemoryLayer

            self.memory = MemoryLayer(c, env, counters=self.counters.extra)
        self._epoch = 0  # bumped on every non-append rewrite of history
        self._resident_key: tuple[bytes, ...] | None = None  # the last request's resident block
        self._req: tuple[tuple[bytes, ...], int, int, History] | None = None
        # parent contexts of the open subtask spans (None for a span that is not isolated)
        self._saved: list[tuple[TokenLedger, restore.ReadTracker, object, str | None] | None] = []
        self._sub_id: str | None = None

    def _new_ledger(self) -> TokenLedger:
        return TokenLedger(self.config.chars_per_token, self.config.calibrate_unanchored)

    def _new_breaker(self) -> CircuitBreaker:
        c = self.config
        return CircuitBreaker(c.breaker_failures, c.breaker_reset, c.breaker_cooldown_s)

    # --- history bookkeeping ------------------------------------------------------------------------
    def _append(self, message: Message) -> None:
        self.history = self.history.append(message)
        if self.config.transcript:
            self._transcript().append(message)

    def _replace_history(self, history: History) -> None:
        self.history = history
        self._epoch += 1

    def _transcript(self) -> Transcript:
        if self.transcript is None:
            name = _dir_name(self.session)
            if self._saved and self._sub_id is not None:  # a sub-agent's own transcript, beside its parent's
                name = f"{name}.subagent-{_dir_name(self._sub_id)}"
            self.transcript = Transcript(self.launches, name, self.env.now,
                                         open_loop_thinking=self.config.open_loop_thinking)
        return self.transcript

    def _launch_dir(self) -> Path:
        """This launch's session directory (N-TRANS-1), where its transcript and its spill files
        live (N-SPILL-1: ``<session dir>/tool-results/<tool_use_id>.txt``). A sub-agent's spills go
        to its launch's directory: it runs in the same process. The same Path object for a session
        (asked for twice a call: building it was 4,270 pathlib joins on a 2,200-call session)."""
        d = self._launch_dirs.get(self.session)
        if d is None:
            d = self._launch_dirs[self.session] = self.launches / _dir_name(self.session)
        return d

    def _spill_dir(self) -> Path:
        """``_launch_dir() / SPILL_DIR`` (N-SPILL-1), one Path a session like it (asked every call)."""
        d = self._spill_dirs.get(self.session)
        if d is None:
            d = self._spill_dirs[self.session] = self._launch_dir() / spilling.SPILL_DIR
        return d

    # --- sub-agents: an isolated subtask runs in its own context --------------------------------------
    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        """An isolated subtask is a sub-agent with a context of its own (the base swaps in a fresh
        history): it gets its own usage anchor, read tracker and transcript, so its messages never
        enter the parent's transcript (a resume of the parent must not see them) and the parent's
        anchor still describes the parent's history when the span ends."""
        if isolated:
            self._saved.append((self.ledger, self.reads, self.transcript, self._sub_id))
            parent, self.ledger = self.ledger, self._new_ledger()
            self.ledger.observed_cpt = parent.observed_cpt  # the same process, the same kind of text
            self.ledger.recent_cpt = parent.recent_cpt
            self.reads = restore.ReadTracker()
            self.transcript, self._sub_id = None, id
        else:
            self._saved.append(None)
        super().on_subtask_start(id, description, isolated)
        self._epoch += 1

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        if not self._spans:  # its sub-agent died with its launch (a crash inside the span)
            self.counters.extra["orphan_subtask_ends"] += 1
            return
        super().on_subtask_end(id, conclusion)
        saved = self._saved.pop()
        if saved is not None:
            self.ledger, self.reads, self.transcript, self._sub_id = saved
        self._epoch += 1

    def _unwind_subtasks(self) -> None:
        """A new launch has no open sub-agents: back to the outermost context."""
        while self._spans:
            _, outer = self._spans.pop()
            saved = self._saved.pop()
            if outer is not None:
                self.history = outer
            if saved is not None:
                self.ledger, self.reads, self.transcript, self._sub_id = saved
        self._epoch += 1

    # --- events ---------------------------------------------------------------------------------------
    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        self._unwind_subtasks()
        previous = self.session
        self.session = session
        self.breaker = self._new_breaker()  # N-COMP-4: "for the rest of the session"
        self.ledger.clear()  # a new launch has no usage yet
        if self.environment is not None:
            self.environment.reset()  # a new launch injects its environment afresh
        self.readback_ids.clear()
        root = self.launches
        if (resume and self.config.transcript and previous is not None
                and (root / _dir_name(previous) / TRANSCRIPT_FILE).exists()):
            new_id = session if session != previous else None
            self.transcript, msgs = Transcript.resume(
                root, _dir_name(previous), self.env.now,
                new_session_id=_dir_name(new_id) if new_id is not None else None,
                open_loop_thinking=self.config.open_loop_thinking)
            self._replace_history(History(msgs))
            self.reads.reset()
            self.rewrote = True  # thinking is not persisted (N-TRANS-3): the prefix differs
            ctx = self.transcript.resumed_context
            self.ledger.observed_cpt = None  # a new process: only what is on disk is known
            if ctx is not None:
                self.ledger.measure(ctx["tokens"], ctx["chars"], self.env.system.opaque_tokens)
        elif resume:  # nothing on disk to resume from (no transcript kept, or an empty launch)
            self._epoch += 1
            answered, n = answer_dangling(self.history)  # N-TRANS-5, as the base does
            if n:
                self._append(answered[-1])
                self.counters.extra["synthetic_results"] += n
        else:
            self._replace_history(History())
            self.reads.reset()
            self.ledger.observed_cpt = None  # a new conversation, not measured yet
            self._resident_key = None
            self.transcript = None  # the next append opens this launch's transcript
        if self.memory is not None:
            self.memory.on_session_start(session, resume, now)

    def on_session_end(self, session: str, now: float) -> None:
        if self.memory is not None:
            self.memory.on_session_end(session, now)

    def on_user(self, message: Message) -> None:
        self._append(message)
        if self.memory is not None and not self.in_isolated_subtask:
            self.memory.on_user(message, self.env.now())

    def on_tool_results(self, message: Message) -> None:
        originals = {b.id: b.text for b in message.blocks if b.type == "tool_result" and b.id}
        if self.config.spill:
            message = self._spill(message)
        self.reads.on_results(message, len(self.history), originals)
        self._append(message)

    def _spill(self, message: Message) -> Message:
        c = self.config
        rate = c.spill_failure_rate
        fail = (lambda _tid: bool(self.env.rng.random() < rate)) if rate > 0 else None
        ids = {i for i in message.tool_result_ids() if i in self.readback_ids}
        out = spilling.spill_message(message, self._launch_dir(), ids, threshold=c.spill_threshold_chars,
                                     budget=c.spill_budget_chars, preview_chars=c.spill_preview_chars, fail=fail)
        self.counters.spills += len(out.spilled)
        self.counters.readbacks += len(out.readbacks)
        if out.failed:
            self.counters.extra["spill_write_failures"] += len(out.failed)
        if out.not_tried:
            self.counters.extra["spill_not_tried_after_failure"] += len(out.not_tried)  # N-SPILL-4
        return out.message

    def on_response(self, message: Message, usage: Usage | None) -> None:
        spill_dir = self._spill_dir()  # earlier launches' dirs match by name
        for b in message.blocks:
            if b.type == "tool_use" and b.id and spilling.names_spill_file(b.input, spill_dir):
                self.readback_ids.add(b.id)  # N-SPILL-3: its result will be exempt
        self.reads.on_assistant(message)
        chars = None
        if usage is not None:  # the answered request's characters, the answer included
            chars = self.ledger.request_chars(self.history, system=self.env.system, tools=self.env.tools,
                                              prefix=self._resident()) + message.chars
        self.history = self.history.append(message)
        self.ledger.record(usage, len(self.history), chars, self.env.system.opaque_tokens)  # N-COMP-5: the anchor
        if self.config.transcript:
            ctx = {"tokens": self.ledger.anchor, "chars": chars} if chars is not None else None
            self._transcript().append(message, context=ctx)
        if self.memory is not None and not self.in_isolated_subtask:
            self.memory.on_response(message, usage, self.env.now())

    # --- the model call -------------------------------------------------------------------------------
    def build_request(self, call: CallInfo) -> Request:
        self._inject(call.now)
        resident = self._resident()
        if self.config.compaction and self._maybe_compact(call.now, resident):
            # N-COMP-12: the markers were reset; this very request carries the injections again
            # (the memories injected so far, a fresh environment block and memory index)
            self._inject(call.now)
            resident = self._resident()
        key = tuple(m.digest for m in resident)
        if self._resident_key is not None and key != self._resident_key:
            self.rewrote = True  # a new launch re-read the resident block and it changed: a declared break
        self._resident_key = key
        messages = self._request_messages(resident)
        return Request(self.env.system, self.env.tools, messages, self._breakpoints(messages),
                       kind="subagent" if self.in_isolated_subtask else "main",
                       estimated_tokens=self._estimate(resident), rewrite=self._take_rewrite())

    def estimate(self) -> int | None:
        return self._estimate(self._resident())

    # --- a rejected request ---------------------------------------------------------------------------
    on_rejection = ("prompt too long: a compaction forced as at the hard line (N-COMP-3: bypasses the breaker, "
                    "\"rather a failed compaction than a failed request\"), on the API's own count, then a retry; "
                    "the turn errors and the session ends when that cannot shrink the request, and on any other 400 "
                    "(the seed names no reaction to those)")

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        """The API refused the request as too long: it stated the request's size, which re-anchors
        the estimate (N-COMP-5 on the API's count, as a usage would) and measures this conversation's
        characters per token. Then a compaction is forced, bypassing the breaker as the hard line
        does (N-COMP-3); the engine rebuilds and resends the request. No compaction (the prefix is
        under 2,000 tokens, N-COMP-8; the summary failed; it would not shrink): give up. A pairing or
        breakpoint 400 is a bug of the strategy, not a state the seed recovers from: give up."""
        if "overflow" not in rejection.reasons or not self.config.compaction:
            self.counters.extra["rejection_gave_up"] += 1
            return False
        resident = self._resident()
        chars = self.ledger.request_chars(self.history, system=self.env.system, tools=self.env.tools, prefix=resident)
        self.ledger.set_anchor(rejection.tokens, len(self.history), chars, self.env.system.opaque_tokens)
        self.counters.extra["rejection_reactive_compactions"] += 1
        if self._maybe_compact(call.now, resident, force=True):
            return True
        self.counters.extra["rejection_gave_up"] += 1
        return False

    def _inject(self, now: float) -> None:
        """Recalled memories ready by now (N-MEM-5/6), or reset by a compaction (N-COMP-12)."""
        if self.memory is not None and not self.in_isolated_subtask:
            for m in self.memory.injection_messages(now):
                self._append(m)

    def _resident(self) -> list[Message]:
        """Sent before history with every request: the instruction files (N-INST-3), the memory
        index (N-MEM-3), the environment block (environment.py)."""
        out = list(self.memory.resident_messages()) if self.memory is not None else []
        if self.environment is not None:
            out.append(self.environment.current(self.env.now()))
        return out

    def _estimate(self, resident: list[Message]) -> int:
        return self.ledger.estimate(self.history, system=self.env.system, tools=self.env.tools, prefix=resident)

    @classmethod
    def restores_recent_reads(cls, config: NovaCodeConfig) -> tuple[int, tuple[str, ...], tuple[str, ...]] | None:
        """N-COMP-11: the 5 files read most recently, whether or not still in the tail (not with the labelled
        ``restore_skip_in_tail``, which passes over those)."""
        if config.restore_skip_in_tail or not config.restore_max_files:
            return None
        return config.restore_max_files, restore.READ_TOOLS, restore.PATH_KEYS

    @classmethod
    def restores_file_chars(cls, config: NovaCodeConfig) -> int | None:
        """N-COMP-11: each restored file is its last read's content, clipped to ``restore_file_tokens`` at the budgets'
        rate, never under MIN_BUDGET_CPT characters a token (accounting.TokenLedger.budget_cpt)."""
        if cls.restores_recent_reads(config) is None or not config.restore_file_tokens:
            return None
        return max(1, int(config.restore_file_tokens * min(MIN_BUDGET_CPT, config.chars_per_token)))

    @classmethod
    def estimates_from_usage(cls, config) -> float:
        """N-COMP-5: the last usage (input and output) plus the history after the answer at ``chars_per_token``."""
        return config.chars_per_token

    @classmethod
    def cache_marks(cls, config) -> tuple[str, ...]:
        return ("tools", "system", "last_user") if config.cache_breakpoints else ()   # N-CACHE-1

    @classmethod
    def cache_marks_ttl(cls, config: NovaCodeConfig) -> str | None:
        return config.cache_ttl if config.cache_breakpoints else None   # N-CACHE-1, at the configured TTL

    def _breakpoints(self, messages: History):
        if not self.config.cache_breakpoints:
            return ()
        return caching.breakpoints(messages, self.config.cache_ttl, tools=len(self.env.tools) > 0,
                                   system=bool(self.env.system.blocks) or self.env.system.opaque_tokens > 0)

    def _request_messages(self, resident: list[Message]) -> History:
        """Resident messages (instruction files, N-INST-3) then history; extended incrementally so
        nothing is re-hashed per call."""
        if not resident:
            return self.history
        key = tuple(m.digest for m in resident)
        if self._req is not None:
            rkey, epoch, n, req = self._req
            if rkey == key and epoch == self._epoch and n <= len(self.history):
                req = req.extend(self.history[n:])
                self._req = (key, self._epoch, len(self.history), req)
                return req
        req = History([*resident, *self.history])
        self._req = (key, self._epoch, len(self.history), req)
        return req

    # --- compaction -----------------------------------------------------------------------------------
    def _maybe_compact(self, now: float, resident: list[Message], force: bool = False) -> bool:
        """Compact when the estimate reaches a line (``force``: as at the hard line, whatever the
        estimate: the reaction to a prompt-too-long 400). True when history was compacted."""
        c = self.config
        est = self._estimate(resident)
        fired = "hard" if force else rules.trigger(est, self.lines)
        if fired == "none":
            return False
        if fired == "soft" and not self.breaker.allows(now):
            self.counters.extra["compaction_skipped_breaker_open"] += 1  # N-COMP-4
            return False
        cpt = self._budget_cpt()
        choice = rules.select_tail(
            [message_tokens(m, cpt) for m in self.history],
            [m.has_tool_result for m in self.history],
            c.tail_min_tokens, c.tail_min_messages, c.tail_max_tokens, c.tail_rule)
        if not rules.worth_compacting(choice, c.min_compressible_tokens):
            self.counters.extra["compaction_gave_up_small_prefix"] += 1  # N-COMP-8
            return False
        self.counters.compactions_attempted += 1
        try:
            text = self._summarise(choice, resident, fired, est)
        except SideCallFailed as e:
            self._failed(now, e.reason)
            return False
        return self._apply(choice, text, est, now, resident)

    def _summarise(self, choice: rules.TailChoice, resident: list[Message], fired: str, est: int) -> str:
        """The summary side call, built like the main request so it reads the cached prefix.

        When that whole request would not fit the effective window (one message jumped past the
        hard line, or the API refused the main request as too long), the request stops at the tail
        boundary: only the compressible prefix is sent, which is all the summary covers; the tail
        stays verbatim in history and loses nothing. The seed does not say what the summary request
        holds; this is the reading under which a summary of the prefix can always be asked for
        when the prefix itself fits (counted: summary_request_without_tail)."""
        c = self.config
        messages = self._request_messages(resident)
        kept = len(self.history) - choice.boundary
        end = len(self.history)
        cpt = self._budget_cpt()
        if c.calibrate_budgets and cpt < c.chars_per_token:
            # not in the seed (calibrate_budgets): the messages since the last count at the budgets' rate, so a
            # step of dense output (~2.7 chars/token is common) that the 3.5 estimate put under the window
            # does not leave the tail in a summary request the API refuses as too long (#29)
            est = max(est, self.ledger.estimate(self.history, system=self.env.system, tools=self.env.tools,
                                                prefix=resident, cpt=cpt))
        instructions_tokens = chars_to_tokens(_INSTRUCTIONS_CHARS, cpt)
        if kept and est + instructions_tokens > self.lines.effective:
            messages, end = messages.truncate(len(resident) + choice.boundary), choice.boundary
            # N-COMP-5: the tail taken away at the seed's rate, not the budgets' (a dense rate that overstates the
            # tail on purpose, so a budget holds): subtracting an overstated tail understated the rest,
            # and a request the estimate put 300 tokens under the window was refused as too long, the
            # session ending there (issue #45: the kit's window, a dense session, 32,062 > 32,000)
            tail_chars = sum(m.chars for m in self.history[choice.boundary:])
            est -= min(choice.tail_tokens, chars_to_tokens(tail_chars, max(cpt, c.chars_per_token)))
            self.counters.extra["summary_request_without_tail"] += 1
            scope = (f"The newest {kept} message(s) of the conversation are not shown here and will be kept "
                     "verbatim after your summary: summarise everything above.")
        elif kept:
            scope = (f"The last {kept} message(s) will be kept verbatim after your summary: summarise everything "
                     "before them.")
        else:
            scope = "Nothing will be kept verbatim: summarise the whole conversation."
        spec = CallSpec(
            kind=SUMMARY,
            instructions=SUMMARY_INSTRUCTIONS.format(
                scope=scope, sections="\n".join(f"{i}. {s}" for i, s in enumerate(SUMMARY_SECTIONS, 1))),
            sections=SUMMARY_SECTIONS,
            max_output_tokens=c.summary_max_output_tokens,
            params={"summarize_messages": len(resident) + choice.boundary, "kept_messages": kept,
                    "trigger": fired},
        )
        # not in the seed: the request would pass the window whatever it holds of the tail, so the
        # API refuses it and, the forced compaction being the reaction to the main request's refusal
        # too, the session ends; the seed's own request is sent whenever it can fit
        last_resort = (c.summary_input_last_resort and not c.summary_input_fit
                       and est + chars_to_tokens(len(spec.instructions), cpt) > self.env.window)
        if last_resort:
            self.counters.extra["summary_input_last_resort"] += 1
        req = self._summary_request(messages, choice, est, spec, len(resident), end, c.summary_input_fit or last_resort)
        try:
            result = self.env.services.call(req, spec)
        except SideCallFailed as e:
            if e.reason != "prompt_too_long" or not e.tokens or not c.summary_input_last_resort:
                raise
            # not in the seed: the API refused the summary request as too long and stated its size, which
            # the estimate fell short of (text dense in tokens): the whole input is fitted again at that density
            # (the stated size over the refused request's size at the rate it was fitted at) and asked once more.
            # A reactive compaction whose summary was refused ended the session (issue #45: NovaCode and a
            # subclass on a dense session of the kit's random sample, 32,069 > 32,000); fitted to the stated size
            # alone, a request already fitted had the same messages elided and was refused again (32,428 > 32,000)
            self.counters.extra["summary_refit_after_refusal"] += 1
            prompt, opaque = prompt_chars(self.env.system, self.env.tools), self.env.system.opaque_tokens
            sent = opaque + chars_to_tokens(prompt + len(spec.instructions) + message_chars(req.messages), cpt)
            scale = max(1.0, e.tokens / max(1, sent))
            whole = opaque + chars_to_tokens(prompt + message_chars(messages), cpt)
            req = self._summary_request(messages, choice, math.ceil(whole * scale), spec, len(resident), end, True,
                                        scale)
            result = self.env.services.call(req, spec)
        if result.late:
            raise SideCallFailed("timeout", "summary arrived after its timeout")
        if not result.text.strip():
            raise SideCallFailed("api_error", "empty summary")
        return result.text

    def _summary_request(self, messages: History, choice: rules.TailChoice, est: int, spec: CallSpec, offset: int,
                         end: int, fit: bool, scale: float = 1.0) -> Request:
        """The summary request on ``messages``, fitted to the effective window when ``fit`` (see
        :meth:`_fit_summary_input`; ``scale``: the text's tokens over its estimate)."""
        c = self.config
        breakpoints = self._breakpoints(messages)
        if fit:
            messages, first = self._fit_summary_input(messages, choice, est, spec.instructions, offset, end, scale)
            if first and breakpoints and len(breakpoints) < caching.MAX_BREAKPOINTS:
                # a fourth marker just before the first elided message: the unchanged prefix up to
                # there is still read from the cache written by earlier turns
                breakpoints = (*breakpoints[:-1], Breakpoint(first - 1, c.cache_ttl), breakpoints[-1])
        return Request(self.env.system, self.env.tools, messages, breakpoints, kind=SUMMARY,
                       estimated_tokens=est, max_output_tokens=c.summary_max_output_tokens)

    def _fit_summary_input(self, messages: History, choice: rules.TailChoice, est: int, instructions: str,
                           offset: int, end: int, scale: float = 1.0) -> tuple[History, int | None]:
        """Elide the newest messages of the compressible prefix from the summary request when it
        would not fit the effective window (see :func:`rules.fit_summary_input`). The messages
        before the first elided one are untouched, so the cached prefix is still read. ``end``: the
        history messages the request holds. Returns the request's messages and the request index of
        the first elided message (None: nothing elided)."""
        c = self.config
        budget = self.lines.effective
        cpt = self._budget_cpt()
        excess = est + math.ceil(chars_to_tokens(len(instructions), cpt) * scale) - budget
        if excess <= 0:
            return messages, None
        tokens = [math.ceil(message_tokens(m, cpt) * scale) for m in self.history]
        idx = set(rules.fit_summary_input(tokens, choice.boundary, excess))
        if not idx:
            return messages, None
        self.counters.extra["summary_input_elided"] += len(idx)
        self.counters.extra["summary_input_elided_chars"] += sum(self.history[i].chars for i in idx)
        pointer = str(self._transcript().path) if c.transcript else "(no transcript kept)"
        first = min(idx)
        rest = [_elided(m, pointer) if i in idx else m for i, m in enumerate(self.history[first:end], first)]
        return messages.replace_from(offset + first, rest), offset + first

    def _budget_cpt(self) -> float:
        """Characters per token of the tail, the restore attachment and the summary request (see
        ``calibrate_budgets``); counted when it departs from the seed's figure."""
        cpt = self.ledger.budget_cpt(self.config.calibrate_budgets)
        if cpt < self.config.chars_per_token:
            self.counters.extra["budget_calibrated"] += 1
        return cpt

    def _failed(self, now: float, reason: str) -> None:
        self.counters.compactions_failed += 1
        self.counters.extra[f"compaction_failed_{reason}"] += 1
        if self.breaker.failure(now):
            self.counters.breaker_trips += 1

    def _apply(self, choice: rules.TailChoice, text: str, est: int, now: float, resident: list[Message]) -> bool:
        """N-COMP-9: summary message, restore attachment, verbatim tail; then N-COMP-12.

        A product that would not be smaller than what it replaces (by the strategy's own estimate)
        is not applied and counts as a failed compaction: a compaction that does not shrink the
        context only burns calls (openai/codex #31351, gemini-cli #16213), and the breaker is what
        stops that (N-COMP-4)."""
        c = self.config
        b = choice.boundary
        path = str(self._transcript().path) if c.transcript else "(no transcript kept: transcript=false)"
        summary_msg = Message.user(SUMMARY_MESSAGE.format(summary=text.strip(), transcript=path),
                                   origin="summary", transcript=path)  # N-COMP-10
        restore_msg = restore.restore_attachment(
            self.reads, self.env.tools, b, skip_in_tail=c.restore_skip_in_tail,
            max_files=c.restore_max_files, file_tokens=c.restore_file_tokens,
            total_tokens=c.restore_total_tokens, skill_tokens=c.restore_skill_tokens,
            chars_per_token=self._budget_cpt())
        tail = list(self.history[b:])
        new = History([summary_msg, restore_msg, *tail])
        fresh = self._new_ledger()
        fresh.observed_cpt = self.ledger.observed_cpt
        after = fresh.estimate(new, system=self.env.system, tools=self.env.tools, prefix=resident)
        if after >= est:
            self._failed(now, "no_shrink")
            return False
        self.reads.reindex({i: i - b + 2 for i in range(b, len(self.history))})
        self._replace_history(new)
        if c.transcript:
            self._transcript().compact_boundary(est, summary_msg.text, [restore_msg, *tail])
        self.ledger.clear()  # N-COMP-12: no anchor until the next real usage
        if not self.in_isolated_subtask:  # N-COMP-12: injection markers reset
            if self.memory is not None:
                self.memory.on_compacted()
            if self.environment is not None:
                self.environment.reset()
        self.breaker.success()  # N-COMP-4: a success resets the count
        self.counters.compactions_succeeded += 1
        self.rewrote = True
        return True

"""The Complexity Trap's LLM-summary and hybrid arms: SWE-agent's history processors as the study ran
them, built on the peers' templates.

No agent ships these (they live in the study's fork of SWE-agent), so they are not registered
strategies; :mod:`ctxsim.harness.validation.studies` replays them by class, and ``ctxsim
check-strategy ctxsim.harness.validation.arms:SweAgentProcessors`` holds them to the property kit.

Source: JetBrains-Research/the-complexity-trap (read in the fork Recursive-Safeguarding/the-complexity-trap,
upstream bf15b5f), ``sweagent/agent/history_processors.py``:

* ``SummarizeEveryNTurns`` (``n`` 21, ``keep_last_m_turns`` 10, ``enable_static_checkpointing``): a turn
  is an (action, observation) pair after the system prompt and the problem statement; once the turns
  not yet summarised reach ``n + keep_last_m_turns``, the oldest ``n`` are summarised in one call
  conditioned on the previous checkpoint (or the problem statement), and the history becomes the
  problem statement, the checkpoint ("Checkpoint for the last {n} turns:\\n...") and the kept turns;
* ``LastNObservations`` (``n`` 10, ``polling`` 1): every observation but the newest ``n`` (and the
  instance template, never) reads ``Old environment output: (L lines omitted)``
  (:mod:`ctxsim.strategies.observation_masking`);
* the hybrid runs both in that order (``summarize_n`` 43, ``keep_last_m`` 10, ``mask_n`` 10: the
  configuration whose costs fit the study's 7% / 11%, sources.md).

Two departures, both for the Messages API ctxsim speaks: the checkpoint is a user message (SWE-agent
writes it as an assistant "thought", which would put two assistant turns in a row here), and the
summariser's prompt is this project's wording of the study's OpenHands-style state sections
(USER_CONTEXT, COMPLETED, PENDING, CURRENT_STATE, CODE_STATE, TESTS, CHANGES, DEPS,
VERSION_CONTROL_STATUS). The summary call carries no system prompt and no tools (a separate query).
"""

from __future__ import annotations

from ctxsim.harness.llm.services import SUMMARY, CallSpec
from ctxsim.harness.model.conversation import History, Message, Request, SystemPrompt, ToolSet
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.observation_masking import last_removed_index, masked_history
from ctxsim.strategies.templates import BreakpointStyle, PeerConfig, ThresholdCompactor, transcript_text
from pydantic import Field

STATE_SECTIONS = ("USER_CONTEXT", "COMPLETED", "PENDING", "CURRENT_STATE", "CODE_STATE", "TESTS", "CHANGES",
                  "DEPS", "VERSION_CONTROL_STATUS")  # the study's summary prompt (OpenHands-style state)
SUMMARY_PROMPT = """\
You keep the state of a software engineering agent whose oldest turns are being replaced by a \
checkpoint. Update the context below with the turns that follow into a new checkpoint with these \
sections: {sections}. Keep the task, what is done and pending, file paths, code state, test results \
and errors.

{context}
{turns}"""


class SweAgentProcessorsConfig(PeerConfig):
    summarize_n: int | None = Field(None, ge=1, le=10_000, description="SummarizeEveryNTurns n: turns "
                                    "summarised at once (the study: 21; hybrid 43); None: no summary")
    keep_last_m: int = Field(10, ge=0, le=10_000, description="keep_last_m_turns: newest turns kept "
                             "verbatim (the study: 10)")
    mask_n: int | None = Field(None, ge=1, le=100_000, description="LastNObservations n: observations "
                               "kept verbatim (the study: 10); None: no masking")
    polling: int = Field(1, ge=1, le=10_000, description="LastNObservations polling (1)")
    summary_max_tokens: int = Field(4_096, ge=256, le=200_000, description="output bound of a checkpoint "
                                    "call (assumed)")
    breakpoints: BreakpointStyle = Field("last_two_user", description="SWE-agent's cache markers "
                                         "(CacheControlHistoryProcessor, last two user/tool messages)")


class SweAgentProcessors(ThresholdCompactor):
    """SWE-agent with the study's history processors: a checkpoint every ``summarize_n`` turns and/or
    the newest ``mask_n`` observations verbatim. Not registered (``name`` is its label in a replay)."""

    name = "swe_agent_processors"
    summary = "SWE-agent (The Complexity Trap): SummarizeEveryNTurns and/or LastNObservations"
    on_rejection = "the run exits and submits what it has (SWE-agent agents.py exit_context)"
    Config = SweAgentProcessorsConfig
    check_params = {"summarize_n": 4, "keep_last_m": 2, "mask_n": 3}  # the kit's sessions are ~30 steps

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.checkpoint: Message | None = None

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.checkpoint = None

    # --- SummarizeEveryNTurns ---------------------------------------------------------------------
    def _turns(self) -> list[int]:
        """Index of each turn's action (an assistant message whose results follow it), after the head."""
        h = self.history
        return [i for i in range(self._head(), len(h) - 1) if h[i].role == "assistant" and h[i + 1].has_tool_result]

    def _head(self) -> int:
        """The problem statement (and the checkpoint after it): never part of a turn."""
        h = self.history
        k = 1 if len(h) and h[0].role == "user" and not h[0].has_tool_result and not h[0].meta.get("origin") else 0
        return k + (1 if k < len(h) and h[k].meta.get("origin") == "summary" else 0)

    def should_compact(self, call: CallInfo) -> bool:
        c = self.config
        return c.summarize_n is not None and len(self._turns()) >= c.summarize_n + c.keep_last_m

    def compact(self, call: CallInfo) -> bool | None:
        c = self.config
        turns = self._turns()
        h = list(self.history)
        start, end = self._head(), turns[c.summarize_n] if len(turns) > c.summarize_n else len(h)
        if end <= start:
            return None
        context = (f"<PREVIOUS_CHECKPOINT>\n{self.checkpoint.text}\n</PREVIOUS_CHECKPOINT>" if self.checkpoint
                   else f"<PROBLEM_STATEMENT>\n{h[0].text if h else ''}\n</PROBLEM_STATEMENT>")
        prompt = SUMMARY_PROMPT.format(sections=", ".join(STATE_SECTIONS), context=context,
                                       turns=transcript_text(h[start:end]))
        res = self.side_call(Request(SystemPrompt(), ToolSet(), History([Message.user(prompt)])),
                             CallSpec(kind=SUMMARY, sections=STATE_SECTIONS, max_output_tokens=c.summary_max_tokens))
        if res is None or not res.text.strip():
            return False  # SWE-agent keeps the turns when no checkpoint comes back
        self.checkpoint = Message.user(f"Checkpoint for the last {c.summarize_n} turns:\n{res.text}", origin="summary")
        head = h[:1] if start > 0 and not h[0].meta.get("origin") else []
        self.set_history(History([*head, self.checkpoint, *h[end:]]))
        self.counters.extra["checkpoints"] += 1
        return True

    # --- LastNObservations ------------------------------------------------------------------------
    def prepare(self, call: CallInfo) -> None:
        super().prepare(call)  # the checkpoint first, as the hybrid chains them
        if self.config.mask_n is not None:
            self._mask()

    def _mask(self) -> None:
        h = self.history
        template = len(h) > 0 and h[0].role == "user" and not h[0].has_tool_result
        obs = [(i, j) for i, m in enumerate(h) if m.role == "user" for j, b in enumerate(m.blocks)
               if b.type == "tool_result"]
        count = len(obs) + (1 if template else 0)
        last = last_removed_index(count, self.config.mask_n, self.config.polling)
        lo, hi = (0, last - 1) if template else (1, last)
        todo: dict[int, list[int]] = {}
        for i, j in obs[lo:max(lo, hi)]:
            if not h[i].blocks[j].meta.get("masked"):
                todo.setdefault(i, []).append(j)
        if not todo:
            return
        h = masked_history(h, todo)
        self.counters.extra["masked_observations"] += sum(len(v) for v in todo.values())
        self.set_history(h, estimate=self.rebased_estimate(h))

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        return False

"""observation_masking: keep the last n observations verbatim, mask the older ones (SWE-agent).

Sources: SWE-agent/SWE-agent **v1.1.0** ``sweagent/agent/history_processors.py``
(``LastNObservations``, ``CacheControlHistoryProcessor``), the published configs that use it
(``config/sweagent_0_7/07.yaml``, ``config/coding_challenge.yaml``: ``last_n_observations`` with
``n: 5`` and the default ``polling: 1``; the shipped ``config/default.yaml`` masks nothing and only
marks the last two messages for caching), ``sweagent/agent/agents.py`` (``max_observation_length``,
the context-window exit); JetBrains, "The Complexity Trap" (arXiv 2508.21433), which runs
SWE-agent with M = 10 and finds masking as good as LLM summaries at about half the cost.

The rule, as SWE-agent computes it on every query:

* the observations are the instance template (the first user message) followed by every
  environment output (here: every ``tool_result``), in order;
* ``last_removed = max(0, floor(count / polling) × polling − n)``; observations ``[1, last_removed)``
  are replaced by ``Old environment output: (L lines omitted)``; the first one (the task) never is;
* ``polling`` (SWE-agent's own parameter and meaning): "how many steps to keep between updating the
  number of observations to keep … effectively, we will now keep between n and n + polling
  observations". At 1 the masking boundary moves on every step, so every query rewrites one old
  message and the provider writes the cache again from there on (the class docstring warns that it
  breaks prompt caching); at p it moves once every p steps, trading a little context for cache hits;
* cache markers on the last two user/tool messages (``CacheControlHistoryProcessor``,
  ``last_n_messages`` = 2), none on the system prompt;
* an observation over ``max_observation_length`` = 100,000 characters is clipped when it arrives;
* a request the API rejects as too long ends the run (``exit_context``: SWE-agent submits what it has).

Defaults are the published config's (n 5, polling 1); ``n=10`` is the JetBrains study's M and this
module's default before 2026-12. Everything else (the task, the agent's messages and actions) stays
verbatim.
"""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, History, Message
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.templates import BreakpointStyle, PeerConfig, PeerStrategy
from pydantic import Field

KEEP_OBSERVATIONS = 5  # SWE-agent config/sweagent_0_7/07.yaml: last_n_observations n: 5 (JetBrains M = 10)
POLLING = 1  # LastNObservations.polling default (the published configs do not set it)
MAX_OBSERVATION_CHARS = 100_000  # SWE-agent max_observation_length


def masked_text(original: str) -> str:
    """SWE-agent's placeholder for an elided observation."""
    return f"Old environment output: ({len(original.splitlines())} lines omitted)"


def masked_history(h: History, todo: dict[int, list[int]]) -> History:
    """``h`` with the tool results at ``todo`` ({message: [block, ...]}) replaced by their mask."""
    for i in sorted(todo):
        m = h[i]
        blocks = list(m.blocks)
        for j in todo[i]:
            b = blocks[j]
            blocks[j] = Block.tool_result(b.id or "", masked_text(b.text), b.is_error, masked=True)
        h = h.replace_at(i, Message(m.role, tuple(blocks), m.meta))
    return h


def clipped_text(original: str, limit: int) -> str:
    """SWE-agent's clip of an over-long observation (its truncated-observation template)."""
    if len(original) <= limit:
        return original
    elided = len(original) - limit
    return (f"{original[:limit]}<response clipped><NOTE>Observations should not exceed {limit} characters. "
            f"{elided} characters were elided. Please try a different command that produces less output "
            "or use head/tail/grep/redirect the output to a file. Do not use interactive pagers.</NOTE>")


def last_removed_index(count: int, n: int, polling: int) -> int:
    """SWE-agent ``_get_omit_indices``: observations ``[1, this)`` are masked (``count`` includes
    the instance template as observation 0)."""
    if n <= 0 or polling <= 0:
        raise ValueError("n and polling must be positive")
    return max(0, (count // polling) * polling - n)


class ObservationMaskingConfig(PeerConfig):
    n: int = Field(KEEP_OBSERVATIONS, ge=1, le=100_000, description="observations kept verbatim (SWE-agent's "
                   "published config: 5; JetBrains M = 10, this module's older default)")
    polling: int = Field(POLLING, ge=1, le=10_000, description="SWE-agent polling: update the number of "
                         "observations kept once every this many steps (keeps between n and n + polling; "
                         "1 rewrites an old message on every call)")
    max_observation_chars: int | None = Field(MAX_OBSERVATION_CHARS, ge=100, le=100_000_000,
                                              description="clip an observation longer than this when it "
                                              "arrives (SWE-agent max_observation_length); None: never")
    breakpoints: BreakpointStyle = Field("last_two_user", description="cache markers: SWE-agent's last two "
                                         "user/tool messages by default")


class ObservationMasking(PeerStrategy):
    name = "observation_masking"
    summary = "SWE-agent LastNObservations: keep the last 5 observations, older ones → 'Old environment output'"
    on_rejection = "the run exits and submits what it has (SWE-agent agents.py exit_context)"
    Config = ObservationMaskingConfig
    keeps_replacements = True  # a result cleared or masked keeps its placeholder (the kit's replaced_once)

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.masked = 0  # tool-result observations masked so far in this history (they are the oldest)

    @classmethod
    def keeps_recent_tool_uses(cls, config) -> int:
        # last_removed = floor(count / polling) x polling - n <= count - n: the newest n observations
        # (n to n + polling - 1) are never masked (history_processors.py LastNObservations)
        return config.n

    @classmethod
    def clears_all_but_recent(cls, config) -> tuple[str, ...] | None:
        # polling 1: last_removed = count - n, every observation but the newest n masked at each query (every
        # tool's alike); a larger polling keeps between n and n + polling - 1: no promise of all
        return () if config.polling == 1 else None

    @classmethod
    def clears_above(cls, config) -> int | None:
        # polling 1: the boundary moves on every query, whatever the prompt's size: every request masks all but the
        # newest n (in a sub-agent's own conversation too: its count starts from its own task)
        return 0 if config.polling == 1 else None

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.masked = 0

    def on_subtask_start(self, id: str, description: str, isolated: bool) -> None:
        if isolated:
            self._outer_masked = getattr(self, "_outer_masked", []) + [self.masked]
            self.masked = 0
        super().on_subtask_start(id, description, isolated)

    def on_subtask_end(self, id: str, conclusion: str) -> None:
        isolated = self.in_isolated_subtask and self._spans and self._spans[-1][1] is not None
        super().on_subtask_end(id, conclusion)
        if isolated:
            self.masked = self._outer_masked.pop()

    def on_tool_results(self, message: Message) -> None:
        limit = self.config.max_observation_chars
        if limit is not None and any(b.type == "tool_result" and len(b.text) > limit for b in message.blocks):
            blocks = []
            for b in message.blocks:
                if b.type == "tool_result" and len(b.text) > limit:
                    self.counters.extra["clipped_observations"] += 1
                    b = b.with_text(clipped_text(b.text, limit), clipped=True)
                blocks.append(b)
            message = Message(message.role, tuple(blocks), message.meta)
        super().on_tool_results(message)

    def _observations(self) -> tuple[bool, list[tuple[int, int]]]:
        """(is the first message the task?, positions (message, block) of every tool result)."""
        h = self.history
        template = len(h) > 0 and h[0].role == "user" and not h[0].has_tool_result
        obs = [(i, j) for i, m in enumerate(h) if m.role == "user" for j, b in enumerate(m.blocks)
               if b.type == "tool_result"]
        return template, obs

    def prepare(self, call: CallInfo) -> None:
        template, obs = self._observations()
        count = len(obs) + (1 if template else 0)
        last = last_removed_index(count, self.config.n, self.config.polling)
        # positions in `obs` to mask: SWE-agent masks observations [1, last) of the list that starts
        # with the template; without a template the first tool result plays its part (never masked)
        lo, hi = (0, last - 1) if template else (1, last)
        want = max(0, hi - lo)
        if want <= self.masked:
            return
        todo: dict[int, list[int]] = {}
        for i, j in obs[lo + self.masked: lo + want]:
            todo.setdefault(i, []).append(j)
        h = masked_history(self.history, todo)
        self.counters.extra["masked_observations"] += want - self.masked
        self.masked = want
        # the anchored estimate is re-based: what was masked no longer counts, at the density measured
        self.set_history(h, estimate=self.rebased_estimate(h))

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        return False

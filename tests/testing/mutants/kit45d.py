"""Issue #45, fourth round: bug kinds a blind held-out set (set 9) found the kit blind to, written afresh
(the held-out mutants themselves stay outside the repository): a compaction that re-sends an older
request than the one in hand, a size limit in bytes tested on characters, call ids a strategy numbers
afresh at each launch, an estimate that counts the system text but not the tools or the opaque
prefix, and a clearing that keeps one recent tool use fewer than configured (set 10). Each beside its
correct twin, the registered base."""

from __future__ import annotations

from ctxsim.harness.model.conversation import History, Message
from ctxsim.strategies.cline import _JSON_CHARS, Cline, _json_step
from ctxsim.strategies.context_editing import ContextEditing
from ctxsim.strategies.goose import Goose
from ctxsim.strategies.subagent_isolation import SubagentIsolation
from ctxsim.strategies.templates import PeerStrategy, chars_to_tokens, is_plain_user
from ctxsim.strategies.truncate import Truncate


class GooseResendsOldestRequest(Goose):
    """The fresh copy after a compaction is taken from the oldest request the history kept, not the
    newest: the agent goes back to a task the user has moved on from."""

    name = "goose_resends_oldest_request"

    def compact(self, call):
        oldest = next((m for m in self.history if is_plain_user(m)), None)
        done = super().compact(call)
        if done and oldest is not None and is_plain_user(self.history[-1]):
            self.history = History([*list(self.history)[:-1], Message.user(oldest.text)])
        return done


class TruncateCountsCharacters(Truncate):
    """A fast path: a message whose results are all under the limit counted in characters goes in
    as it is, so multibyte output of up to three times the byte limit passes whole."""

    name = "truncate_counts_characters"

    def on_tool_results(self, message):
        c = self.config
        if all(b.type != "tool_result" or (len(b.text) <= c.max_bytes and len(b.text.splitlines()) <= c.max_lines)
               for b in message.blocks):
            return PeerStrategy.on_tool_results(self, message)
        return super().on_tool_results(message)


class IsolationIdsPerLaunch(SubagentIsolation):
    """A resumed launch numbers its own Task calls from one again ("a new process counts afresh"):
    the next delegation reuses an id the resumed history holds, which the API refuses."""

    name = "isolation_ids_per_launch"

    def on_session_start(self, session, resume, now):
        super().on_session_start(session, resume, now)
        self.task_n = 0


class ClineEstimateSystemTextOnly(Cline):
    """The estimate counts the system prompt's text and the messages, not the tools' definitions nor
    the part of the prompt with no text: with many MCP tools it runs far low."""

    name = "cline_estimate_system_text_only"

    def estimate(self):
        h = self.history
        chars = sum(len(b.payload) for b in self.env.system.blocks) + h.fold_through(len(h) - 1, _JSON_CHARS, 0, _json_step)
        return chars_to_tokens(chars, self.config.chars_per_token)


class ContextEditingKeepsFewer(ContextEditing):
    """An off-by-one in the configured count: every clearing sees ``keep_tool_uses`` one lower, so one
    recent tool use fewer than configured keeps its result (the rest of the strategy is the base's)."""

    name = "context_editing_keeps_fewer"

    @property
    def config(self):
        c = self.__dict__["config"]
        return c.model_copy(update={"keep_tool_uses": max(0, c.keep_tool_uses - 1)})

    @config.setter
    def config(self, value):
        self.__dict__["config"] = value

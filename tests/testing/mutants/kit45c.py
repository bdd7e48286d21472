"""Issue #45, third round: bug kinds a blind held-out set (set 8) found the kit blind to, written afresh
(the held-out mutants themselves stay outside the repository): a measured rate forgotten when a launch
resumes, a crash's repair that answers only a last call (none of a partial set of parallel results), a
summary made from a rendered transcript and not installed, a new launch that starts from the previous
conversation's summary, saved outputs named from ``hash()`` (seen only by a run that saves one), and a
tool_use the strategy sent whose input it goes on changing. Each
beside its correct twin, the registered base."""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, History, Message
from ctxsim.strategies.base import UNANSWERED_RESULT
from ctxsim.strategies.cline import Cline
from ctxsim.strategies.gemini_cli import GeminiCli
from ctxsim.strategies.novacode.strategy import NovaCode
from ctxsim.strategies.rag_memory import SEARCH_TOOL, RagMemory

from tests.testing.mutants.keep_recent import KeepRecent


class NovaCodeRateLostOnResume(NovaCode):
    """A resumed launch starts its ledger again ("a new process knows nothing"): the rate of characters
    per token it had measured is gone, and on dense output its first estimate is a third of the truth."""

    name = "novacode_rate_lost_on_resume"

    def on_session_start(self, session, resume, now):
        super().on_session_start(session, resume, now)
        if resume:
            self.ledger = self._new_ledger()


class RepairsLastCallOnly(KeepRecent):
    """The crash repair of the guide's first version: it answers the open calls only when the last
    message is the call itself; a crash after some of the parallel results came back leaves the others
    unanswered (a 400 on every request that follows)."""

    name = "repairs_last_call_only"

    def on_session_start(self, session, resume, now):
        if not resume:   # the base's new launch, without its repair
            self.history = History()
        elif self.history:
            last = self.history[-1]
            open_ids = last.tool_use_ids() if last.role == "assistant" else []
            if open_ids:
                self.history = self.history.append(Message("user", tuple(
                    Block.tool_result(i, UNANSWERED_RESULT, is_error=True) for i in open_ids)))


class ClineSummaryNotInstalled(Cline):
    """The compacted history's first message is built from the previous summary's variable, not the
    answer: the summary the model wrote (from the transcript rendered for it) is thrown away."""

    name = "cline_summary_not_installed"

    def set_history(self, history, *, estimate=None):
        msgs = list(history)
        if msgs and msgs[0].meta.get("origin") == "summary" and msgs[0].text.startswith("Context summary:"):
            msgs[0] = Message.user("Context summary:\n\n(none)", origin="summary")
            history = History(msgs)
        super().set_history(history, estimate=estimate)


class ClineCarriesSummaryOver(Cline):
    """A new launch starts from the last summary of the previous one ("restore the chat"): the new
    conversation continues the old."""

    name = "cline_carries_summary_over"

    def on_session_start(self, session, resume, now):
        carried = [m for m in self.history if m.meta.get("origin") == "summary"][-1:]
        super().on_session_start(session, resume, now)
        if not resume and carried:
            self.history = History(carried)


class GeminiOutputsNamedByHash(GeminiCli):
    """Truncated outputs saved under a name from ``hash()`` of their text: the names (and the notices
    naming them) change with the process's string-hash seed."""

    name = "gemini_outputs_named_by_hash"

    def _save(self, content, tool_use_id):
        self.truncation_id += 1
        return self.save_output("tool-outputs", f"{tool_use_id}-{hash(content) % 10_000:04d}", content)


class RagMemoryReusedSearchArgs(RagMemory):
    """One dict reused for every conversation_search step's arguments ("no allocation per step"): each
    new search rewrites the input of every search step already sent, and of the history holding them."""

    name = "rag_memory_reused_search_args"

    def tool_step(self, kind, tool_use, result, **kw):
        if tool_use.name == SEARCH_TOOL.name:
            args = self.__dict__.setdefault("_search_args", {})
            args.clear()
            args.update(tool_use.input)
            tool_use = Block.tool_use(tool_use.id, tool_use.name, args)
        return super().tool_step(kind, tool_use, result, **kw)

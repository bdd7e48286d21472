"""Issue #45, tenth round: what blind sets 37 and 38 changed that the kit did not hold, each now declared. Two sets,
written apart, had on_demand_reading protect the oldest of its inline reads (``inline[:k]``) where it protects the
newest: the newest reads become pointers first, each a read-back the model pays for, and nothing the kit held
changed (the budgets, the idle gap, the path back all hold). The strategy now declares its newest reads are kept
(``keeps_recent_reads``), held by ``recent_kept``. One set (38) had cline fold from its previous summary where it
folds what came after it: the summary is passed apart and again in the transcript, summarised twice, and the
summary requests grow at each compaction; every summary still held. A summary request now takes in each earlier
summary once (``summary_used``), whatever the strategy declares. Four sets (29, 34, 36, 37) changed how aider sizes the
finished messages it keeps verbatim (characters against its budget in tokens, the whole budget for half): the kit
judged no tail of aider, whose walk stays under half its budget, a bound and not a floor. It now declares that bound
(``compaction_tail`` with ``compaction_tail_walked``): the messages kept, with the one before them, reach it. One set (35) had cline estimate each message's text where it
takes its JSON: about a tenth low, within the factor any estimate is allowed, and its trigger is judged on its own
estimate. Cline's estimate is the whole request, every time, with no anchor: it declares so
(``estimates_whole``), held exactly by ``estimate``. One set (39) had on_demand_reading replace one read per message of those a round
chose, striking them all from its list: the others stay whole for good, past its keep budget. It declares what a
round leaves (``replaces_reads_to``). Two sets (39, 40) changed when structured_state re-writes its todo list (the
count compared one off; not reset by the write a new task makes): nothing else changes. It declares the cadence
(``writes_every``), held by ``cadence``. Blind set 41 had NovaCode leave its memory markers as they were after a
compaction (N-COMP-12): no memory goes in again. The kit's sessions never recalled a memory (the simulated model's
extraction keeps facts the trace states, and the kit's traces stated none); a scenario now states three, and NovaCode
declares what a compaction injects again (``reinjects_after_compaction``). Blind set 42 had gemini-cli turn the room
left in the window into characters the wrong way (a quarter a token): shell output cut far below its threshold. It
declares the threshold (``keeps_results_whole_left``)."""

from __future__ import annotations

from ctxsim.harness.llm.services import SUMMARY, CallSpec
from ctxsim.harness.model.conversation import History, Message, Request, SystemPrompt, ToolSet
from ctxsim.strategies import aider as ai
from ctxsim.strategies import cline as cl
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.cline import Cline
from ctxsim.strategies.gemini_cli import GeminiCli
from ctxsim.strategies.novacode.strategy import NovaCode
from ctxsim.strategies.on_demand_reading import OnDemandReading
from ctxsim.strategies.structured_state import StructuredState


class OnDemandProtectsOldest(OnDemandReading):
    """The protected reads sliced from the front of the list, oldest first: the newest reads become pointers."""

    name = "on_demand_protects_oldest"

    def protected(self) -> list[tuple[int, str, int]]:
        k = self.config.keep_recent_reads
        return self.inline[:k]   # the bug: the oldest k, where the base takes inline[-k:]


class ClineFoldsFromThePreviousSummary(Cline):
    """The fold starts at the previous summary (``head[prev:]``), which is also passed apart: it is sent twice."""

    name = "cline_folds_from_the_previous_summary"

    def compact(self, call: CallInfo) -> bool | None:
        c = self.config
        msgs = list(self.history)
        if len(msgs) < 2:
            return None
        cut = cl.safe_cut(msgs, min(c.preserve_recent_tokens, self.target_messages()), c.chars_per_token)
        if cut <= 0 or cut >= len(msgs):
            return None
        head = msgs[:cut]
        prev = next((i for i in range(len(head) - 1, -1, -1) if head[i].meta.get("origin") == "summary"), -1)
        previous = head[prev].text if prev >= 0 else None
        fold = head[max(prev, 0):]   # the bug: head[prev + 1:]
        request = ((f"Previous summary:\n{previous}\n\n" if previous else "")
                   + f"Conversation to fold into the summary:\n{cl.transcript_text(fold, c.tool_result_chars)}")
        req = Request(SystemPrompt.of(cl.SUMMARIZER_SYSTEM), ToolSet(), History([Message.user(request)]))
        res = self.side_call(req, CallSpec(kind=SUMMARY, max_output_tokens=c.summary_max_tokens))
        if res is None or not res.text.strip():
            return False
        self.set_history(History([Message.user(f"Context summary:\n\n{res.text.strip()}", origin="summary"), *msgs[cut:]]))
        return True


class AiderWalksInCharacters(ai.Aider):
    """The walk that keeps the newest finished messages sizes them in characters against half the budget in tokens:
    it keeps about a quarter of what it should, and the rest is summarised."""

    name = "aider_walks_in_characters"

    def split_at(self, messages, sized, budget: int) -> int:
        return super().split_at(messages, [m.chars for m in messages], budget)   # the bug: characters against tokens


class ClineEstimatesText(Cline):
    """The estimate counts each message's text where cline takes its JSON (``JSON.stringify``): ids, keys and quoting
    left out, the trigger fires late."""

    name = "cline_estimates_text"

    def estimate(self) -> int | None:
        chars = cl.prompt_chars(self.env.system, self.env.tools) + sum(m.chars for m in self.history)
        return self.env.system.opaque_tokens + cl.chars_to_tokens(chars, self.config.chars_per_token)


class OnDemandReplacesOnePerMessage(OnDemandReading):
    """The reads a round chose are grouped by message keeping one id each: the last of a message's reads becomes a
    pointer, the others stay whole, struck from the list of inline reads all the same."""

    name = "on_demand_replaces_one_per_message"

    def replace(self, chosen: list[tuple[int, str, int]]) -> None:
        last = {i: (i, tid, c) for i, tid, c in chosen}   # the bug: one read a message
        struck = set(chosen)
        super().replace(list(last.values()))
        self.inline = [r for r in self.inline if r not in struck]


class StateTodoCountNotResetByATask(StructuredState):
    """The count of calls since the todo list was written is reset only by the periodic re-write, not by the write a new
    task makes: a periodic re-write can follow a task's own write a call or two later."""

    name = "state_todo_count_not_reset_by_a_task"

    def before_call(self, call: CallInfo) -> None:
        since, due = self.calls_since_todo, self.todo_due
        super().before_call(call)
        if due and not (self.config.todo_every and since >= self.config.todo_every):
            self.calls_since_todo = since   # the bug: the task's write leaves the count as it was


class NovaCodeKeepsMemoryMarkers(NovaCode):
    """After a compaction the memory layer is not told (N-COMP-12): its markers still say the memories are in the
    context, and none goes in again."""

    name = "novacode_keeps_memory_markers"

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        if self.memory is not None:
            self.memory.on_compacted = lambda: None   # the bug: the reset never happens


class GeminiRoomLeftAQuarter(GeminiCli):
    """The tokens left in the window are turned into characters dividing by 4 where gemini-cli multiplies."""

    name = "gemini_room_left_a_quarter"

    def threshold_chars(self) -> int:
        c = self.config
        if not self.current:
            return c.truncate_threshold_chars
        left = self.env.window - (self.anchor.last_input or 0)
        return min(int(left / 4), c.truncate_threshold_chars)

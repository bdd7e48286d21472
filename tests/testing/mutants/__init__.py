"""The mutant corpus: realistic one-spot bugs written against the strategy protocol, each beside its
correct twin. The property kit must catch every mutant, naming the defect, and pass every twin
(so a catch is not the kit failing everything). tests/testing/test_mutants.py runs it;
``python -m tests.testing.mutants.measure`` counts the catches of a profile and times them.

Each mutant subclasses a real strategy (NovaCode, the guide's keep_recent, a peer) and changes one
thing; ``catches`` lists the invariants that name that defect (any one of them is a catch).
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxsim.strategies.aider import Aider
from ctxsim.strategies.amortized_forgetting import AmortizedForgetting
from ctxsim.strategies.claude_code import ClaudeCode
from ctxsim.strategies.cline import Cline
from ctxsim.strategies.codex import Codex
from ctxsim.strategies.context_editing import ContextEditing
from ctxsim.strategies.cut_no_summary import CutNoSummary
from ctxsim.strategies.gemini_cli import GeminiCli
from ctxsim.strategies.goose import Goose
from ctxsim.strategies.novacode.strategy import NovaCode
from ctxsim.strategies.observation_masking import ObservationMasking
from ctxsim.strategies.on_demand_reading import OnDemandReading
from ctxsim.strategies.opencode import OpenCode
from ctxsim.strategies.openhands import OpenHands
from ctxsim.strategies.rag_memory import RagMemory
from ctxsim.strategies.roo_code import RooCode
from ctxsim.strategies.sliding_window import SlidingWindow
from ctxsim.strategies.structured_state import StructuredState
from ctxsim.strategies.subagent_isolation import SubagentIsolation
from ctxsim.strategies.tiered_budget import TieredBudget
from ctxsim.strategies.truncate import Truncate

from tests.testing.mutants import keep_recent as k
from tests.testing.mutants import kit29 as x
from tests.testing.mutants import kit45 as y
from tests.testing.mutants import kit45b as z
from tests.testing.mutants import kit45c as w
from tests.testing.mutants import kit45d as d
from tests.testing.mutants import kit45e as e
from tests.testing.mutants import kit45f as f
from tests.testing.mutants import kit45g as g
from tests.testing.mutants import kit45h as h
from tests.testing.mutants import kit45i as i
from tests.testing.mutants import kit45j as j
from tests.testing.mutants import kit45k as kk
from tests.testing.mutants import novacode as n
from tests.testing.mutants import peers as p
from tests.testing.mutants import variants as v
from tests.testing.mutants.basic import (  # noqa: F401 (the CLI tests name them by this module)
    DeclaredEditor,
    Overflower,
    PairSafeTruncator,
    PairSplitter,
    Raiser,
    Respiller,
    SilentEditor,
    Spiller,
    Tolerant,
)

KeepRecent = k.KeepRecent


@dataclass(frozen=True)
class Case:
    mutant: type
    twin: type
    catches: frozenset[str]
    defect: str

    @property
    def id(self) -> str:
        return self.mutant.__name__


def _c(mutant, twin, catches, defect: str) -> Case:
    return Case(mutant, twin, frozenset(catches.split()), defect)


CORPUS: list[Case] = [
    # the Messages API's rules
    _c(n.FiveBreakpoints, n.FourBreakpoints, "api", "five cache_control markers"),
    _c(k.BreakpointPastEnd, KeepRecent, "api", "a marker one past the last message"),
    _c(k.EmptyNoteBlock, k.NoteOnlyWhenCut, "api", "an empty text block"),
    _c(n.ReminderBeforeResults, n.ReminderAfterResults, "api", "text before the tool_results of a user turn"),
    _c(k.ConclusionInjected, k.ConclusionAfterResults, "api pairing", "a sub-agent's conclusion between a Task call and its result"),
    _c(n.SummaryAsAssistant, n.NovaCodeWithoutEnvironment, "api", "the summary as the first, assistant, message"),
    _c(k.ThinkingStripped, k.ThinkingStrippedWhenClosed, "api", "thinking stripped from the open tool loop"),
    _c(k.TruncationLosesIsError, KeepRecent, "is_error", "is_error lost on truncation"),
    _c(p.ClearingLosesIsError, ContextEditing, "is_error", "is_error lost when a result is cleared"),
    # what a strategy must not do beyond the API
    _c(n.SharedSchemaMarker, n.CopiedSchemaMarker, "inputs stable_prefix", "cache_control written into the shared tool schema (N-CACHE-2)"),
    _c(k.PathNormaliser, k.PathNormaliserCopy, "inputs", "the trace's tool_use input dict edited in place"),
    _c(n.RandomSpillNames, n.SpillCounterFromDisk, "deterministic", "random spill file names"),
    _c(n.UnseededSpillFailures, n.SeededSpillFailures, "deterministic", "unseeded random draws"),
    _c(k.DateInSystemPrompt, k.DateReminder, "stable_prefix", "the date in the system prompt"),
    _c(SilentEditor, DeclaredEditor, "stable_prefix", "an old message edited without declaring it"),
    _c(p.MaskingUndeclared, ObservationMasking, "stable_prefix", "masking without declaring the rewrite"),
    _c(k.RewriteFlagStuck, KeepRecent, "false_rewrite", "a rewrite flag never reset"),
    _c(n.DoubleCountEstimate, NovaCode, "estimate", "an anchored estimate that double counts"),
    _c(k.EstimateInCharacters, KeepRecent, "estimate", "an estimate in characters, not tokens"),
    _c(n.LastUsageTrigger, NovaCode, "window estimate", "a trigger that reads only the last reported usage"),
    _c(Overflower, KeepRecent, "window", "claims manages_window, never cuts"),
    _c(n.HardLineBehindBreaker, NovaCode, "window", "the hard line stopped by an open breaker (N-COMP-3)"),
    # the reaction to a refused request (interface 1 of #15)
    _c(k.GivesUpOnOverflow, KeepRecent, "window", "no reaction to a prompt-too-long (manages_window)"),
    _c(k.RetriesUnchanged, KeepRecent, "window", "the same request retried until the attempts run out"),
    _c(k.DropsToolOutput, k.BlanksToolOutput, "pairing", "a retry that drops the results message"),
    # pairs
    _c(PairSplitter, PairSafeTruncator, "pairing boundary_pairs", "a cut between a tool_use and its result"),
    _c(n.TailOnResult, NovaCode, "pairing boundary_pairs", "a compaction tail starting at a tool_result (N-COMP-7)"),
    _c(p.SlidingIntoResults, SlidingWindow, "pairing boundary_pairs", "a dropped range ending inside a pair"),
    _c(p.CodexTrimsIntoResults, Codex, "pairing", "a summary request trimmed into a pair"),
    _c(k.ForgetsResumeRepair, KeepRecent, "resume_pairing pairing", "calls a crash left open not answered on resume (N-TRANS-5)"),
    # spill, read-backs, paths back
    _c(Respiller, Spiller, "no_respill", "read-backs spilled again"),
    _c(n.BudgetRespill, NovaCode, "no_respill", "a read-back spilled by the aggregate budget (N-SPILL-3)"),
    _c(n.AbsolutePathReadback, NovaCode, "no_respill", "a read-back recognised only by its absolute path (N-SPILL-3)"),
    _c(n.SpillCounterPerLaunch, n.SpillCounterFromDisk, "path_back", "a spill counter reset per launch overwrites a referenced file"),
    _c(n.CleanupOnExit, NovaCode, "path_back", "spill files deleted at exit, placeholders still in the window"),
    _c(n.CappedSpillFile, NovaCode, "path_back", "a spill file that does not hold the whole result (N-SPILL-5)"),
    _c(k.CutLogInTemp, KeepRecent, "run_dir", "a log of cuts written at a fixed temporary path"),
    _c(k.NoticeCalledSummary, k.SummarisingKeepRecent, "path_back", "a notice tagged as a summary excuses a loss"),
    # crashes
    _c(Raiser, Tolerant, "crash", "raises on an error result"),
    _c(n.SkillInputKey, NovaCode, "crash", "a Skill call's input read by one key"),
    _c(k.FirstLineTitle, k.FirstLineTitleGuarded, "crash", "raises on an empty result"),
]

# issue #29: the held-out set's escapes, written afresh (tests/testing/mutants/kit29.py)
KIT29: list[Case] = [
    _c(x.DateInNovaCodeSystem, x.DateAtLaunchInNovaCodeSystem, "stable_prefix", "the date in the system prompt, per request"),
    _c(x.LocalTimeInNovaCodeSystem, x.NamedZoneAtLaunch, "stable_prefix deterministic",
       "the machine's local date and zone in the system prompt, per request (changes at a DST change)"),
    _c(x.LocalDateAtLaunch, x.NamedZoneAtLaunch, "deterministic",
       "the machine's local date and zone, read at launch (another machine's zone, other bytes)"),
    _c(x.MachineDateAtLaunch, x.NamedZoneAtLaunch, "deterministic",
       "today's date on the machine's clock (date.today()), read at launch"),
    _c(x.ResultsInSetOrder, x.ResultsInCallOrder, "deterministic", "parallel results in a set's order"),
    _c(x.ToolsFromSet, x.ToolsSortedByName, "deterministic", "the tools array in a set's order"),
    _c(x.SpillNamedByHash, NovaCode, "deterministic", "spill files named by hash()"),
    _c(x.RestoreInSetOrder, NovaCode, "deterministic restored", "restored files in a set's order"),
    _c(x.EstimateWithoutPrompt, KeepRecent, "estimate window", "an estimate without the system prompt and tools"),
    _c(x.OneHourAfterFiveMinutes, x.OneHourPrefix, "api", "a 1h cache marker after a 5m one"),
    _c(x.SeedRatioBudgets, NovaCode, "window", "tail and restore budgeted at 3.5 chars/token (#17)"),
    _c(x.SummaryWithoutFirstRequest, NovaCode, "goal", "the summary never sees the user's first request"),
    _c(x.ReadbackOnlyThisLaunch, NovaCode, "no_respill", "a read-back of an earlier launch's spill re-spilled"),
]
CORPUS += KIT29

# issue #45: its bug kinds written afresh (tests/testing/mutants/kit45.py), measured first outside the
# repository; the twins are users' subclasses under other names (tests/testing/mutants/variants.py)
KIT45: list[Case] = [
    _c(y.CEMinimumInCharacters, v.ClearingAssistant, "clear_minimum", "clear_at_least compared with characters"),
    _c(y.CEMinimumOncePerInstance, v.ClearingAssistant, "clear_minimum", "the all-or-nothing gate passed once per instance"),
    _c(y.CEPerClearingOnlyFirst, v.ClearingInSteps, "clear_minimum", "the per-clearing minimum held on the first clearing only"),
    _c(y.CEEpisodicMinimumOnPrompt, v.ClearingEpisodic, "clear_minimum", "an episode held to the minimum by the prompt's size"),
    _c(y.CodexWithoutActiveTask, v.MyCodex, "summary_keeps", "codex's prompt without its Active task item"),
    _c(y.NovaCodeSummaryCapped, v.MyNovaCode, "summary_keeps", "the summary capped at 1,500 characters"),
    _c(y.ClaudeCodeSectionsFiltered, ClaudeCode, "summary_keeps", "the summary sections without All user messages"),
    _c(y.NovaCodePromptListsFive, v.MyNovaCode, "summary_keeps", "the instructions list five of nine sections"),
    _c(y.NovaCodeCompactionNote, v.MyNovaCode, "stable_prefix", "a compaction note in the system prompt"),
    _c(y.ClaudeCodeToolsSortedAfterCompaction, ClaudeCode, "stable_prefix", "the tools sorted after a compaction"),
    _c(y.CutNoSummarySystemReordered, v.MyCutNoSummary, "stable_prefix", "a cut notice at the head of the system prompt"),
    _c(y.NovaCodeEmptyResultsAreNotResults, v.MyNovaCode, "pairing boundary_pairs api",
       "empty results not counted as results at the boundary (N-COMP-7)"),
    _c(y.CutNoSummaryDropsEmpty, v.MyCutNoSummary, "pairing boundary_pairs api", "empty messages dropped from the kept tail"),
    _c(y.CutNoSummaryEmptyResultsAreNotResults, v.MyCutNoSummary, "pairing boundary_pairs api",
       "a cut whose boundary takes empty results for no results"),
    _c(y.CodexDropsEmptyResults, v.MyCodex, "pairing api", "empty tool results not sent"),
    _c(y.NovaCodeDateInSystemFromEpoch, v.MyNovaCode, "stable_prefix", "today's date from its own epoch in the system prompt"),
    _c(y.CEEstimateFixedRate, v.ClearingAssistant, "estimate", "cleared text taken away at 4 chars/token"),
    _c(y.CEEpisodicEstimateFixedRate, v.ClearingEpisodic, "estimate", "episodic: freed text taken away at 4 chars/token"),
    _c(y.CEClearsInputsInPlace, v.ClearingInputsOfReads, "inputs clear_minimum", "cleared inputs emptied in the trace's dict"),
    _c(y.CEThinkingKeepOffByOne, v.ClearingThinking, "api", "keep N thinking turns off by one"),
    _c(y.CEThinkingUndeclared, v.ClearingThinking, "stable_prefix", "thinking cleared without a declared rewrite"),
    _c(y.CodexSummaryFirst, v.MyCodex, "api", "the handoff summary first, as an assistant message"),
    _c(y.NovaCodeSpillNamedByTool, v.MyNovaCode, "path_back no_respill", "spill files named by their tool"),
]
CORPUS += KIT45

# issue #45, second round: kinds a held-out set found the kit blind to (tests/testing/mutants/kit45b.py)
KIT45B: list[Case] = [
    _c(z.CodexKeepsPreviousSummary, v.MyCodex, "summary_used summary_keeps", "each compaction installs the summary before it"),
    _c(z.ClaudeCodeNewLaunchKeepsGoal, ClaudeCode, "fresh_launch", "a new launch keeps the previous conversation's request"),
    _c(z.ClaudeCodeMicrocompactInCharacters, ClaudeCode, "estimate", "microcompact's saving taken off in characters"),
    _c(z.ClaudeCodeSubagentUsageKept, ClaudeCode, "estimate", "a sub-agent's usage kept as the parent's anchor"),
    _c(z.ClaudeCodeDateOnBuildEpoch, ClaudeCode, "stable_prefix", "a date per request on an undeclared epoch"),
    _c(z.CEGateCountsThinking, v.ClearingThinking, "clear_minimum", "the results' minimum held against the thinking cleared too"),
    _c(z.GeminiCleansOutputsOnResume, GeminiCli, "path_back", "saved outputs deleted at a resume, still named"),
    _c(z.TieredBudgetNoticeTypo, TieredBudget, "path_back", "the spill notice names tool-result/ for tool-results/"),
    _c(w.NovaCodeRateLostOnResume, NovaCode, "resume_estimate", "the measured rate forgotten when a launch resumes"),
    _c(w.RepairsLastCallOnly, KeepRecent, "resume_pairing pairing", "a crash repair blind to a partial set of results"),
    _c(w.ClineSummaryNotInstalled, Cline, "summary_used", "a summary of a rendered transcript made and not installed"),
    _c(w.ClineCarriesSummaryOver, Cline, "fresh_launch", "a new launch starts from the previous conversation's summary"),
    _c(w.GeminiOutputsNamedByHash, GeminiCli, "deterministic", "saved outputs named from hash()"),
    _c(w.RagMemoryReusedSearchArgs, RagMemory, "inputs", "one arguments dict reused by every search step sent"),
    # the fourth round (a blind set 9): tests/testing/mutants/kit45d.py
    _c(d.GooseResendsOldestRequest, Goose, "latest_request", "a compaction re-sends an older request than the one in hand"),
    _c(d.TruncateCountsCharacters, Truncate, "result_limit", "a byte limit tested on characters"),
    _c(d.IsolationIdsPerLaunch, SubagentIsolation, "api", "own call ids numbered afresh at each launch"),
    _c(d.ClineEstimateSystemTextOnly, Cline, "estimate", "an estimate without the tools and the opaque prompt"),
    _c(d.ContextEditingKeepsFewer, ContextEditing, "recent_kept", "one recent tool use fewer kept than configured"),
    # the fifth round (blind sets 3 and 10: counts kept that were not declared): kit45e.py
    _c(e.MaskingTemplateOffByOne, ObservationMasking, "recent_kept", "one observation more masked than n allows"),
    _c(e.MicrocompactKeepsFewer, ClaudeCode, "recent_kept", "microcompact clears one result more than its keep"),
    _c(e.ReportAfterRestore, SubagentIsolation, "subagent_report", "a sub-agent's report asked of the parent's context"),
    _c(e.GooseSummaryOnRunModel, Goose, "call_model", "a summary on the run's model, not the declared fast one"),
    _c(e.PruneUnderMinimum, OpenCode, "clear_minimum", "a prune under its declared minimum"),
    _c(e.MicrocompactIdleInMinutes, ClaudeCode, "idle_clear", "an idle gap in seconds compared in minutes: never fires"),
    _c(e.MarksThePreviousMessage, ClaudeCode, "cache_marks", "the last cache breakpoint a message early"),
    _c(e.ThresholdInCharacters, ClaudeCode, "compaction_trigger", "the compaction threshold compared in characters"),
    _c(e.TriggerOnCharacters, ClaudeCode, "compaction_trigger", "the estimate in characters against the threshold: early"),
    _c(e.CodexCutInCharacters, Codex, "result_limit", "an output budget counted in characters, not tokens"),
    _c(e.GooseWindowOfItsOwn, Goose, "compaction_trigger", "a reply-start trigger on a fixed 200k window"),
    # the sixth round (what is dropped unsummarised): kit45f.py
    _c(f.CodexSummarySkipsFirstExchange, Codex, "summarised", "the summariser given all but the first exchange, all dropped"),
    _c(f.OpenCodeProtectInCharacters, OpenCode, "recent_kept", "the newest output's protection counted in characters"),
    _c(f.CodexKeepsOldHandoff, Codex, "user_messages", "the previous handoff kept among the user's messages"),
    # the seventh round (doing less than configured): kit45g.py
    _c(g.ContextEditingTriggerOnView, ContextEditing, "compaction_trigger", "the clearing trigger read on the cleared prompt"),
    _c(g.SlidingWindowKeepsFirstRead, SlidingWindow, "superseded", "duplicate reads: the first kept, the latest replaced"),
    _c(g.ClaudeCodeIdleForgottenAtResume, ClaudeCode, "idle_clear", "the last answer's time forgotten at a resume"),
    _c(g.MaskingCountsWithoutTheTask, ObservationMasking, "recent_kept", "observations counted without the task: one fewer masked"),
    _c(g.GeminiBudgetOldestFirst, GeminiCli, "recent_kept", "the tool-output budget spent oldest first"),
    _c(g.OpenCodePrunesTheTurnBefore, OpenCode, "recent_kept", "the prune guard one turn short"),
    _c(g.RooTriggerOnLastInput, RooCode, "compaction_trigger", "the condense trigger on the last input alone"),
    _c(g.TieredSharesSwapped, TieredBudget, "result_limit", "a cut's head and tail shares swapped"),
    _c(g.TieredFirstResultOnly, TieredBudget, "result_limit", "the budgets applied to a message's first result only"),
    _c(g.OnDemandIdleClockWhenOverBudget, OnDemandReading, "idle_clear", "the idle clock noted only on calls over budget"),
    _c(g.MaskingCountResetBySubagent, ObservationMasking, "replaced_once", "the masked count reset by a sub-agent"),
    # the eighth round (what a compaction keeps besides its summary): kit45h.py
    _c(h.ClineKeepsInCharacters, Cline, "kept_tail", "the preserved tokens compared with JSON characters"),
    _c(h.ClineCutPastPrompt, Cline, "kept_tail", "the cut clamped forward past the latest typed prompt"),
    _c(h.GeminiPreservedFractionAsSplit, GeminiCli, "kept_tail", "the split point given the preserved fraction"),
    _c(h.CutTailToTheCap, CutNoSummary, "kept_tail", "the tail's minimum passed its cap: the most kept, not the least"),
    _c(h.GooseCompactsMidTurn, Goose, "compaction_trigger", "the flag that a reply began never cleared"),
    _c(h.NovaCodeSpillsInTokens, NovaCode, "result_limit", "the spill threshold and budget read as tokens"),
    _c(h.TruncateHeadTakesAll, Truncate, "result_limit", "a cut's head given the whole byte budget"),
    _c(h.ClaudeCodeBreakerNeverReset, ClaudeCode, "compaction_trigger", "failed summaries counted over the session"),
    _c(h.MaskingCountIntoSubagent, ObservationMasking, "compaction_trigger", "the masked count carried into a sub-agent"),
    _c(h.AmortizedTailForgetsTheHead, AmortizedForgetting, "kept_tail", "the halving's tail not less the first events"),
    _c(h.CodexKeepsOldestUsers, Codex, "user_messages latest_request", "the kept user messages walked from the oldest"),
    # the ninth round (the share a cut keeps): kit45i.py
    _c(i.SlidingWindowAlwaysQuarter, SlidingWindow, "kept_tail", "every cut keeps a quarter, half never weighed"),
    _c(i.ClineTriggerOnTheWindow, Cline, "compaction_trigger", "the trigger a share of the window, not the usable input"),
    _c(i.ClaudeCodeIdleInMilliseconds, ClaudeCode, "idle_clear", "the idle gap in milliseconds: clears at every pause"),
    _c(i.OpenCodePruneGuardsOneTurnMore, OpenCode, "recent_kept", "the prune's turn guard one turn long: prunes less"),
    _c(i.OpenHandsEventPerMessage, OpenHands, "compaction_trigger", "one event per message: parallel calls undercounted"),
    _c(i.OpenCodeTailFromOneTurn, OpenCode, "kept_tail", "the kept turns tried from one up: only the newest kept"),
    _c(i.OpenHandsCutPointPastMatch, OpenHands, "kept_tail", "cut points found past an exact match: a tail turn short"),
    _c(i.NovaCodeSpillsSmallestFirst, NovaCode, "result_limit", "N-SPILL-2 turned round: the smallest results spilled first"),
    # the tenth round (which reads a strategy keeps): kit45j.py
    _c(j.ClineFoldsFromThePreviousSummary, Cline, "summary_used", "the fold starts at the previous summary: sent twice"),
    _c(j.AiderWalksInCharacters, Aider, "kept_tail", "the finished messages kept sized in characters: a quarter kept"),
    _c(j.ClineEstimatesText, Cline, "estimate", "each message's text counted where its JSON is: about a tenth low"),
    _c(j.OnDemandReplacesOnePerMessage, OnDemandReading, "recent_kept", "one read a message replaced, all struck"),
    _c(j.StateTodoCountNotResetByATask, StructuredState, "cadence", "a task's todo write leaves the count: re-written early"),
    _c(j.NovaCodeKeepsMemoryMarkers, NovaCode, "reinjected", "the memory markers not reset: no memory after a compaction"),
    _c(j.GeminiRoomLeftAQuarter, GeminiCli, "result_limit", "the room left read a quarter a token: output cut early"),
    _c(j.OnDemandProtectsOldest, OnDemandReading, "recent_kept", "the oldest reads protected: the newest become pointers"),
    # the eleventh round (what a launch keeps in memory): kit45k.py
    _c(kk.NovaCodeMemoryMarkersSurviveALaunch, NovaCode, "deterministic", "memory markers kept at a new launch: never recalled"),
    _c(kk.ClaudeCodeStartupAtTheFirstLaunchOnly, ClaudeCode, "deterministic", "startup files at the first launch only"),
    # every budget at the seed's rate: the tail over its cap, or a summary request sized so on dense text over the window
    _c(kk.NovaCodeTailAtTheSeedRate, NovaCode, "kept_tail window", "budgets at 3.5 a token where they are calibrated"),
    _c(kk.NovaCodeRestoresThePreview, NovaCode, "restored", "a spilled read restored as its preview"),
    _c(kk.ClaudeCodeMarksAtTheDefaultTtl, ClaudeCode, "cache_marks", "cache marks at the default TTL, not the hour"),
    _c(kk.NovaCodeSubAgentReadsTheParents, NovaCode, "restored", "a sub-agent's reads restored to the parent"),
]
CORPUS += KIT45B

TWINS: list[type] = list(dict.fromkeys(c.twin for c in CORPUS))

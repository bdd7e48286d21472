"""opencode: OpenCode's (and Kilo Code's) session compaction: prune old tool output, summarise on
overflow.

Source: anomalyco/opencode (sst/opencode) ``packages/opencode/src/session/compaction.ts``
(``prune``, ``PRUNE_MINIMUM``, ``PRUNE_PROTECT``, ``PRUNE_PROTECTED_TOOLS``, ``process``, the
compaction prompt) and ``session/overflow.ts`` (``usable``, ``isOverflow``), read at commits
001aa6cc and 08f74b9b (2026), with the tail-turn budget of the newer ``compaction`` config
(``tail_turns``, 2) as peers.md records it:

* **tool output** over 2,000 lines or 50 KB is cut to its first lines within both limits; the whole
  output is saved to a file the hint names (``tool/truncation.ts``, ``Truncate.output``); a read of
  that file is not cut again (``tool/tool.ts`` skips ``Truncate.output`` for a tool that truncates
  itself, as ``read`` does with its offset and limit; here: a result whose call names a saved file);
* **overflow**: after a step, its tokens (input + output + cache reads + cache writes, as reported)
  reach the usable context: the window less the model's output limit capped at 32,000
  (``ProviderTransform.maxOutputTokens``; when a model declares an input limit: that less 20,000);
  the next step compacts first;
* **prune**, when a turn ends: walking back from the newest message, the last 2 user turns are
  skipped; past the newest 40,000 tokens of tool output (4 characters per token) older outputs are
  marked compacted — only if more than 20,000 tokens can go — and the model then reads "[Old tool
  result content cleared]"; the walk stops at a summary or at output already pruned; ``skill``
  outputs are never pruned;
* **compaction**: the compaction agent gets the conversation and the compaction prompt (Goal,
  Instructions, Discoveries, Accomplished, Relevant files) with no tools and no system prompt, so it
  reads nothing of the main loop's cache (tool outputs cut to 2,000 characters in its input, as
  peers.md records); the history is then the compaction request ("What did we do so far?"), the
  summary, the last 2 user turns if they fit in ``min(8,000, max(2,000, 0.25 × usable))`` tokens (else
  the last one, else none), and an automatic "Continue if you have next steps…" message;
* a request the provider rejects as too long (``ContextOverflowError``) is compacted the same way
  and sent again.
"""

from __future__ import annotations

from pathlib import Path

from ctxsim.harness.llm.services import SUMMARY, CallSpec
from ctxsim.harness.model.conversation import Block, History, Message, Request, SystemPrompt, ToolSet
from ctxsim.strategies.base import CallInfo, Rejection, check_room
from ctxsim.strategies.templates import (
    PeerConfig,
    ThresholdCompactor,
    chars_to_tokens,
    input_strings,
    is_plain_user,
    transcript_text,
)
from pydantic import Field

OUTPUT_TOKEN_MAX = 32_000  # provider/transform.ts maxOutputTokens cap
TRUNCATE_MAX_LINES = 2_000  # tool/truncation.ts Truncate.MAX_LINES
TRUNCATE_MAX_BYTES = 50 * 1024  # tool/truncation.ts Truncate.MAX_BYTES
PRUNE_MINIMUM = 20_000  # compaction.ts
PRUNE_PROTECT = 40_000  # compaction.ts
PRUNE_TURNS = 2  # compaction.ts prune: the last two user turns are never pruned
PRUNE_PROTECTED_TOOLS = ("skill",)  # compaction.ts
ESTIMATE_CHARS_PER_TOKEN = 4  # opencode Token.estimate: characters / 4 (what the prune walk sums)
PRUNED = "[Old tool result content cleared]"  # message-v2.ts: what a compacted tool part shows the model
TAIL_TURNS = 2  # compaction config tail_turns default (peers.md)
SUMMARY_TOOL_CHARS = 2_000  # peers.md: tool outputs cut in the summariser's input
SUMMARY_MAX_TOKENS = 20_000  # compaction.ts COMPACTION_MAX_OUTPUT_TOKENS (commit 001aa6cc)
COMPACTION_ASK = "What did we do so far?"
CONTINUE = "Continue if you have next steps, or stop and ask for clarification if you are unsure how to proceed."
PROMPT = """\
Provide a detailed prompt for continuing our conversation above. Focus on what we did, what we are \
doing, which files we are working on and what we are going to do next; another agent will read it \
and continue the work. Do not call any tools. Use this template: ## Goal, ## Instructions, \
## Discoveries, ## Accomplished, ## Relevant files / directories."""  # compaction.ts defaultPrompt, shortened


def truncate_head(text: str, max_lines: int = TRUNCATE_MAX_LINES, max_bytes: int = TRUNCATE_MAX_BYTES) -> str | None:
    """``Truncate.output`` (direction head): the first lines within both limits, or None when the
    text is within them."""
    lines = text.split("\n")
    if len(lines) <= max_lines and len(text.encode("utf-8", "surrogatepass")) <= max_bytes:
        return None
    out, size = [], 0
    for line in lines[:max_lines]:
        b = len(line.encode("utf-8", "surrogatepass")) + 1
        if size + b > max_bytes:
            break
        out.append(line)
        size += b
    return "\n".join(out)


def tail_budget(usable: float) -> int:
    """Tokens the kept tail turns may take: min(8,000, max(2,000, 0.25 × usable))."""
    return int(min(8_000, max(2_000, 0.25 * usable)))


class OpenCodeConfig(PeerConfig):
    reserved_tokens: int | None = Field(None, ge=0, le=10_000_000, description="kept below the window; None: "
                                        "the model's output limit capped at 32,000")
    prune: bool = Field(True, description="prune old tool output when a turn ends")
    prune_protect_tokens: int = Field(PRUNE_PROTECT, ge=0, le=10_000_000, description="newest tool output kept")
    prune_minimum_tokens: int = Field(PRUNE_MINIMUM, ge=0, le=10_000_000, description="prune only if more than this can go")
    tail_turns: int = Field(TAIL_TURNS, ge=0, le=100, description="newest user turns kept verbatim after compacting")
    summary_max_tokens: int = Field(SUMMARY_MAX_TOKENS, ge=256, le=200_000, description="output bound of the compaction agent")
    truncate_tool_output: bool = Field(True, description="cut tool output over 2,000 lines / 50 KB (saved to a file)")


def usable_input(config: OpenCodeConfig, window: int, max_output_tokens: int) -> int:
    """``usable``: the window less the reserve (the model's output limit, capped at 32,000)."""
    reserved = config.reserved_tokens if config.reserved_tokens is not None else min(max_output_tokens, OUTPUT_TOKEN_MAX)
    return max(0, window - reserved)


class OpenCode(ThresholdCompactor):
    name = "opencode"

    @classmethod
    def compacts_on_usage(cls, config, window: int, max_output_tokens: int) -> int:
        """``isOverflow``: the last step's tokens (input, cache and output) reach ``usable``."""
        return usable_input(config, window, max_output_tokens)

    @classmethod
    def summarises_dropped(cls, config) -> bool:
        # its compactions summarise what they drop (the kit's ``summarised``)
        return True
    summary = "OpenCode: prune tool output past the newest 40k tokens; at window − 32k summarise, keep the last 2 turns"
    on_rejection = "compacts (the compaction agent) and sends again (opencode ContextOverflowError → compaction)"
    Config = OpenCodeConfig
    keeps_replacements = True  # a result cleared or masked keeps its placeholder (the kit's replaced_once)

    @classmethod
    def keeps_recent_tool_chars(cls, config) -> int:
        """A prune never touches the newest ``prune_protect_tokens`` of tool output (compaction.ts
        ``PRUNE_PROTECT``, each output estimated at :data:`ESTIMATE_CHARS_PER_TOKEN`), nor the last two
        turns: the kit holds the budget, in the characters it estimates from."""
        return ESTIMATE_CHARS_PER_TOKEN * config.prune_protect_tokens

    @classmethod
    def keeps_recent_turns(cls, config) -> int:
        """A prune never touches the last two user turns (compaction.ts prune: ``if (turns < 2) continue``), counted
        as a new user message comes in (before it): with the turn it opens, the newest three keep their results."""
        return PRUNE_TURNS + 1

    @classmethod
    def compaction_tail(cls, config, window: int, max_output_tokens: int) -> tuple:
        """The newest ``tail_turns`` user turns verbatim where they fit the tail budget (their characters at
        ``chars_per_token``), fewer where they do not (none where one does not)."""
        if not config.tail_turns:
            return ((0, 0, "messages"),)
        budget = tail_budget(usable_input(config, window, max_output_tokens))
        return ((config.tail_turns, config.tail_turns, "turns"), (0, budget * config.chars_per_token, "chars"))

    @classmethod
    def clears_all_beyond(cls, config) -> tuple[int, int, tuple[str, ...]] | None:
        """A prune takes every result before the last two turns (three as the kit counts: :meth:`keeps_recent_turns`)
        and the newest ``prune_protect_tokens`` of output before them, back to the first one pruned before or the
        summary, ``skill`` apart (compaction.ts prune)."""
        if not config.prune:
            return None
        return PRUNE_TURNS + 1, ESTIMATE_CHARS_PER_TOKEN * config.prune_protect_tokens, PRUNE_PROTECTED_TOOLS

    @classmethod
    def clear_minimum(cls, config) -> tuple[int, str] | None:
        """A prune goes only when more than ``prune_minimum_tokens`` can (compaction.ts ``PRUNE_MINIMUM``): the
        property kit holds each prune to it, counted on what it clears beyond the request before."""
        return (config.prune_minimum_tokens, "clearing") if config.prune_minimum_tokens else None

    @staticmethod
    def check_params(window: int) -> dict:
        scale = window / 200_000
        return {"reserved_tokens": int(OUTPUT_TOKEN_MAX * scale), "prune_protect_tokens": int(PRUNE_PROTECT * scale),
                "prune_minimum_tokens": int(PRUNE_MINIMUM * scale)}

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.tool_names: dict[str, str] = {}
        self.tool_inputs: dict[str, dict] = {}
        self.saved: set[str] = set()  # files the cut outputs were saved to
        if config.reserved_tokens is not None:
            check_room(self.name, env.window, env.window - config.reserved_tokens,
                       {"reserved_tokens": config.reserved_tokens})

    def reads_saved(self, tool_use_id: str) -> bool:
        """The call names a file a cut output was saved to (absolute, or by its last two parts
        ``tool-output/<id>.txt`` as the model may write it)."""
        for v in input_strings(self.tool_inputs.get(tool_use_id, {})):
            t = v.replace("\\", "/")
            for path in self.saved:
                tail = "/".join(Path(path).parts[-2:])
                if v == path or t == tail or t.endswith("/" + tail) or t.endswith(" " + tail):
                    return True
        return False

    def usable(self) -> int:
        return usable_input(self.config, self.env.window, self.env.max_output_tokens)

    def on_response(self, message: Message, usage) -> None:
        for b in message.blocks:
            if b.type == "tool_use" and b.id:
                self.tool_names[b.id] = b.name or ""
                self.tool_inputs[b.id] = dict(b.input or {})
        super().on_response(message, usage)

    def on_tool_results(self, message: Message) -> None:
        if self.config.truncate_tool_output:
            blocks = []
            for b in message.blocks:
                cut = truncate_head(b.text) if b.type == "tool_result" else None
                if cut is not None and (message.meta.get("origin") == "readback" or self.reads_saved(b.id or "")):
                    # the model reading the saved output back: opencode's read tool pages a file
                    # itself (metadata.truncated set), and tool.ts skips Truncate.output for it
                    self.counters.extra["readback_exempt"] += 1
                    cut = None
                if cut is not None:
                    path = self.save_output("tool-output", b.id or "result", b.text)
                    if path:
                        self.saved.add(path)
                    hint = (f"\n\n...output truncated: {len(b.text) - len(cut):,} more characters; the full output is in "
                            f"{path}" if path else "\n\n...output truncated")
                    b = b.with_text(cut + hint, truncated=True, **({"saved": path} if path else {}))
                blocks.append(b)
            message = Message(message.role, tuple(blocks), message.meta)
        super().on_tool_results(message)

    def on_user(self, message: Message) -> None:
        if is_plain_user(message) and self.config.prune:
            self.prune()  # the previous turn ended
        super().on_user(message)

    # --- prune ---------------------------------------------------------------------------------------
    def prune(self) -> int:
        c = self.config
        h = self.history
        turns, total, pruned = 0, 0, 0
        marks: list[tuple[int, int]] = []
        for i in range(len(h) - 1, -1, -1):
            m = h[i]
            if is_plain_user(m):
                turns += 1
            if turns < PRUNE_TURNS:
                continue
            if m.meta.get("origin") == "summary":
                break
            stop = False
            for j in range(len(m.blocks) - 1, -1, -1):
                b = m.blocks[j]
                if b.type != "tool_result" or self.tool_names.get(b.id or "") in PRUNE_PROTECTED_TOOLS:
                    continue
                if b.meta.get("pruned"):
                    stop = True
                    break
                est = chars_to_tokens(len(b.text), ESTIMATE_CHARS_PER_TOKEN)
                total += est
                if total > c.prune_protect_tokens:
                    pruned += est
                    marks.append((i, j))
            if stop:
                break
        if pruned <= c.prune_minimum_tokens:
            return 0
        by_msg: dict[int, set[int]] = {}
        for i, j in marks:
            by_msg.setdefault(i, set()).add(j)
        for i in sorted(by_msg):
            m = h[i]
            h = h.replace_at(i, Message(m.role, tuple(Block.tool_result(b.id or "", PRUNED, b.is_error, pruned=True)
                                                      if j in by_msg[i] else b for j, b in enumerate(m.blocks)), m.meta))
        self.set_history(h)
        self.counters.extra["pruned_tool_outputs"] += len(marks)
        return len(marks)

    # --- compaction ----------------------------------------------------------------------------------
    def should_compact(self, call: CallInfo) -> bool:
        last = self.anchor.anchor  # the last step's input (cache included) + output
        return last is not None and last >= self.usable()

    def _tail(self, msgs: list[Message]) -> list[Message]:
        budget = tail_budget(self.usable())
        starts = [i for i, m in enumerate(msgs) if is_plain_user(m)]
        for k in range(min(self.config.tail_turns, len(starts)), 0, -1):
            tail = msgs[starts[-k]:]
            if self.tokens_of(tail) <= budget:
                return tail
        return []

    def compact(self, call: CallInfo) -> bool | None:
        c = self.config
        msgs = list(self.history)
        if not msgs:
            return None
        tail = self._tail(msgs)
        head = msgs[:len(msgs) - len(tail)]
        if not head:  # the tail is everything: summarise it all
            head, tail = msgs, []
        req = Request(SystemPrompt(), ToolSet(), History([Message.user(transcript_text(head, SUMMARY_TOOL_CHARS))]))
        res = self.side_call(req, CallSpec(kind=SUMMARY, instructions=PROMPT, max_output_tokens=c.summary_max_tokens))
        if res is None or not res.text.strip():
            return False
        new = [Message.user(COMPACTION_ASK, origin="summary_request"),
               Message("assistant", (Block.text_block(res.text.strip()),), {"origin": "summary"}),
               *tail, Message.user(CONTINUE, origin="continuation")]
        self.set_history(History(new))
        return True

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        if "overflow" not in rejection.reasons or rejection.attempt > 2:
            return False
        return self.compact_now(call)

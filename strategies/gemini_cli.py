"""gemini_cli: Google gemini-cli's context management: tool-output masking, arrival truncation,
and chat compression (state snapshot + verification).

Source: google-gemini/gemini-cli, read at the release tag **v0.56.0** (commit b6e23a7d, 2026-08-19; the
newest release when read, 2026-08-22, and nightly 5411f113 has the same values; the same rules since
v0.30.0 unless noted): ``packages/core/src/context/chatCompressionService.ts`` (``findCompressSplitPoint``,
``truncateHistoryToBudget``, ``ChatCompressionService.compress``),
``context/toolOutputMaskingService.ts``, ``core/client.ts`` (``sendMessageStream``,
``tryCompressChat``, ``tryMaskToolOutputs``, ``startChat``), ``scheduler/tool-executor.ts``
(``truncateOutputIfNeeded``), ``utils/fileUtils.ts`` (``formatTruncatedToolOutput``) and
``config/config.ts`` (``getTruncateToolOutputThreshold``). Before every model call, in this order:

* **compression**, when the last prompt's token count ≥ 0.5 × the model's token limit: tool
  responses are walked newest first against a 50,000-token budget and older ones over the
  truncation threshold are saved to a file and cut; the newest 30% of history (by JSON characters)
  is kept, split only on a user message that is not a function response; two LLM calls with the
  compression prompt as system instruction and no tools (a ``<state_snapshot>``, then a "probe" that
  re-checks it); the summariser gets the original part when it is under the token limit, else the
  truncated one. New history: snapshot, "Got it. Thanks for the additional context!", the kept part.
  It is refused when the new *history* (its own token count: system prompt and tools are not in
  it) is larger than the last prompt; that failure (and only that one) sets
  ``hasFailedCompressionAttempt``, after which automatic attempts only truncate (no LLM call); a
  successful compression starts a new chat, which resets the flag (v0.30.0 had no truncation
  fallback: it did nothing once failed). An empty snapshot fails without setting the flag;
* **tool-output masking**, every turn (on by default since v0.30.0): the newest 50,000 tokens of
  tool output (and the latest turn) are protected; older outputs are masked only once at least
  30,000 tokens of them are prunable: each is saved to a file and replaced by a
  ``<tool_output_masked>`` preview (head and tail) naming that file;
* **arrival truncation** applies to shell and MCP tool outputs only, over
  ``min(40,000, 4 × (token limit − last prompt tokens))`` characters: the first 20% and the last 80%
  of that many characters, the whole output in a file;
* a request estimated over what is left of the window is not sent: the turn ends
  (``ContextWindowWillOverflow``).

``release="2025-12"`` is this module's reading before 2026-12 (kept to reproduce earlier numbers): no
masking, arrival truncation of every tool's output at 40,000 characters, the shrink check on the
whole request, the summariser given the original part only under the limit − 20,000, and any failure
(a failed call, an empty or inflated snapshot) switching to truncation for the rest of the session.

Token figures are gemini-cli's estimate: characters / 4, anchored on the last reported usage. The
probe's answer replaces the snapshot only when it contains a ``<state_snapshot>``. A side call that
fails (an API error) makes gemini-cli's turn error; here it is a failed compression that leaves the
flag alone, and the request goes on. Tool names: shell tools are ``run_shell_command`` and the
spellings other agents' logs use (``Bash``, ``shell``, ``exec_command``); MCP tools are ``mcp__…``
(Claude Code's naming) or listed in ``mcp_tools``. The prompts are this project's own wording.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from ctxsim.harness.llm.services import SUMMARY, VERIFY, CallSpec
from ctxsim.harness.model.conversation import Block, History, Message, Request, SystemPrompt, ToolSet
from ctxsim.strategies.base import CallInfo, Rejection
from ctxsim.strategies.templates import PeerConfig, ThresholdCompactor, chars_to_tokens, input_strings
from pydantic import Field

# every constant read at v0.56.0 (b6e23a7d), file and line under packages/core/src/
COMPRESSION_THRESHOLD = 0.5  # context/chatCompressionService.ts:41 DEFAULT_COMPRESSION_TOKEN_THRESHOLD
PRESERVE_FRACTION = 0.3  # chatCompressionService.ts:47 COMPRESSION_PRESERVE_THRESHOLD
FUNCTION_RESPONSE_TOKEN_BUDGET = 50_000  # chatCompressionService.ts:52 COMPRESSION_FUNCTION_RESPONSE_TOKEN_BUDGET
TRUNCATE_THRESHOLD_CHARS = 40_000  # config/config.ts:478 DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD
HEAD_SHARE = 0.2  # utils/fileUtils.ts:668 formatTruncatedToolOutput: headChars = floor(maxChars * 0.2)
SAFE_BUFFER_TOKENS = 20_000  # release 2025-12 reading: summariser gets the truncated history above limit − this
PROTECTION_THRESHOLD_TOKENS = 50_000  # context/toolOutputMaskingService.ts:25 DEFAULT_TOOL_PROTECTION_THRESHOLD
MIN_PRUNABLE_TOKENS = 30_000  # toolOutputMaskingService.ts:26 DEFAULT_MIN_PRUNABLE_TOKENS_THRESHOLD
RECENT_NAME_SHARE = 0.9  # of the protected characters, what outputs alone fill (masking counts each tool's name too) # assumed
MASK_TAG = "tool_output_masked"  # toolOutputMaskingService.ts:28 MASKING_INDICATOR_TAG
MASK_EXEMPT_TOOLS = ("activate_skill", "ask_user", "enter_plan_mode", "exit_plan_mode")  # :36 EXEMPT_TOOLS
SHELL_TOOLS = ("run_shell_command", "Bash", "shell", "exec_command")  # SHELL_TOOL_NAME and other agents' spellings
_SAVED_NAME = re.compile(r"tool-outputs/([^/\s\"'`<>]+)")  # a file of its saved outputs named in a tool input
MCP_PREFIX = "mcp__"  # Claude Code's MCP tool naming (gemini-cli: DiscoveredMCPTool instances)
ACK = "Got it. Thanks for the additional context!"
SNAPSHOT_SECTIONS = ("overall_goal", "active_constraints", "key_knowledge", "artifact_trail",
                     "file_system_state", "recent_actions", "task_state")

COMPRESSION_SYSTEM = """\
You compress the history of a coding agent's session into a state snapshot that will replace it. \
The agent will only see the snapshot and the most recent turns, so keep every goal, constraint, \
decision, file path, command and error that still matters, and nothing that does not. \
Reply with a single <state_snapshot> XML element holding these children: {sections}."""
NEW_SNAPSHOT = "Generate a new <state_snapshot> from the history above. Think first, then write it."
MERGE_SNAPSHOT = ("A previous <state_snapshot> is in the history. Carry every still-relevant item of it into "
                  "the new one, updated with what happened since. Think first, then write it.")
PROBE = ("Check the <state_snapshot> you just wrote against the history: is any file path, tool result, "
         "technical detail or user constraint missing or vague? If so, write a final, corrected "
         "<state_snapshot>; otherwise repeat the same <state_snapshot> exactly.")


def format_truncated(content: str, output_file: str, max_chars: int, head_share: float = HEAD_SHARE) -> str:
    """``formatTruncatedToolOutput``: head 20% and tail 80% of ``max_chars`` around a marker."""
    if len(content) <= max_chars:
        return content
    head_chars = int(max_chars * head_share)
    tail_chars = max_chars - head_chars
    omitted = len(content) - head_chars - tail_chars
    return (f"Output too large. Showing first {head_chars:,} and last {tail_chars:,} characters. "
            f"For full output see: {output_file}\n{content[:head_chars]}\n\n"
            f"... [{omitted:,} characters omitted] ...\n\n{content[len(content) - tail_chars:]}")


def message_json_chars(m: Message) -> int:
    """The length gemini-cli measures a message by (``JSON.stringify(content).length``), once per message."""
    return m.memo("json_chars", Message.api_json_chars)


def compress_split_point(messages: list[Message], fraction: float) -> int:
    """``findCompressSplitPoint``: index of the oldest message to keep (``len`` = compress all)."""
    if not 0 < fraction < 1:
        raise ValueError("fraction must be between 0 and 1")
    counts = [message_json_chars(m) for m in messages]
    target = sum(counts) * fraction
    last_split, cum = 0, 0
    for i, m in enumerate(messages):
        if m.role == "user" and not m.has_tool_result:
            if cum >= target:
                return i
            last_split = i
        cum += counts[i]
    if messages and messages[-1].role == "assistant" and not messages[-1].has_tool_use:
        return len(messages)
    return last_split


class GeminiCliConfig(PeerConfig):
    release: Literal["0.56", "2025-12"] = Field("0.56", description="0.56: the current release (masking every "
                                                "turn, arrival truncation of shell/MCP output only, shrink check on "
                                                "history, reset after a success); 2025-12: this module's older reading")
    threshold: float = Field(COMPRESSION_THRESHOLD, gt=0, le=1, description="compress when the last prompt "
                             "reaches this share of the token limit (0.5; 0.7 before Oct 2025)")
    preserve_fraction: float = Field(PRESERVE_FRACTION, gt=0, lt=1, description="newest share of history "
                                     "(by characters) kept verbatim")
    function_response_token_budget: int = Field(FUNCTION_RESPONSE_TOKEN_BUDGET, ge=0, le=10_000_000,
                                                 description="newest tool responses kept whole up to this")
    truncate_threshold_chars: int = Field(TRUNCATE_THRESHOLD_CHARS, ge=100, le=100_000_000,
                                          description="a tool output over this is saved to a file and cut")
    summary_max_tokens: int = Field(16_000, ge=256, le=200_000, description="output bound of each call")
    verify: bool = Field(True, description="make the second (probe) call")
    protection_threshold_tokens: int = Field(PROTECTION_THRESHOLD_TOKENS, ge=0, le=10_000_000,
                                             description="masking: newest tool output kept whole (release 0.56)")
    min_prunable_tokens: int = Field(MIN_PRUNABLE_TOKENS, ge=0, le=10_000_000,
                                     description="masking: mask only once this much older tool output is prunable")
    mcp_tools: tuple[str, ...] = Field((), description="tool names treated as MCP tools (besides mcp__…)")


class GeminiCli(ThresholdCompactor):
    name = "gemini_cli"

    @classmethod
    def summarises_dropped(cls, config) -> bool:
        # its compactions summarise what they drop (the kit's ``summarised``)
        return True

    @classmethod
    def compaction_tail(cls, config, window: int, max_output_tokens: int) -> tuple:
        """``findCompressSplitPoint(history, 1 - preserve_fraction)``: the tail starts at the first user message (not
        a function response) with at least the rest of the history's JSON characters before it: it holds at most
        ``preserve_fraction`` of them where such a message stands."""
        return ((0, config.preserve_fraction, "share"),)

    @classmethod
    def keeps_recent_tool_chars(cls, config) -> int:
        """The newest tool output both budgets leave whole, newest first: masking protects
        ``protection_threshold_tokens`` (counting each output's tool name beside it: a tenth off for names,
        assumed), a compression's truncation ``function_response_token_budget``; at 4 characters a token."""
        tokens = config.function_response_token_budget
        if config.release == "0.56":   # masking (release 2025-12 has none)
            tokens = min(tokens, config.protection_threshold_tokens)
        return int(tokens * config.chars_per_token * RECENT_NAME_SHARE)

    summary = "gemini-cli 0.56: mask old tool output every turn; at 50% keep newest 30%, <state_snapshot> + verify"
    on_rejection = "refuses to send a request over its limit; the turn ends (gemini-cli client.ts ContextWindowWillOverflow)"
    Config = GeminiCliConfig

    @staticmethod
    def check_params(window: int) -> dict:
        """The property kit's small window: masking's absolute thresholds (50,000 and 30,000 tokens), the
        summariser's budget of newest tool responses and the size over which an output is cut (40,000
        characters: else no output of the kit's reaches it) at the same share of the window as on 200k,
        as the peers' (unscaled, masking would never start before compression at half of 32k)."""
        scale = window / 200_000
        return {"protection_threshold_tokens": int(PROTECTION_THRESHOLD_TOKENS * scale),
                "min_prunable_tokens": int(MIN_PRUNABLE_TOKENS * scale),
                "function_response_token_budget": int(FUNCTION_RESPONSE_TOKEN_BUDGET * scale),
                "truncate_threshold_chars": max(100, int(TRUNCATE_THRESHOLD_CHARS * scale))}

    def __init__(self, config, env) -> None:
        super().__init__(config, env)
        self.has_failed = False
        self.truncation_id = 0
        self.tool_names: dict[str, str] = {}  # tool_use id -> tool name
        self.tool_inputs: dict[str, str] = {}  # tool_use id -> the strings of its input, joined
        self._mask_memo: dict[int, tuple[Message, tuple]] = {}  # id(message) -> (message, its maskable outputs)

    @property
    def current(self) -> bool:
        return self.config.release == "0.56"

    def on_response(self, message: Message, usage) -> None:
        for b in message.blocks:
            if b.type == "tool_use" and b.id:
                self.tool_names[b.id] = b.name or ""
                self.tool_inputs[b.id] = "\n".join(input_strings(b.input or {})).replace("\\", "/")
        super().on_response(message, usage)

    @classmethod
    def keeps_results_whole_left(cls, config) -> tuple[int, float | None, tuple[str, ...] | None]:
        """:meth:`threshold_chars`: release 0.56 cuts only shell and MCP output (those of ``mcp_tools`` declared; an
        ``mcp__`` name is not), at the least of its threshold and 4 characters a token of the room left; 2025-12 cuts
        every tool's output past its threshold."""
        if config.release == "2025-12":
            return config.truncate_threshold_chars, None, None
        return config.truncate_threshold_chars, 4.0, (*SHELL_TOOLS, *config.mcp_tools)

    def threshold_chars(self) -> int:
        """``getTruncateToolOutputThreshold``: 40,000, or less when the window is nearly full."""
        c = self.config
        if not self.current:
            return c.truncate_threshold_chars
        left = self.env.window - (self.anchor.last_input or 0)
        return min(int(4 * left), c.truncate_threshold_chars)

    def reads_saved(self, tool_use_id: str | None) -> bool:
        """The call reads back an output this strategy saved (its input names ``tool-outputs/<file>``):
        that output is not cut and saved again (N-SPILL-3, held by the property kit for every
        strategy; gemini-cli's shell tool would cut a ``cat`` of it again: assumed, as opencode's read
        tool pages a saved file instead of cutting it)."""
        text = self.tool_inputs.get(tool_use_id or "", "")
        if "tool-outputs/" not in text:
            return False
        # read on disk, as a new process of the agent would: an output saved in an earlier launch is its own too
        saved = Path(self.output_path("tool-outputs", "_")).parent
        return any((saved / name).is_file() for name in _SAVED_NAME.findall(text))

    def truncated_on_arrival(self, tool_use_id: str | None) -> bool:
        if self.reads_saved(tool_use_id):
            return False
        if not self.current:
            return True
        name = self.tool_names.get(tool_use_id or "", "")
        return name in SHELL_TOOLS or name.startswith(MCP_PREFIX) or name in self.config.mcp_tools

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:  # a new process: its counters start again (the saved outputs' names carry the call id too)
            self.has_failed = False
            self.truncation_id = 0

    # --- tool outputs ----------------------------------------------------------------------------
    def _save(self, content: str, tool_use_id: str) -> str | None:
        self.truncation_id += 1
        return self.save_output("tool-outputs", f"{tool_use_id}_{self.truncation_id}", content)

    def on_tool_results(self, message: Message) -> None:
        limit = self.threshold_chars()
        blocks = []
        for b in message.blocks:
            if b.type == "tool_result" and 0 < limit < len(b.text) and self.truncated_on_arrival(b.id):
                path = self._save(b.text, b.id or "result")
                if path is not None:
                    b = Block.tool_result(b.id or "", format_truncated(b.text, path, limit), b.is_error, saved=path)
            blocks.append(b)
        super().on_tool_results(Message(message.role, tuple(blocks), message.meta))

    def truncate_to_budget(self, messages: list[Message]) -> list[Message]:
        """``truncateHistoryToBudget``: newest tool responses whole up to the budget; older ones over
        the truncation threshold saved and cut (one file per truncation, as gemini-cli does). A read
        of an output it saved stays whole here too, as on arrival (:meth:`reads_saved`)."""
        c = self.config
        limit = self.threshold_chars()
        used = 0
        out: list[Message] = []
        for m in reversed(messages):
            if not m.has_tool_result:
                out.append(m)
                continue
            blocks = []
            changed = False
            for b in reversed(m.blocks):
                if b.type != "tool_result":
                    blocks.append(b)
                    continue
                tok = chars_to_tokens(len(b.text), c.chars_per_token)
                if (used + tok > c.function_response_token_budget and 0 < limit < len(b.text)
                        and not b.meta.get("saved") and not self.reads_saved(b.id)):
                    path = self._save(b.text, b.id or "result")
                    if path is not None:
                        b = Block.tool_result(b.id or "", format_truncated(b.text, path, limit),
                                              b.is_error, saved=path, **({"masked": True} if b.meta.get("masked") else {}))
                        changed = True
                used += chars_to_tokens(len(b.text), c.chars_per_token)
                blocks.append(b)
            out.append(Message(m.role, tuple(reversed(blocks)), m.meta) if changed else m)
        out.reverse()
        return out

    # --- compression -----------------------------------------------------------------------------
    def should_compact(self, call: CallInfo) -> bool:
        last = self.anchor.last_input
        if last is None:
            return False  # no prompt sent yet: gemini-cli's last prompt token count is 0
        return last >= self.config.threshold * self.env.window

    def _tokens(self, messages: list[Message]) -> int:
        """The whole request (system prompt and tools too): release 2025-12's shrink check."""
        return self.env.system.opaque_tokens + chars_to_tokens(
            sum(len(b.payload) for b in self.env.system.blocks) + sum(len(t.payload) for t in self.env.tools.tools)
            + sum(m.chars for m in messages), self.config.chars_per_token)

    def _history_tokens(self, messages: list[Message]) -> int:
        """The history alone (``estimateTokenCountSync`` over its parts): release 0.56's checks."""
        if not self.current:
            return self._tokens(messages)
        return chars_to_tokens(sum(m.chars for m in messages), self.config.chars_per_token)

    def _fail(self, flag: bool) -> bool:
        if flag or not self.current:
            self.has_failed = True
        return False

    def compact(self, call: CallInfo) -> bool | None:
        """True: compressed (or truncated, after a failure); False: a failed compression (an LLM
        call failed, an empty or an inflated snapshot); None: nothing to do (no LLM call made)."""
        c = self.config
        original = self.anchor.last_input or 0
        msgs = list(self.history)
        truncated = self.truncate_to_budget(msgs)
        if self.has_failed:
            # truncation only, no LLM call
            self.counters.extra["truncation_fallbacks"] += 1
            if any(a is not b for a, b in zip(truncated, msgs, strict=True)) and self._history_tokens(truncated) < original:
                self.set_history(History(truncated))
                return True
            return None
        split = compress_split_point(truncated, 1 - c.preserve_fraction)
        if split == 0:
            self.counters.extra["compress_noop"] += 1
            return None
        original_part = msgs[:split]
        limit = self.env.window if self.current else self.env.window - SAFE_BUFFER_TOKENS
        for_summary = original_part if self._history_tokens(original_part) < limit else truncated[:split]
        previous = any("<state_snapshot>" in m.text for m in for_summary)
        system = SystemPrompt.of(COMPRESSION_SYSTEM.format(sections=", ".join(SNAPSHOT_SECTIONS)))
        req = Request(system, ToolSet(), History(for_summary))
        res = self.side_call(req, CallSpec(kind=SUMMARY, instructions=MERGE_SNAPSHOT if previous else NEW_SNAPSHOT,
                                           sections=SNAPSHOT_SECTIONS, max_output_tokens=c.summary_max_tokens))
        if res is None:
            return self._fail(False)
        snapshot = _as_snapshot(res.text)
        if c.verify:
            probe_req = Request(system, ToolSet(), History([*for_summary, Message("assistant", (Block.text_block(snapshot),))]))
            probe = self.side_call(probe_req, CallSpec(kind=VERIFY, instructions=PROBE, sections=SNAPSHOT_SECTIONS,
                                                       max_output_tokens=c.summary_max_tokens))
            if probe is None:
                return self._fail(False)
            if "<state_snapshot>" in probe.text:
                snapshot = probe.text.strip()
        if not snapshot.strip():
            return self._fail(False)  # COMPRESSION_FAILED_EMPTY_SUMMARY (no flag in 0.56)
        new = [Message.user(snapshot, origin="summary"), Message("assistant", (Block.text_block(ACK),), {"origin": "summary_ack"}),
               *truncated[split:]]
        if self._history_tokens(new) > original:
            self.counters.extra["rejected_inflated"] += 1
            return self._fail(True)  # COMPRESSION_FAILED_INFLATED_TOKEN_COUNT
        self.set_history(History(new))
        if self.current:
            self.has_failed = False  # startChat() after COMPRESSED
        return True

    # --- tool-output masking (release 0.56) --------------------------------------------------------
    def prepare(self, call: CallInfo) -> None:
        super().prepare(call)
        if self.current:
            self.mask_tool_outputs()

    def mask_tool_outputs(self) -> int:
        """``ToolOutputMaskingService.mask``: returns the number of outputs masked.

        The service walks every tool output, newest first, at every turn; here only the protected
        newest outputs are walked, and the older ones are read from running sums over the history
        (``History.fold_through``: each message is looked at once per history), so the work per
        turn does not grow with the session (issue 30). Numbers are those of the walk: every
        prunable output still takes a truncation id in walk order, and an output is only priced
        (its preview built) when it could be shorter masked (:meth:`_mask_candidates`)."""
        c = self.config
        h = self.history
        key = ("gemini_mask", id(self))
        cpt = c.chars_per_token
        crossing = self._mask_crossing(h, key, cpt)
        if crossing is None:
            return 0
        cross_i, cross_k = crossing
        older = h.fold_through(cross_i - 1, key, (0, 0, 0, None), self._mask_step)
        cross = self._mask_candidates(h[cross_i])[cross_k:]
        prunable = (older[1] + sum(ch for _, ch, _ in cross)) / cpt
        if prunable < c.min_prunable_tokens:
            return 0
        # parts in walk order: the crossing message's from the crossing output, then older messages'
        maybe: list[tuple[int, int, int]] = []  # (message, block, ordinal among parts)
        for k, (j, _, could) in enumerate(cross):
            if could:
                maybe.append((cross_i, j, k))
        node, nparts = older[3], len(cross)
        while node is not None:
            i, node = node
            cands = self._mask_candidates(h[i])
            after = h.fold_through(i, key, (0, 0, 0, None), self._mask_step)[2]  # candidates in messages 0..i
            first = nparts + older[2] - after   # ordinal of message i's newest candidate
            for k, (j, _, could) in enumerate(cands):
                if could:
                    maybe.append((i, j, first + k))
        base = self.truncation_id
        self.truncation_id += nparts + older[2]
        by_msg: dict[int, dict[int, Block]] = {}
        for i, j, ordinal in maybe:
            b = h[i].blocks[j]
            name = self.tool_names.get(b.id or "", "")
            tok = (len(name) + len(b.text)) / cpt
            # the real service writes the file before it knows the saving; a file no masked
            # preview names is never read, so it is written only when the output is masked (else
            # an output too short to mask is rewritten at every call: work growing with history)
            file_name = f"{b.id or 'result'}_{base + ordinal + 1}"
            snippet = masked_snippet(b.text, self.output_path("tool-outputs", file_name), shell=name in SHELL_TOOLS)
            gain = tok - (len(name) + len(snippet)) / cpt
            if gain > 0:
                path = self.save_output("tool-outputs", file_name, b.text)
                if path is None:
                    continue
                by_msg.setdefault(i, {})[j] = Block.tool_result(b.id or "", snippet, b.is_error, saved=path, masked=True)
        if not by_msg:
            return 0
        for i in sorted(by_msg):
            m = h[i]
            h = h.replace_at(i, Message(m.role, tuple(by_msg[i].get(j, b) for j, b in enumerate(m.blocks)), m.meta))
        # re-based as a share of the anchored estimate (templates.rebased_estimate): the saving taken
        # away at chars_per_token left the estimate 66% high once dense output was masked (issue #45)
        self.set_history(h, estimate=self.rebased_estimate(h))
        n = sum(len(v) for v in by_msg.values())
        self.counters.extra["masked_tool_outputs"] += n
        return n

    def _mask_crossing(self, h: History, key: object, cpt: float) -> tuple[int, int] | None:
        """The output at which the newest outputs (the latest message aside) pass the protection
        threshold, as (message, position among its candidates), or None. Found on the running sums
        by bisection; the service's own walk (a float sum, newest first) decides when the sum lands
        within rounding of the threshold."""
        thr = self.config.protection_threshold_tokens
        last = len(h) - 2
        if last < 0:
            return None
        total = h.fold_through(last, key, (0, 0, 0, None), self._mask_step)[1]
        if total / cpt <= thr:
            return self._mask_walk(h, cpt) if abs(total / cpt - thr) <= 1e-6 * max(1.0, thr) else None
        lo, hi = 0, last   # the newest message i with total - chars(0..i-1) > thr: messages i..last pass it
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if (total - h.fold_through(mid - 1, key, (0, 0, 0, None), self._mask_step)[1]) / cpt > thr:
                lo = mid
            else:
                hi = mid - 1
        i = lo
        before = total - h.fold_through(i, key, (0, 0, 0, None), self._mask_step)[1]  # chars of messages i+1..last
        for k, (_, chars, _) in enumerate(self._mask_candidates(h[i])):
            if (before + chars) / cpt > thr:
                if min((before + chars) / cpt - thr, thr - before / cpt) <= 1e-6 * max(1.0, thr):
                    return self._mask_walk(h, cpt)
                return i, k
            before += chars
        return self._mask_walk(h, cpt)  # not reached: rounding; the walk decides

    def _mask_walk(self, h: History, cpt: float) -> tuple[int, int] | None:
        """The service's walk to the crossing, newest first, summing tokens as it does."""
        cum = 0.0
        for i in range(len(h) - 2, -1, -1):  # protectLatestTurn: the newest message is skipped
            for k, (_, chars, _) in enumerate(self._mask_candidates(h[i])):
                cum += chars / cpt
                if cum > self.config.protection_threshold_tokens:
                    return i, k
        return None

    def _mask_candidates(self, m: Message) -> tuple[tuple[int, int, bool], ...]:
        """The outputs of ``m`` masking may take, newest (last) block first: (block index, the
        characters the service counts: tool name + output, could masking shorten it). An output
        whose preview (head and tail, with the shortest path a file can have) is not shorter than
        the output itself never gains, whatever its truncation id: it is counted, never priced."""
        memo = self._mask_memo
        got = memo.get(id(m))
        if got is not None and got[0] is m:
            return got[1]
        out = []
        if m.has_tool_result:
            min_path = len(str(Path(self.env.session_dir) / "tool-outputs")) + 1 + len(".txt")
            for j in range(len(m.blocks) - 1, -1, -1):
                b = m.blocks[j]
                name = self.tool_names.get(b.id or "", "")
                if b.type != "tool_result" or name in MASK_EXEMPT_TOOLS or f"<{MASK_TAG}" in b.text:
                    continue
                could = len(b.text) > len(masked_snippet(b.text, "", shell=name in SHELL_TOOLS)) + min_path
                out.append((j, len(name) + len(b.text), could))
        got = memo[id(m)] = (m, tuple(out))
        return got[1]

    def _mask_step(self, state: tuple, m: Message) -> tuple:
        """Through ``m``: (messages, characters and count of the maskable outputs, a linked list
        (index, next) of the messages holding one that masking could shorten, newest first)."""
        n, chars, count, node = state
        cands = self._mask_candidates(m)
        if any(could for _, _, could in cands):
            node = (n, node)
        return (n + 1, chars + sum(ch for _, ch, _ in cands), count + len(cands), node)

    def on_rejected(self, rejection: Rejection, call: CallInfo) -> bool:
        """``ContextWindowWillOverflow``: the request is not sent and the turn ends."""
        return False


def simple_preview(content: str) -> str:
    """``formatSimplePreview``: up to 20 lines whole, else the first and last 10 lines."""
    lines = content.split("\n")
    if len(lines) <= 20:
        return content
    return "\n".join(lines[:10]) + f"\n\n... [{len(lines) - 20} lines omitted] ...\n\n" + "\n".join(lines[-10:])


def masked_snippet(content: str, path: str, shell: bool) -> str:
    """``formatMaskedSnippet``: a shell output keeps its first and last 10 lines (shell.ts sections
    are not parsed here), any other output its first and last 250 characters."""
    if shell:
        preview = simple_preview(content)
    elif len(content) > 500:
        preview = f"{content[:250]}\n... [TRUNCATED] ...\n{content[-250:]}"
    else:
        preview = content
    return f"<{MASK_TAG}>\n{preview}\n\nOutput too large. Full output available at: {path}\n</{MASK_TAG}>"


def _as_snapshot(text: str) -> str:
    t = text.strip()
    return t if "<state_snapshot>" in t else f"<state_snapshot>\n{t}\n</state_snapshot>"

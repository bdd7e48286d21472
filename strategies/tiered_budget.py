"""tiered_budget: each kind of tool result has its own budget, and what exceeds it is spilled to a
file or cut, per tier (spec/novacode.md section 8: "tiered budgets for tool results").

Model. A tool result is classified by its tool's name into a tier: ``read`` (file contents: large
budget, overflow spilled, because the exact text matters and can be read back), ``shell`` (command
output and test logs: small budget, overflow cut keeping a head and a longer tail, where test
failures and stack traces end up), ``search`` (grep/glob hits: small budget, cut) and ``other``.
Each tier has a budget in characters and a mode:

* ``spill``: the whole result is written to ``<session_dir>/tool-results/<tool_use_id>.txt`` and the
  history keeps its first ``budget`` characters plus the file's path and size (reversible: the model
  can read the file back, and the engine bills that read-back);
* ``cut``: the history keeps ``head_share`` of the budget from the start and the rest from the end,
  with a marker saying how much was dropped (irreversible, as Codex CLI's head+tail truncation);
* ``keep``: no budget.

A result is final once it enters history (never rewritten later, so cached prefixes stay
byte-stable); a read-back of a spilled file is exempt (no read/spill loop, as N-SPILL-3), and a
failed disk write leaves the result inline, marked, and is not retried (as N-SPILL-4).

Defaults are Claude Code's per-tool limits (closed source, reported): shell output middle-cut at
30,000 characters (``BASH_MAX_OUTPUT_DEFAULT`` in ``utils/shell/outputLimits.ts`` of the published
source dump; middle truncation per anthropics/claude-code #19901), the same budget for search output;
a file read capped at 25,000 tokens (``MaxFileReadTokenExceededError``, anthropics/claude-code #4002,
#14876), about 100,000 characters at 4 per token, the rest persisted to a file as current releases
do (#31674); other tools (MCP) 25,000 tokens (``MAX_MCP_OUTPUT_TOKENS``, code.claude.com/docs
env-vars). The head/tail split of a cut is gemini-cli's 20% / 80% (peers.md).

Budgets bound what each result costs, not the window: the conversation still grows, so the strategy
has the fallback of the agent whose limits it uses, Claude Code's auto-compaction (window −
min(max output, 20,000) − 13,000, reported; N-COMP-1/2: a billed summary in its nine sections, a
N-COMP-6 tail), and compacts at once when a request is rejected as too long.

Sources: NovaCode's single 50,000-character spill threshold (N-SPILL-1) generalised per tool; Codex
CLI's head+tail cut of tool output (about 12k tokens); gemini-cli's 40,000-character shell budget
with 20% head / 80% tail kept; SWE-agent's clipping of observations over 100,000 characters
(peers.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ctxsim.harness.files import confined
from ctxsim.harness.model.conversation import Block, Message
from ctxsim.strategies.base import StrategyEnv
from ctxsim.strategies.structured_state import WindowedConfig, WindowedStrategy, split_names
from pydantic import Field, field_validator

SHELL_CHARS = 30_000   # Claude Code BASH_MAX_OUTPUT_DEFAULT (utils/shell/outputLimits.ts, reported)
READ_CHARS = 100_000   # Claude Code Read: 25,000 tokens (MaxFileReadTokenExceededError, reported) x 4 chars
OTHER_CHARS = 100_000  # Claude Code MAX_MCP_OUTPUT_TOKENS 25,000 (docs env-vars) x 4 chars

Mode = Literal["spill", "cut", "keep"]
TIERS = ("read", "shell", "search", "other")

SPILLED = ("<persisted-output>\n{head}\n[... {rest:,} more characters. The whole output ({size:,} characters) "
           "is saved at {path} — read that file to see the rest.]\n</persisted-output>")
CUT_MARKER = "\n[... {n:,} characters cut from the middle of this output ...]\n"


class TieredBudgetConfig(WindowedConfig):
    read_tools: tuple[str, ...] = Field(("Read", "NotebookRead", "read_file", "view", "open_file", "WebFetch"),
                                        description="tools in the read tier")
    shell_tools: tuple[str, ...] = Field(("Bash", "shell", "exec_command", "execute_bash", "run", "BashOutput"),
                                         description="tools in the shell tier (command output, test logs)")
    search_tools: tuple[str, ...] = Field(("Grep", "Glob", "LS", "search", "find_file", "search_dir", "list_files"),
                                          description="tools in the search tier")
    read_budget_chars: int = Field(READ_CHARS, ge=100, le=10_000_000, description="read tier: characters kept inline")
    read_mode: Mode = Field("spill", description="read tier: what happens beyond the budget")
    shell_budget_chars: int = Field(SHELL_CHARS, ge=100, le=10_000_000, description="shell tier: characters kept inline")
    shell_mode: Mode = Field("cut", description="shell tier: what happens beyond the budget")
    search_budget_chars: int = Field(SHELL_CHARS, ge=100, le=10_000_000, description="search tier: characters kept inline")
    search_mode: Mode = Field("cut", description="search tier: what happens beyond the budget")
    other_budget_chars: int = Field(OTHER_CHARS, ge=100, le=10_000_000, description="other tools: characters kept inline")
    other_mode: Mode = Field("spill", description="other tools: what happens beyond the budget")
    head_share: float = Field(0.2, ge=0, le=1,
                              description="cut mode: share of the budget kept from the start (the rest from the end; "
                              "gemini-cli keeps 20% head / 80% tail)")

    @field_validator("read_tools", "shell_tools", "search_tools", mode="before")
    @classmethod
    def _names(cls, v):
        """``--set read_tools=Read,View`` (or a JSON list) from the command line."""
        return split_names(v)


def cut_middle(text: str, budget: int, head_share: float) -> str:
    """``text`` cut to ``budget`` characters of content: the first ``head_share`` of it and the rest
    from the end, with a marker in between naming how much was dropped."""
    if len(text) <= budget:
        return text
    head = int(budget * head_share)
    tail = budget - head
    dropped = len(text) - head - tail
    return text[:head] + CUT_MARKER.format(n=dropped) + (text[-tail:] if tail else "")


class TieredBudget(WindowedStrategy):
    """Per-tier budgets on tool results: read spilled, shell and search cut, by default."""

    name = "tiered_budget"
    summary = "per-tool result budgets (reads large and spilled, logs and search small and cut)"
    Config = TieredBudgetConfig

    @classmethod
    def check_params(cls, window: int) -> dict[str, int]:
        """The window rule's parameters as the family scales them, and the tiers' budgets by
        window / 200,000 too, so the property kit's small window reaches the spill and cut."""
        out = super().check_params(window)
        f = cls.Config.model_fields
        scale = min(1.0, window / 200_000)
        for tier in TIERS:
            n = f"{tier}_budget_chars"
            out[n] = max(100, int(f[n].default * scale))
        return out

    @classmethod
    def result_cuts(cls, config) -> tuple[tuple[tuple[str, ...], int, float], ...]:
        """Each tier's budget: a cut keeps ``head_share`` of it from the start and the rest from the end, a spill
        the budget's first characters (then the file's note); a tier kept whole promises nothing."""
        out = []
        for tier in TIERS:
            limit, mode = getattr(config, f"{tier}_budget_chars"), getattr(config, f"{tier}_mode")
            if mode != "keep":
                tools = () if tier == "other" else tuple(getattr(config, f"{tier}_tools"))
                out.append((tools, limit, config.head_share if mode == "cut" else 1.0))
        return tuple(out)

    def __init__(self, config: TieredBudgetConfig, env: StrategyEnv) -> None:
        super().__init__(config, env)
        self.spill_dir = Path(env.session_dir) / "tool-results"
        self.spilled: set[str] = set()  # absolute paths written (read-backs of these are exempt)
        self._spill_tails: set[str] = set()  # their ``tool-results/<id>.txt`` tails (names_spill)

    def tier_of(self, tool_use_id: str) -> str:
        name, _ = self.tool_uses.get(tool_use_id, ("", {}))
        c = self.config
        if name in c.read_tools:
            return "read"
        if name in c.shell_tools:
            return "shell"
        if name in c.search_tools:
            return "search"
        return "other"

    def budget(self, tier: str) -> tuple[int, Mode]:
        return getattr(self.config, f"{tier}_budget_chars"), getattr(self.config, f"{tier}_mode")

    def is_readback(self, tool_use_id: str, message: Message) -> bool:
        if message.meta.get("origin") == "readback":
            return True
        _, inp = self.tool_uses.get(tool_use_id, ("", {}))
        return any(isinstance(v, str) and self.names_spill(v) for v in inp.values())

    def names_spill(self, value: str) -> bool:
        """``value`` names a file written here: its absolute path, or a path ending in
        ``tool-results/<id>.txt`` as the model may write it (relative to the agent's directory, not
        this process's working directory)."""
        if value in self.spilled:
            return True
        t = value.replace("\\", "/")
        for tail in self._spill_tails:
            if t == tail or t.endswith("/" + tail) or t.endswith(" " + tail):
                return True
        return False

    def on_tool_results(self, message: Message) -> None:
        blocks = [self.apply(b, message) if b.type == "tool_result" else b for b in message.blocks]
        super().on_tool_results(Message(message.role, tuple(blocks), message.meta))

    def apply(self, b: Block, message: Message) -> Block:
        tier = self.tier_of(b.id or "")
        limit, mode = self.budget(tier)
        readback = self.is_readback(b.id or "", message)
        if mode == "keep" or len(b.text) <= limit:
            return b.with_text(b.text, readback=True) if readback else b
        if readback:  # flagged: the family's per-message guard leaves it whole too (N-SPILL-3)
            self.counters.extra["readback_exempt"] += 1
            return b.with_text(b.text, readback=True)
        if mode == "cut":
            self.counters.extra[f"cut_{tier}"] += 1
            self.counters.extra["chars_cut"] += len(b.text) - limit
            return b.with_text(cut_middle(b.text, limit, self.config.head_share), cut=True)
        path = self.spill_dir / f"{_safe(b.id or 'result')}.txt"
        confined.guard(path)
        try:
            self.spill_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(b.text, encoding="utf-8")
        except OSError:
            self.counters.extra["spill_failed"] += 1
            return b.with_text(b.text, spill_exempt=True)  # as N-SPILL-4: stays inline, not retried
        path = path.resolve()
        self.spilled.add(str(path))
        self._spill_tails.add("/".join(path.parts[-2:]))
        self.counters.spills += 1
        self.counters.extra[f"spill_{tier}"] += 1
        text = SPILLED.format(head=b.text[:limit], rest=len(b.text) - limit, size=len(b.text), path=path)
        return b.with_text(text, spilled=str(path))


def _safe(name: str) -> str:
    """A file name stem for an id: safe and injective, however long or odd the id (ctxsim.harness.files.filenames)."""
    from ctxsim.harness.files.filenames import safe_stem

    return safe_stem(name)

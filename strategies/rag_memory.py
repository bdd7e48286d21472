"""rag_memory: Letta's memory hierarchy for a coding agent: a small core memory always in context,
the rest of the conversation in a searchable store the model queries, a short summary of what left
(spec/novacode.md section 8: "RAG-style memory (retrieve on demand, never inject everything)").

Practitioner: Letta (MemGPT), ``letta-ai/letta`` at tag 0.16.8 (commit 87fd37a's history), read in
``letta/constants.py``, ``letta/settings.py``, ``letta/functions/function_sets/base.py``,
``letta/services/summarizer/{summarizer_config,summarizer_sliding_window,thresholds}.py``,
``letta/prompts/summarizer_prompt.py`` and ``letta/agents/letta_agent_v3.py``.

Model, layer by layer:

* **Core memory** (Letta's memory blocks, always in context): a block holding the user's
  task-bearing messages (what a Letta agent files with ``core_memory_append``; hook output and task
  notifications are not tasks, see :func:`ctxsim.strategies.structured_state.is_task_message`), each cut to
  ``core_entry_chars``, the block to ``core_memory_chars`` (``CORE_MEMORY_HUMAN_CHAR_LIMIT`` = 20,000),
  the oldest entries going first but the current session's first request (its goal) kept. Each
  append is a billed model step (kind ``memory_edit``: the context in, the tool call out) whose
  tool_use and result (Letta returns the whole updated block) enter the conversation. The block is
  pinned at the head and re-rendered only after a compaction: Letta 0.16.8 "skip[s] system prompt
  refresh during normal steps to preserve prefix caching" and rebuilds it after compaction
  (``letta_agent_v3.py``). It persists across sessions (a Letta agent's blocks outlive any launch).
* **Recall memory** (``conversation_search``): every message that leaves the window — at a
  compaction, and what is still in the window when a session ends — is split into chunks of
  ``chunk_chars`` (Letta's ``DEFAULT_EMBEDDING_CHUNK_SIZE`` of 300 tokens, at 4 characters a token)
  and indexed; the chunks are also written to ``<session_dir>/rag/chunks.jsonl``. When a
  task-bearing user message arrives (and, if ``requery_every`` > 0, every that many calls of a long
  turn) the model searches: a billed step (kind ``retrieval``) whose ``conversation_search`` call
  carries the turn's text as the query, and whose result — the ``top_k`` best chunks
  (``RETRIEVAL_QUERY_DEFAULT_PAGE_SIZE`` = 5), at most ``inject_max_chars``
  (``FUNCTION_RETURN_CHAR_LIMIT`` = 50,000), in Letta's "Found N results:" form — enters the
  conversation. Letta's search is hybrid (text and embeddings); the text half is modelled, as Okapi
  BM25 (``rank_bm25``; no embedding model ships offline), so a cue that shares no word with what it
  needs finds nothing. A chunk already returned into the current window is not returned again.
  Archival memory is not modelled: 0.16.8 lists its tools as deprecated (``DEPRECATED_LETTA_TOOLS``).
* **The window** (Letta's ``sliding_window`` compaction, the default mode): when the estimate
  reaches ``SUMMARIZATION_TRIGGER_MULTIPLIER`` = 0.9 of the window, the oldest messages are evicted
  until what stays is under 70% of the window (``sliding_window_percentage`` 0.3:
  ``goal_tokens = (1 - 0.3) * context_window``), on a pair-safe boundary, and summarised by a billed
  call on ``summary_model`` (Letta's default summariser for Anthropic is ``claude-haiku-4-5``; on
  other providers the main model) with Letta's sliding-window sections and its 300-word limit. A
  request the API rejects as too long is compacted at once and retried (Letta compacts on
  ``context_window_exceeded`` and retries the step, ``letta_agent_v3.py``).

How retrieval quality is measured: through the probes. A fact needed at a probe scores as "in the
window" only if it never left, sits in core memory, or a search brought its chunk back.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from ctxsim.harness.files import confined
from ctxsim.harness.model.conversation import Block, History, Message, ToolDef
from ctxsim.strategies.base import CallInfo, StrategyEnv
from ctxsim.strategies.structured_state import (
    WindowedConfig,
    WindowedStrategy,
    is_task_message,
    keep_within,
    pair_safe_start,
)
from pydantic import Field

_WORD = re.compile(r"[a-z0-9]+(?:[_.\-/:][a-z0-9]+)*")
_SEP = re.compile(r"[_.\-/:]")
_HAS_SEP = _SEP.search



def tokenize(text: str) -> list[str]:
    """Lowercased words and identifiers; a compound identifier (``load_user``, ``a/b.py``,
    ``E123-4``) counts as itself and as each of its parts, so exact names and their pieces match."""
    out: list[str] = []
    for w in _WORD.findall(text.lower()):
        out.append(w)
        if _HAS_SEP(w):
            out.extend(p for p in _SEP.split(w) if p)
    return out


def message_text(m: Message, tool_names: dict[str, str]) -> str:
    """A message as the text a retriever indexes: tool calls and results labelled with the tool."""
    parts = []
    for b in m.blocks:
        if b.type == "tool_use":
            parts.append(f"[tool call {b.payload}]")
        elif b.type == "tool_result":
            parts.append(f"[result of {tool_names.get(b.id or '', 'tool')}]\n{b.text}")
        else:
            parts.append(b.text)
    return f"{m.role}: " + "\n".join(parts)


def chunk_text(text: str, chunk_chars: int) -> list[str]:
    """Chunks of at most ``chunk_chars`` characters, split on line boundaries (a longer line is
    split hard)."""
    chunks: list[str] = []
    cur: list[str] = []
    size = 0
    for line in text.split("\n"):
        while len(line) > chunk_chars:
            if cur:
                chunks.append("\n".join(cur))
                cur, size = [], 0
            chunks.append(line[:chunk_chars])
            line = line[chunk_chars:]
        if size + len(line) + (1 if cur else 0) > chunk_chars and cur:
            chunks.append("\n".join(cur))
            cur, size = [], 0
        cur.append(line)
        size += len(line) + (1 if len(cur) > 1 else 0)
    if cur and any(x.strip() for x in cur):
        chunks.append("\n".join(cur))
    return [c for c in chunks if c.strip()]


@dataclass(frozen=True)
class Chunk:
    id: int
    text: str
    source: int  # serial of the message it came from (order of eviction)


class ChunkStore:
    """The retrieval store: chunks and an incremental Okapi BM25 index over them.

    The index keeps what ``rank_bm25.BM25Okapi`` computes from scratch — each chunk's length, each
    term's document frequency (terms in the order the library's ``nd`` dict meets them), the total
    length — as chunks are added, and derives the library's idf (``ln(N - df + 0.5) - ln(df + 0.5)``,
    a negative one floored at ``epsilon`` x the mean idf, that mean summed left to right in the
    library's order) only when a search needs it. The values are bit-identical to the library's
    (tests/strategies/test_rag_memory.py checks them on random corpora); rebuilding it over the
    whole corpus at every search made a session's cost grow with its square (issue 21)."""

    EPSILON = 0.25  # BM25Okapi's default idf floor factor

    def __init__(self, k1: float, b: float, path: Path | None = None, max_query_terms: int = 32) -> None:
        self.k1, self.b = k1, b
        self.max_query_terms = max_query_terms
        self.chunks: list[Chunk] = []
        self._postings: dict[str, tuple[list[int], list[int]]] = {}  # term -> (chunk ids, term counts)
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # a term's postings, cached until it grows
        self._term_id: dict[str, int] = {}   # term -> position in the library's nd order
        self._df: list[int] = []             # document frequency by term position
        self._doc_len: list[int] = []
        self._total_len = 0
        self._log_half: list[float] = []     # math.log(k + 0.5) for k = 0..N
        self._idf_n = -1                     # corpus size the cached idf state is for
        self._idf_arr = np.zeros(0)
        self._eps = 0.0
        self._norm = np.zeros(0)
        self.path = path

    def __len__(self) -> int:
        return len(self.chunks)

    def add(self, texts: list[str], source: int) -> None:
        new = []
        for t in texts:
            c = Chunk(len(self.chunks), t, source)
            self.chunks.append(c)
            toks = tokenize(t) or ["<empty>"]
            self._doc_len.append(len(toks))
            self._total_len += len(toks)
            for w, n in Counter(toks).items():
                post = self._postings.get(w)
                if post is None:
                    post = self._postings[w] = ([], [])
                    self._term_id[w] = len(self._df)
                    self._df.append(0)
                post[0].append(c.id)
                post[1].append(n)
                self._df[self._term_id[w]] += 1
                self._arrays.pop(w, None)
            new.append(c)
        if new and self.path is not None:
            confined.guard(self.path)
            with self.path.open("a", encoding="utf-8") as fh:
                for c in new:
                    fh.write(json.dumps({"id": c.id, "source": c.source, "text": c.text}, ensure_ascii=False) + "\n")

    @property
    def avgdl(self) -> float:
        return self._total_len / len(self.chunks)

    def _refresh(self) -> None:
        """The idf of every term and the floor for the current corpus size, as BM25Okapi._calc_idf."""
        n = len(self.chunks)
        if self._idf_n == n:
            return
        while len(self._log_half) <= n:
            self._log_half.append(math.log(len(self._log_half) + 0.5))
        logs = np.asarray(self._log_half)
        df = np.asarray(self._df, dtype=np.int64)
        idf = logs[n - df] - logs[df]  # math.log(N - freq + 0.5) - math.log(freq + 0.5), term by term
        # the library's idf_sum += idf loop: a left-to-right sum (np.add.accumulate is sequential)
        average = float(np.add.accumulate(idf)[-1]) / len(df)
        self._eps = self.EPSILON * average
        idf[idf < 0] = self._eps
        self._idf_arr = idf
        doc_len = np.asarray(self._doc_len, dtype=float)
        self._norm = self.k1 * (1 - self.b + self.b * doc_len / self.avgdl)  # BM25's length term, per chunk
        self._idf_n = n

    def idf(self, term: str) -> float:
        """BM25Okapi's ``idf[term]`` (0 for a term no chunk has)."""
        i = self._term_id.get(term)
        if i is None or not self.chunks:
            return 0.0
        self._refresh()
        return float(self._idf_arr[i])

    def query_terms(self, query: str) -> list[str]:
        """The query's distinct indexed terms, the ``max_query_terms`` rarest (highest idf) of them:
        BM25 sums over query terms, and a long turn's common words only add noise and time."""
        if not self.chunks:
            return []
        self._refresh()
        ids = self._term_id
        terms = {w for w in tokenize(query) if w in ids}
        idf = {w: float(self._idf_arr[ids[w]]) for w in terms}
        return sorted(terms, key=lambda w: (-idf[w], w))[: self.max_query_terms]

    def scores(self, terms: list[str]) -> np.ndarray:
        """Okapi BM25 of every chunk for ``terms``: the same sum as ``BM25Okapi.get_scores`` (its idf,
        document lengths and average length), evaluated over each term's postings only, so a query
        costs the chunks that contain its terms rather than every chunk times every term."""
        self._refresh()
        norm = self._norm
        out = np.zeros(len(self.chunks))
        for w in terms:
            arr = self._arrays.get(w)
            if arr is None:
                docs, tfs = self._postings.get(w, ([], []))
                arr = self._arrays[w] = (np.asarray(docs, dtype=np.int64), np.asarray(tfs, dtype=float))
            docs, tf = arr
            out[docs] += self.idf(w) * tf * (self.k1 + 1) / (tf + norm[docs])
        return out

    def search(self, query: str, k: int, exclude: set[int] = frozenset()) -> list[tuple[Chunk, float]]:
        """The ``k`` best chunks with a positive BM25 score, best first (ties: newer first)."""
        if not self.chunks:
            return []
        q = self.query_terms(query)
        if not q:
            return []
        scores = self.scores(q)
        pos = np.flatnonzero(scores > 0)  # only these can be returned; sorting them alone is O(hits)
        order = pos[np.lexsort((-pos, -scores[pos]))].tolist()  # best first, a tie to the newer
        out = []
        for i in order:
            if len(out) >= k:
                break
            if i not in exclude:
                out.append((self.chunks[i], float(scores[i])))
        return out


TRIGGER_SHARE = 0.9      # letta/constants.py SUMMARIZATION_TRIGGER_MULTIPLIER
KEEP_SHARE = 0.7         # summarizer_sliding_window.py: goal = (1 - sliding_window_percentage 0.3) x window
CORE_MEMORY_CHARS = 20_000  # letta/constants.py CORE_MEMORY_HUMAN_CHAR_LIMIT
CHUNK_CHARS = 1_200      # letta/constants.py DEFAULT_EMBEDDING_CHUNK_SIZE = 300 tokens (x 4 characters)
TOP_K = 5                # letta/constants.py RETRIEVAL_QUERY_DEFAULT_PAGE_SIZE
RESULT_CHARS = 50_000    # letta/constants.py FUNCTION_RETURN_CHAR_LIMIT
SUMMARY_WORDS = 300      # letta/prompts/summarizer_prompt.py SLIDING_WORD_LIMIT
SUMMARY_TOKENS = 400     # those 300 words at about 1.3 tokens a word (assumed)
SUMMARIZER = "claude-haiku-4-5"  # summarizer_config.py get_default_summarizer_model(anthropic)
LETTA_SECTIONS = ("High level goals", "What happened", "Important details", "Errors and fixes", "Lookup hints")
LETTA_INSTRUCTIONS = ("The following messages are being evicted from the BEGINNING of your context window. Write a "
                      "detailed summary that captures what happened in these messages to appear BEFORE the "
                      "remaining recent messages in context. Include the following sections:\n{sections}\n"
                      "Preserve identifiers verbatim. Keep your summary under " + str(SUMMARY_WORDS) + " words.")
# letta/system.py package_summarize_message_no_counts, sliding_window mode
LETTA_CONTINUATION = ("Note: prior messages from the beginning of the conversation have been hidden from view due to "
                      "conversation memory constraints.\nThe following is a summary of the previous messages:\n {summary}")
SEARCH_TOOL = ToolDef("conversation_search", "Search prior conversation history (text and semantic similarity).", {
    "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}})
APPEND_TOOL = ToolDef("core_memory_append", "Append to the contents of core memory.", {
    "type": "object", "required": ["label", "content"],
    "properties": {"label": {"type": "string"}, "content": {"type": "string"}}})
CORE_BLOCK = """<memory_blocks>
The following memory blocks are always in your context (core memory); older messages are in recall \
memory (search them with conversation_search).
<task characters="{n}/{limit}">
{value}
</task>
</memory_blocks>"""


class RagMemoryConfig(WindowedConfig):
    transcript: bool = Field(False, description="also keep a transcript file and name it after a compaction (Letta's "
                             "path back is recall memory)")
    summary_model: str = Field(SUMMARIZER, max_length=100,
                               description="model of the summary call (Letta's default for Anthropic; the main model "
                               "on other providers; empty: always the main model)")
    summary_max_tokens: int = Field(SUMMARY_TOKENS, ge=100, le=200_000,
                                    description="output cap of the summary (Letta asks for under 300 words)")
    trigger_share: float = Field(TRIGGER_SHARE, gt=0, le=1, description="compact at this share of the window "
                                 "(Letta SUMMARIZATION_TRIGGER_MULTIPLIER); trigger_tokens overrides")
    keep_share: float = Field(KEEP_SHARE, gt=0, lt=1, description="evict until the request is under this share of "
                              "the window (Letta: 1 - sliding_window_percentage); keep_tokens overrides")
    core_memory: bool = Field(True, description="file task-bearing requests in a pinned core memory block")
    core_memory_chars: int = Field(CORE_MEMORY_CHARS, ge=0, le=1_000_000,
                                   description="core memory block limit (Letta CORE_MEMORY_HUMAN_CHAR_LIMIT); 0: none")
    core_entry_chars: int = Field(2_000, ge=10, le=1_000_000,
                                  description="one request is filed in core memory up to this many characters (assumed)")
    chunk_chars: int = Field(CHUNK_CHARS, ge=100, le=100_000, description="largest chunk of recall memory, in characters")
    top_k: int = Field(TOP_K, ge=1, le=100, description="chunks a search returns (Letta's page size)")
    inject_max_chars: int = Field(RESULT_CHARS, ge=100, le=1_000_000,
                                  description="cap on one search result (Letta FUNCTION_RETURN_CHAR_LIMIT)")
    search: bool = Field(True, description="the model searches recall memory at each task-bearing request (off: "
                         "measure what retrieval adds)")
    requery_every: int = Field(0, ge=0, le=10_000,
                               description="within a long turn, search again every this many calls (0: only when a "
                               "task-bearing user message arrives)")
    max_query_terms: int = Field(32, ge=1, le=10_000,
                                 description="a query keeps its this many rarest distinct terms (highest idf)")
    bm25_k1: float = Field(1.5, gt=0, le=5, description="BM25 term-frequency saturation (rank_bm25 default)")
    bm25_b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation (rank_bm25 default)")


class RagMemory(WindowedStrategy):
    """Core memory pinned, recall memory searched by billed steps, Letta's sliding-window summary."""

    name = "rag_memory"
    # Letta keeps an agent's core and recall memory in its database from one session to the next
    KEPT_ACROSS_LAUNCHES = "its core and recall memory (Letta's are in its database) and its token gauge"
    summary = "Letta-style memory: core block pinned, evicted history searched by billed steps, sliding summary"
    Config = RagMemoryConfig

    @classmethod
    def call_models(cls, config) -> dict[str, str]:
        return {"summary": config.summary_model}   # Letta's summariser on Anthropic (reset elsewhere at start)
    SCALED: ClassVar[tuple[str, ...]] = ("reserve_tokens",)
    SUMMARY_SECTIONS = LETTA_SECTIONS
    SUMMARY_INSTRUCTIONS = LETTA_INSTRUCTIONS
    CONTINUATION = LETTA_CONTINUATION
    on_rejection: ClassVar[str] = ("compacts at once and retries the step, deeper at each retry (Letta 0.16.8 "
                                   "letta_agent_v3.py, context_window_exceeded); the turn errors when nothing is left")

    def __init__(self, config: RagMemoryConfig, env: StrategyEnv) -> None:
        d = Path(env.session_dir) / "rag"
        confined.guard(d)
        d.mkdir(parents=True, exist_ok=True)
        self.rag_dir = d
        self.store = ChunkStore(config.bm25_k1, config.bm25_b, d / "chunks.jsonl", config.max_query_terms)
        self.indexed: set[bytes] = set()  # digests of messages already in the store
        self.core: list[tuple[str | None, str]] = []  # (session, entry)
        self.core_due: list[str] = []   # entries filed at the next call (one memory step)
        self.pending_query: str | None = None
        self.calls_since_query = 0
        self.session: str | None = None
        self.injected: set[int] = set()  # chunk ids returned into the current window
        self.evicted = 0
        if env.provider != "anthropic" and config.summary_model == SUMMARIZER:
            config = config.model_copy(update={"summary_model": ""})
        super().__init__(config, env)
        self.add_tool(SEARCH_TOOL)
        self.add_tool(APPEND_TOOL)

    # --- the window rule --------------------------------------------------------------------------------
    def rule_trigger(self) -> int:
        return int(self.config.trigger_share * self.env.window)

    def choose_start(self, h: History, lo: int, depth: int = 1) -> int:
        c = self.config
        keep = c.keep_tokens if c.keep_tokens is not None else int(c.keep_share * self.env.window) - self.head_tokens()
        keep = max(0, min(keep, self.trigger - self.head_tokens() - 1)) // (4 ** (depth - 1))
        return pair_safe_start(h, lo, keep, self.gauge)

    # --- core memory ------------------------------------------------------------------------------------
    def core_block(self) -> Message | None:
        if not self.core:
            return None
        value = "\n".join(e for _, e in self.core)
        limit = self.config.core_memory_chars or len(value)
        return Message.user(CORE_BLOCK.format(n=len(value), limit=limit, value=value), origin="memory")

    def file_in_core(self, text: str) -> None:
        """Append an entry; over the block limit the oldest go, the session's first request stays."""
        self.core.append((self.session, text[: self.config.core_entry_chars]))
        if self.config.core_memory_chars:
            self.core, dropped = keep_within(self.core, self.session, self.config.core_memory_chars,
                                             lambda e: len(e) + 1)
            self.counters.extra["core_entries_dropped"] += dropped
        confined.guard(self.rag_dir / "core_memory.md")
        (self.rag_dir / "core_memory.md").write_text("\n".join(e for _, e in self.core) + "\n", encoding="utf-8")

    def session_head(self, resume: bool) -> list[Message]:
        block = self.core_block()
        return [block] if block is not None else []

    # --- recall memory ----------------------------------------------------------------------------------
    def index(self, messages) -> None:
        names = {k: v[0] for k, v in self.tool_uses.items()}
        for m in messages:
            if m.meta.get("origin") in ("memory", "summary", "placeholder", "retrieval", "memory_edit") \
                    or m.digest in self.indexed:
                continue
            self.indexed.add(m.digest)
            self.evicted += 1
            self.store.add(chunk_text(message_text(m, names), self.config.chunk_chars), self.evicted)
        self.counters.extra["chunks_stored"] = len(self.store)

    def on_cut(self, dropped: History, start: int) -> list[Message] | None:
        self.index(dropped)
        # what a search returned before the cut left with it, unless its message is kept
        self.injected = {i for m in self.history[start:] for i in m.meta.get("chunks", ())}
        block = self.core_block()  # re-rendered after a compaction (Letta 0.16.8)
        return [block] if block is not None else []

    def on_session_end(self, session: str, now: float) -> None:
        """What is still in the window when the agent stops is in recall memory too."""
        self.index(self.history[self.pinned:])

    # --- events -----------------------------------------------------------------------------------------
    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        self.session = session
        self.injected = set()
        super().on_session_start(session, resume, now)

    def on_user(self, message: Message) -> None:
        super().on_user(message)
        if is_task_message(message):
            if self.config.core_memory:
                self.core_due.append(message.text[: self.config.core_entry_chars])
            self.pending_query = message.text

    def on_response(self, message: Message, usage) -> None:
        super().on_response(message, usage)
        self.calls_since_query += 1

    def turn_query(self) -> str:
        """Within a turn: the newest assistant text and tool inputs, and the user's message."""
        parts: list[str] = []
        for m in reversed(list(self.history[-6:])):
            if m.role == "assistant":
                parts.append(m.text)
            elif is_task_message(m):
                parts.append(m.text)
                break
        return "\n".join(parts)

    def before_call(self, call: CallInfo) -> None:
        if self.core_due:  # the model files the request in core memory (a billed step)
            entries, self.core_due = self.core_due, []
            for e in entries:
                self.file_in_core(e)
            n = self.counters.extra["memory_edit_calls"] + self.counters.extra["memory_edit_failed"] + 1
            value = "\n".join(e for _, e in self.core)
            tu = Block.tool_use(f"ctxsim_mem_{n}", APPEND_TOOL.name, {"label": "task", "content": "\n".join(entries)})
            self.tool_step("memory_edit", tu, value)
        query = self.pending_query
        if query is None and self.config.requery_every and self.calls_since_query >= self.config.requery_every:
            query = self.turn_query()
        if query is None:
            return
        self.pending_query = None
        self.calls_since_query = 0
        if not len(self.store) or not self.config.search:
            return
        self.search(query)

    def search(self, query: str) -> None:
        """One billed ``conversation_search`` step; its result enters the conversation."""
        budget = self.config.inject_max_chars
        found: list[dict[str, Any]] = []
        ids: list[int] = []
        used = 0
        for c, _score in self.store.search(query, self.config.top_k, self.injected):
            if used + len(c.text) > budget:
                break
            found.append({"role": "recall", "content": c.text})
            ids.append(c.id)
            used += len(c.text)
        result = f"Found {len(found)} results: {json.dumps(found, ensure_ascii=False)}" if found else "No results found."
        n = self.counters.extra["retrieval_calls"] + self.counters.extra["retrieval_failed"] + 1
        q = " ".join(self.store.query_terms(query)) or query[:200]
        tu = Block.tool_use(f"ctxsim_search_{n}", SEARCH_TOOL.name, {"query": q, "limit": self.config.top_k})
        if self.tool_step("retrieval", tu, result):
            self.injected.update(ids)
            self.counters.extra["chunks_injected"] += len(ids)
            self.history = self.history.replace_at(len(self.history) - 1, Message(
                "user", self.history[-1].blocks, {"origin": "retrieval", "chunks": tuple(ids)}))

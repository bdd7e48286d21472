"""rag_memory: history beyond a budget goes to a retrieval store; the chunks relevant to the current
turn come back (spec/novacode.md section 8: "RAG-style memory (retrieve on demand, never inject
everything)").

Model. The conversation is windowed like structured_state's (cut at ``trigger_tokens`` down to
``keep_tokens`` on a pair-safe boundary), but nothing is summarised: every message that leaves is
split into chunks of at most ``chunk_chars`` characters on line boundaries (tool calls and results
labelled with their tool) and added to a lexical index, Okapi BM25 from the maintained ``rank_bm25``
library (k1, b as parameters; no model weights). The chunks are also appended to a real file,
``<session_dir>/rag/chunks.jsonl``, as a vector store would persist them. When a new user message
arrives, and every ``requery_every`` calls within a long turn, the strategy queries the index with
the current turn (the user's message; within a turn, the newest assistant text and tool inputs) and
injects the ``top_k`` best chunks with a positive score, at most ``inject_max_tokens``, as one user
message (``origin: injection``) appended after the turn's newest message, so the cached prefix stays
byte-stable. A chunk already injected into the current window is not injected again.

How retrieval quality is measured: through the probes. A probe's needed fact scores as "in the
window" only if the chunk holding it was retrieved back (or never left); the engine's retention
(``retention.by_category``) is the figure, beside NovaCode's summary. Source of the idea: MemGPT /
Letta recall memory (evicted messages stay searchable), LangChain's vector-store-backed memory, and
the RAG pattern (Lewis et al., 2020), with BM25 (Robertson and Zaragoza, 2009) as the retriever.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field
from rank_bm25 import BM25Okapi

from harness.conversation import History, Message
from strategies.base import CallInfo, StrategyEnv
from strategies.structured_state import WindowedConfig, WindowedStrategy

_WORD = re.compile(r"[a-z0-9]+(?:[_.\-/:][a-z0-9]+)*")

INJECTION = """\
<retrieved-context>
Passages from earlier in this conversation that were moved out of the context window, retrieved \
for the current turn (most relevant first):
{chunks}
</retrieved-context>"""


def tokenize(text: str) -> list[str]:
    """Lowercased words and identifiers; a compound identifier (``load_user``, ``a/b.py``,
    ``E123-4``) counts as itself and as each of its parts, so exact names and their pieces match."""
    out: list[str] = []
    for w in _WORD.findall(text.lower()):
        out.append(w)
        parts = re.split(r"[_.\-/:]", w)
        if len(parts) > 1:
            out.extend(p for p in parts if p)
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
    """The retrieval store: chunks, their BM25 index (rebuilt lazily after additions)."""

    def __init__(self, k1: float, b: float, path: Path | None = None, max_query_terms: int = 32) -> None:
        self.k1, self.b = k1, b
        self.max_query_terms = max_query_terms
        self.chunks: list[Chunk] = []
        self._tokens: list[list[str]] = []
        self._postings: dict[str, tuple[list[int], list[int]]] = {}  # term -> (chunk ids, term counts)
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._index: BM25Okapi | None = None
        self.path = path

    def __len__(self) -> int:
        return len(self.chunks)

    def add(self, texts: list[str], source: int) -> None:
        new = []
        for t in texts:
            c = Chunk(len(self.chunks), t, source)
            self.chunks.append(c)
            toks = tokenize(t) or ["<empty>"]
            self._tokens.append(toks)
            for w, n in Counter(toks).items():
                docs, tfs = self._postings.setdefault(w, ([], []))
                docs.append(c.id)
                tfs.append(n)
            new.append(c)
        if new:
            self._index = None
            self._arrays = {}
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as fh:
                    for c in new:
                        fh.write(json.dumps({"id": c.id, "source": c.source, "text": c.text}, ensure_ascii=False) + "\n")

    def query_terms(self, query: str) -> list[str]:
        """The query's distinct indexed terms, the ``max_query_terms`` rarest (highest idf) of them:
        BM25 sums over query terms, and a long turn's common words only add noise and time."""
        idf = self._index.idf if self._index is not None else {}
        terms = sorted({w for w in tokenize(query) if w in idf}, key=lambda w: (-idf[w], w))
        return terms[: self.max_query_terms]

    def scores(self, terms: list[str]) -> np.ndarray:
        """Okapi BM25 of every chunk for ``terms``: the same sum as ``BM25Okapi.get_scores`` (its idf,
        document lengths and average length), evaluated over each term's postings only, so a query
        costs the chunks that contain its terms rather than every chunk times every term."""
        idx = self._index
        assert idx is not None
        doc_len = np.asarray(idx.doc_len, dtype=float)
        norm = self.k1 * (1 - self.b + self.b * doc_len / idx.avgdl)
        out = np.zeros(len(self.chunks))
        for w in terms:
            arr = self._arrays.get(w)
            if arr is None:
                docs, tfs = self._postings.get(w, ([], []))
                arr = self._arrays[w] = (np.asarray(docs, dtype=np.int64), np.asarray(tfs, dtype=float))
            docs, tf = arr
            out[docs] += idx.idf.get(w, 0.0) * tf * (self.k1 + 1) / (tf + norm[docs])
        return out

    def search(self, query: str, k: int, exclude: set[int] = frozenset()) -> list[tuple[Chunk, float]]:
        """The ``k`` best chunks with a positive BM25 score, best first (ties: newer first)."""
        if not self.chunks:
            return []
        if self._index is None:
            self._index = BM25Okapi(self._tokens, k1=self.k1, b=self.b)
        q = self.query_terms(query)
        if not q:
            return []
        scores = self.scores(q)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], -i))
        out = []
        for i in order:
            if scores[i] <= 0 or len(out) >= k:
                break
            if i not in exclude:
                out.append((self.chunks[i], float(scores[i])))
        return out


class RagMemoryConfig(WindowedConfig):
    trigger_tokens: int = Field(80_000, ge=1_000, le=2_000_000,
                                description="move history to the store when the estimated request reaches this")
    keep_tokens: int = Field(30_000, ge=0, le=2_000_000, description="newest tokens kept verbatim after a move")
    chunk_chars: int = Field(2_000, ge=100, le=100_000, description="largest chunk, in characters")
    top_k: int = Field(5, ge=1, le=100, description="chunks retrieved per query")
    inject_max_tokens: int = Field(4_000, ge=100, le=200_000, description="cap on one injection (estimated tokens)")
    requery_every: int = Field(10, ge=0, le=10_000,
                               description="within a long turn, query again every this many calls (0: only on "
                               "user messages)")
    max_query_terms: int = Field(32, ge=1, le=10_000,
                                 description="a query keeps its this many rarest distinct terms (highest idf)")
    bm25_k1: float = Field(1.5, gt=0, le=5, description="BM25 term-frequency saturation (rank_bm25 default)")
    bm25_b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation (rank_bm25 default)")


class RagMemory(WindowedStrategy):
    """Windowed conversation; evicted messages chunked into BM25; top-k injected per turn."""

    name = "rag_memory"
    summary = "evicted history in a BM25 store; top-k chunks for the current turn injected"
    Config = RagMemoryConfig
    SCALED = (*WindowedStrategy.SCALED, "inject_max_tokens")

    def __init__(self, config: RagMemoryConfig, env: StrategyEnv) -> None:
        d = Path(env.session_dir) / "rag"
        d.mkdir(parents=True, exist_ok=True)
        self.store = ChunkStore(config.bm25_k1, config.bm25_b, d / "chunks.jsonl", config.max_query_terms)
        self.injected: set[int] = set()   # chunk ids in the current window
        self.pending_query: str | None = None
        self.calls_since_query = 0
        self.evicted = 0
        super().__init__(config, env)

    # --- events -----------------------------------------------------------------------------------
    def on_user(self, message: Message) -> None:
        super().on_user(message)
        self.pending_query = message.text

    def on_response(self, message: Message, usage) -> None:
        super().on_response(message, usage)
        self.calls_since_query += 1

    # --- hooks ----------------------------------------------------------------------------------------
    def on_cut(self, dropped: History, start: int) -> list[Message] | None:
        for m in dropped[self.pinned:]:
            if m.meta.get("origin") in ("injection", "placeholder"):
                continue
            self.evicted += 1
            self.store.add(chunk_text(message_text(m, {k: v[0] for k, v in self.tool_uses.items()}), self.config.chunk_chars), self.evicted)
        # what was injected before the cut left with it, unless the injection message is kept
        self.injected = {i for m in self.history[start:] for i in m.meta.get("chunks", ())}
        self.counters.extra["chunks_stored"] = len(self.store)
        return []

    def turn_query(self) -> str:
        """Within a turn: the newest assistant text and tool inputs, and the user's message."""
        parts: list[str] = []
        for m in reversed(list(self.history[-6:])):
            if m.role == "assistant":
                parts.append(m.text)
            elif not m.has_tool_result and not m.meta.get("origin"):
                parts.append(m.text)
                break
        return "\n".join(parts)

    def before_call(self, call: CallInfo) -> None:
        query = self.pending_query
        if query is None and self.config.requery_every and self.calls_since_query >= self.config.requery_every:
            query = self.turn_query()
        if query is None:
            return
        self.pending_query = None
        self.calls_since_query = 0
        if not len(self.store):
            return
        self.counters.extra["retrievals"] += 1
        budget = self.config.inject_max_tokens
        picked: list[str] = []
        ids: list[int] = []
        used = 0
        for c, score in self.store.search(query, self.config.top_k, self.injected):
            cost = self.gauge.tokens(len(c.text)) - self.gauge.opaque
            if used + cost > budget:
                break
            picked.append(f'<passage n="{len(picked) + 1}" score="{score:.2f}">\n{c.text}\n</passage>')
            self.injected.add(c.id)
            ids.append(c.id)
            used += cost
        if picked:
            self.counters.extra["chunks_injected"] += len(picked)
            self.history = self.history.append(Message.user(INJECTION.format(chunks="\n".join(picked)),
                                                            origin="injection", chunks=tuple(ids)))

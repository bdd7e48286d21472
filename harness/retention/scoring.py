"""Task retention: at a probe, where is each fact the task needs, and how likely is the model to use it.

For each needed fact the model looks at the request the strategy sends at the probe's call:

* **window** — the fact's text is verbatim in a message. Score = attention at the fact's relative
  position in the request times the context-length decay (below).
* **summary** — the text is in a summary (a message with ``meta["origin"] == "summary"``, or text a
  summariser produced, which starts with ``<summary>``). Score = ``summary_fidelity`` times the
  attention at its position: a restated fact is weaker evidence than the original.
* **recoverable** — not in the window, but a pointer to it is: an absolute path in the request text
  (a spill placeholder's path, the transcript path, a memory index entry) of a file that contains the
  fact, under the run's session directory when it is known. The model follows it with probability
  ``recover_probability``; then the fact is read fresh (attention at the end of the context) and
  the pointer is returned so the engine charges the read-back as an extra call (``readbacks``).
* **unfollowed** — a pointer was there but the model did not follow it: score 0, no read-back. A
  pointer carries a need only when it is followed and paid (issue 43): an unfollowed one is lost
  (``ctxsim.harness.retention.needs.WHERE``), and the closed loop may then recover it (billed).
* **lost** — none of the above: 0.

The attention curve (``attention(p, L)``)
-----------------------------------------
``curve(p) = M + A·exp(−p/τ1) + B·exp(−(1−p)/τ2)``, p ∈ [0, 1] the relative position (0 = the start of
the request, 1 = its end), with M = 0.5938, A = 0.2638, τ1 = 0.1294, B = 0.1218, τ2 = 0.1990: the
least-squares fit to "Lost in the Middle" (Liu et al., TACL 2024), GPT-3.5-Turbo, 20 documents, answer at
positions 1/5/10/15/20 → accuracy 75.8/57.2/53.8/55.4/63.2, normalised by the oracle 88.3 (so the
curve is the share of the model's best-case accuracy a fact keeps at that position), positions mapped
to p = (k − 1)/19. The fit reproduces the five figures to within 0.03 points.

Context-length decay ("Context Rot", Chroma 2025: every model tested degrades as input grows):
``rot(L) = max(rot_floor, 1 − rot_per_doubling·log2(L/ref_tokens))`` for L > ref_tokens, else 1.
``ref_tokens`` = 3,000 is the size of the paper's 20-document prompts (20 passages of at most 100
words); ``rot_per_doubling`` = 0.043 is read off the paper's own two settings: going from 20 to 30
documents (×1.5 length) lowers accuracy at the first, middle and last positions from 64.27 to 62.67
on average (−2.5%), and 0.025 / log2(1.5) = 0.043. It gives rot = 0.77 at 128k tokens and 0.64 at 1M;
``rot_floor`` = 0.3 bounds the extrapolation. Both are modelling assumptions (``ctxsim calibrate``
measures them on a live model).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from ctxsim.harness.model.conversation import Message, Request
from ctxsim.harness.model.trace import ALL_CATEGORIES, MAX_TOKENS, FactEvent, ProbeEvent
from pydantic import BaseModel, ConfigDict, Field, field_validator

# "Lost in the Middle", GPT-3.5-Turbo, 20 documents (peers.md)
LITM_POSITIONS = (1, 5, 10, 15, 20)
LITM_ACCURACY = (75.8, 57.2, 53.8, 55.4, 63.2)
LITM_ORACLE = 88.3
LITM_DOCS = 20

# facts a summary may restate in its own words (harness/retention/gist.py): the user's request, which Claude Code's
# summary restates under "Primary Request and Intent". Not constraints: the synthetic sessions' constraints
# share their wording and differ in the paths they name, and a summary restating one while naming the
# other's paths elsewhere matched at recall 1.0 (long-200k seed 1, claude_code)
GIST_FACTS = ("goal",)
SUMMARY_MARKER = "<summary>"  # what the simulated summariser (and Claude Code) open a summary with
Where = Literal["window", "summary", "recoverable", "unfollowed", "lost"]
# the bytes of the files a model keeps between probes, the newest read kept last: a bound on memory (assumed;
# a count of 64 files dropped a long session's growing transcript for its many small memory files, then read
# it again whole, and read each memory file again at each probe). A grown file's version before is held too
# until its line breaks are carried over (_Version.older): at most twice this
_BYTES_HELD = 64 << 20
_PATH = re.compile(r"/[A-Za-z0-9_.@+\-]+(?:/[A-Za-z0-9_.@+\-]+)+")
MAX_WEIGHT = 100.0  # a category's weight in retention.score (the defaults are 1 to 2; assumed bound)


class RetentionParams(BaseModel):
    """Constants of the retention model; each one's source is in :data:`RETENTION_SOURCES`
    (``ctxsim run/compare --retention key=value`` and sweeps' ``[retention]`` grid vary them)."""

    # finite numbers in their range (issue 44: curve_m=nan scored 0.0, 1e309 scored 1.0, -5 scored 0.0);
    # the bounds hold for the run and compare options and a sweep's [retention] grid alike. The curve's
    # terms are shares of the best-case accuracy (0..1); a decay length above 10 relative positions is
    # flat over the request (assumed bound)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    curve_m: float = Field(0.5938, ge=0, le=1, description="attention floor of the U curve (LitM fit)")
    curve_a: float = Field(0.2638, ge=0, le=1, description="primacy amplitude (LitM fit)")
    curve_tau1: float = Field(0.1294, gt=0, le=10, description="primacy decay length, relative position (LitM fit)")
    curve_b: float = Field(0.1218, ge=0, le=1, description="recency amplitude (LitM fit)")
    curve_tau2: float = Field(0.1990, gt=0, le=10, description="recency decay length, relative position (LitM fit)")
    ref_tokens: int = Field(3_000, gt=0, le=MAX_TOKENS, description="context length the curve was measured at (LitM 20 docs)")
    rot_per_doubling: float = Field(0.043, ge=0, le=1, description="attention lost per doubling of the context (LitM 20->30 docs)")
    rot_floor: float = Field(0.3, ge=0, le=1, description="lowest context-length factor (assumed)")
    summary_fidelity: float = Field(0.9, ge=0, le=1, description="a fact restated by a summary, relative to the "
                                    "original at the same position (assumed; at most 1: a summarised fact never "
                                    "outscores the verbatim one)")
    recover_probability: float = Field(0.7, ge=0, le=1, description="chance the model follows a pointer to a fact "
                                       "it needs (assumed)")
    gist_recall: float = Field(0.8, ge=0, le=1.01, description="a summary restates the user's goal in "
                               "its own words when it holds this share of the fact's content words and every name "
                               "it gives (harness/retention/gist.py; assumed; above 1 turns the paraphrase match off)")
    category_weights: dict[str, float] = Field(
        default_factory=lambda: {"goal": 2.0, "constraint": 1.5, "decision": 1.0, "error": 1.0, "file": 1.0,
                                 "preference": 1.0, "feedback": 1.0},
        description="weights of retention.score; goal and constraint count more because forgetting them is what "
        "users of real agents complain about most (peers.md)")

    @field_validator("category_weights")
    @classmethod
    def _weights(cls, v: dict[str, float]) -> dict[str, float]:
        """Known categories only (a misspelt one was ignored), each weight finite in 0..MAX_WEIGHT."""
        for k, w in v.items():
            if k not in ALL_CATEGORIES:
                raise ValueError(f"unknown category {k!r} (valid: {', '.join(ALL_CATEGORIES)})")
            if not math.isfinite(w):
                raise ValueError(f"{k}: {w} is not a finite number")
            if not 0 <= w <= MAX_WEIGHT:
                raise ValueError(f"{k}: {w} is not a weight in 0..{MAX_WEIGHT:g}")
        return v

    def assumptions(self) -> list[tuple[str, Any, str]]:
        """(name, value, source) of every constant of the retention model, for reports."""
        return [(f"retention.{k}", getattr(self, k), RETENTION_SOURCES[k]) for k in type(self).model_fields]


# where each constant of RetentionParams comes from ("assumed": a modelling choice a sweep can vary)
RETENTION_SOURCES = {
    "curve_m": "fitted: Lost in the Middle (Liu et al., TACL 2024), GPT-3.5-Turbo, 20 documents, oracle-normalised",
    "curve_a": "fitted: Lost in the Middle, as curve_m",
    "curve_tau1": "fitted: Lost in the Middle, as curve_m",
    "curve_b": "fitted: Lost in the Middle, as curve_m",
    "curve_tau2": "fitted: Lost in the Middle, as curve_m",
    "ref_tokens": "Lost in the Middle: 20 passages of at most 100 words (about 3,000 tokens)",
    "rot_per_doubling": "Lost in the Middle, 20 -> 30 documents (-2.5% for x1.5 length); Context Rot (Chroma 2025) "
                        "for the direction; extrapolated beyond 4.5k tokens: assumed",
    "rot_floor": "assumed",
    "summary_fidelity": "assumed",
    "recover_probability": "assumed",
    "gist_recall": "assumed: on the bundled compacting logs each real summary restates its own session's goal "
                   "in full (recall 1), another session's summary at most 0.71 (same project: harness/retention/gist.py)",
    "category_weights": "assumed (goal and constraint count more: what users of real agents complain about "
                        "losing, peers.md)",
}


@dataclass(frozen=True)
class FactScore:
    fact_id: str
    category: str
    where: Where
    score: float
    pointer: str | None = None
    probe: str | None = None
    pointer_line: int | None = None  # 1-based line of the fact in the pointer's file (read an excerpt there)


def curve(p: float | np.ndarray, params: RetentionParams | None = None) -> float | np.ndarray:
    """The position curve at relative position ``p`` (0 = start, 1 = end), oracle-normalised."""
    q = params or _DEFAULT
    if type(p) is float and 0.0 <= p <= 1.0:
        # a scalar (one block at a time, thousands a run): math.exp, the same double as numpy's
        # scalar exp (checked over 10^6 positions) without a 0-d array per call
        return q.curve_m + q.curve_a * math.exp(-p / q.curve_tau1) + q.curve_b * math.exp(-(1.0 - p) / q.curve_tau2)
    p = np.clip(p, 0.0, 1.0)
    v = q.curve_m + q.curve_a * np.exp(-p / q.curve_tau1) + q.curve_b * np.exp(-(1.0 - p) / q.curve_tau2)
    return float(v) if np.ndim(v) == 0 else v


def rot(total_tokens: int, params: RetentionParams | None = None) -> float:
    """The context-length factor: 1 up to ``ref_tokens``, minus ``rot_per_doubling`` per doubling."""
    q = params or _DEFAULT
    if total_tokens <= q.ref_tokens:
        return 1.0
    return max(q.rot_floor, 1.0 - q.rot_per_doubling * math.log2(total_tokens / q.ref_tokens))


def attention(p: float, total_tokens: int, params: RetentionParams | None = None) -> float:
    return float(min(1.0, max(0.0, curve(p, params) * rot(total_tokens, params))))


_DEFAULT = RetentionParams()


def _is_summary(m: Message, text: str) -> bool:
    return m.meta.get("origin") == "summary" or text.lstrip().startswith(SUMMARY_MARKER)


@dataclass(eq=False)
class _Version:
    """One version of a file the scorer read: its bytes, whether they hold a carriage return, its lineage
    (the same object for versions each of which begins with the one before) and its line breaks' positions,
    built when first asked (from ``older``'s, the version before in its lineage, where those were built)."""

    stamp: tuple[int, int]
    data: bytes
    cr: bool
    lineage: object
    older: _Version | None = None
    breaks: np.ndarray | None = None


class RetentionModel:
    """Scores probes on requests. One per run (it caches per-message text, found paths and files).

    ``session_dir`` limits pointers to files under the run's directory (spills, transcripts,
    memories), by their real path (no ``..`` and no symbolic link out of it: the conversation's
    text, a trace's included, must not make a run read the machine's files); without it any
    existing absolute path in the request counts.
    """

    def __init__(self, facts: dict[str, FactEvent], params: RetentionParams | None = None,
                 rng: np.random.Generator | None = None, session_dir: str | Path | None = None) -> None:
        self.facts = facts
        self.params = params or RetentionParams()
        self.rng = rng if rng is not None else np.random.default_rng(0)
        # the directory as given and resolved (a strategy may write either form of a symlinked tmp dir)
        self.roots = tuple(dict.fromkeys([str(Path(session_dir)), str(Path(session_dir).resolve())])) \
            if session_dir is not None else ()
        self._real_root = os.path.realpath(session_dir) + os.sep if session_dir is not None else None
        self._msg: dict[int, tuple[Message, str]] = {}          # id -> (message, text)
        self._has: dict[tuple[int, str], int] = {}               # (message id, fact id) -> offset or -1
        self._paths: dict[int, tuple[str, ...]] = {}             # message id -> absolute paths in it
        self._file: dict[tuple[str, str], tuple[tuple[int, int], int]] = {}  # (path, fact) -> (stat, line or 0)
        self._facts: dict[int, tuple[Message, frozenset[str]]] = {}  # id -> (message, facts in its text)
        self._data: dict[str, _Version] = {}   # path -> its newest version read
        self._held = 0   # their bytes (_BYTES_HELD)
        # path -> needle -> (bytes searched, offset, lineage): dropped with the path's bytes (a lineage not held
        # is never continued), so it is bounded as they are
        self._found: dict[str, dict[bytes, tuple[int, int, object]]] = {}
        self._real: dict[str, tuple[tuple[int, int], bool]] = {}  # path -> (stat, under the run directory)
        self._matcher = None  # the facts compiled into one search (ctxsim.harness.model.textmatch), on first use
        # keys of this model's folds over a history (ctxsim.harness.model.conversation.History.fold_through): the
        # messages that hold a fact, and those that name a file, linked newest first, so a probe
        # visits those messages only, not the whole history
        self._with_facts, self._with_paths, self._with_summaries = object(), object(), object()
        # per history store (append-only: ctxsim.harness.model.conversation._Store): fact id -> indices of the
        # messages holding it, extended as the history grows, so a need visits its own messages only
        self._by_fact: dict[int, list] = {}   # id(store) -> [store, messages indexed, {fact: [index, ...]}]

    # --- per-message caches ---------------------------------------------------------------------------
    def _text(self, m: Message) -> str:
        k = id(m)
        hit = self._msg.get(k)
        if hit is None or hit[0] is not m:
            hit = (m, m.text)
            self._msg[k] = hit
            self._paths.pop(k, None)
        return hit[1]

    def _offset(self, m: Message, fact: FactEvent) -> int:
        key = (id(m), fact.id)
        off = self._has.get(key)
        if off is None or self._msg.get(id(m), (None,))[0] is not m:
            off = self._text(m).find(fact.text)
            self._has[key] = off
        return off

    def _facts_in(self, m: Message) -> frozenset[str]:
        """The facts whose text occurs in the message's text (one pass over it, once per message)."""
        hit = self._facts.get(id(m))
        if hit is None or hit[0] is not m:
            if self._matcher is None:
                from ctxsim.harness.model.textmatch import matcher

                self._matcher = matcher({fid: f.text for fid, f in self.facts.items()})
            hit = (m, self._matcher.in_message(m))  # the facts in _text(m), from its blocks'
            self._facts[id(m)] = hit
        return hit[1]

    def _holding(self, msgs, key: object, has: Callable[[Message], Any]) -> list[int]:
        """Indices, in order, of the messages of ``msgs`` for which ``has`` is true: a fold memoised
        in the history's store, so each message is tested once however many requests share it."""
        n = len(msgs)
        if not hasattr(msgs, "fold_through"):  # a plain sequence: test them all
            return [i for i in range(n) if has(msgs[i])]

        def step(state, m):
            k, node = state
            return (k + 1, (k, node) if has(m) else node)

        _, node = msgs.fold_through(n - 1, key, (0, None), step)
        out = []
        while node is not None:
            out.append(node[0])
            node = node[1]
        out.reverse()
        return out

    def _pointers(self, m: Message) -> tuple[str, ...]:
        text = self._text(m)
        got = self._paths.get(id(m))
        if got is None:
            if self.roots:
                found = ([p for p in _PATH.findall(text) if p.startswith(self.roots)]
                         if any(r in text for r in self.roots) else [])
            else:
                found = _PATH.findall(text)
            got = tuple(dict.fromkeys(p.rstrip(".") for p in found))
            self._paths[id(m)] = got
        return got

    def _file_has(self, path: str, fact: FactEvent) -> tuple[int, int]:
        """(1-based line of the fact in the file or 0, file size); 0 for a file whose real path is
        outside the run directory."""
        try:
            st = os.stat(path)
        except OSError:
            return 0, 0
        if not stat.S_ISREG(st.st_mode):
            return 0, 0
        stamp = (st.st_mtime_ns, st.st_size)
        key = (path, fact.id)
        hit = self._file.get(key)
        if hit is None or hit[0] != stamp:
            if not self._inside(path, stamp):
                return 0, 0
            try:
                line = self._line_of(path, stamp, fact.text)
            except OSError:
                return 0, 0
            hit = (stamp, line)
            self._file[key] = hit
        return hit[1], st.st_size

    def _inside(self, path: str, stamp: tuple[int, int]) -> bool:
        """Whether the file's real path is under the run directory, checked once for each version of it
        before it is read (realpath is the costly part), whatever the number of facts asked of it."""
        if self._real_root is None:
            return True
        hit = self._real.get(path)
        if hit is None or hit[0] != stamp:
            hit = (stamp, os.path.realpath(path).startswith(self._real_root))
            self._real[path] = hit
        return hit[1]

    def _bytes(self, path: str, stamp: tuple[int, int]) -> tuple[bytes, bool]:
        """The file's bytes and whether they hold a carriage return, read once per version (stamp)
        for all the facts asked of it."""
        v = self._data.get(path)
        if v is None or v.stamp != stamp:
            data = Path(path).read_bytes()
            # a version that begins with the one before (a transcript grows by appends) continues its lineage:
            # what was found in the older bytes stands, and only the new bytes are searched (one compare a
            # version, exact whatever a strategy does to the file)
            grown = v is not None and len(v.data) <= len(data) and data.startswith(v.data)
            v = _Version(stamp, data, b"\r" in data, v.lineage if grown else object(),
                         v if grown and v.breaks is not None else None)
            old = self._data.pop(path, None)   # the newest read last
            self._held += len(data) - (len(old.data) if old is not None else 0)
            self._data[path] = v
            while self._held > _BYTES_HELD and len(self._data) > 1:
                gone = next(iter(self._data))
                self._held -= len(self._data.pop(gone).data)
                self._found.pop(gone, None)
        return v.data, v.cr

    def _find(self, path: str, needle: bytes) -> int:
        """``data.find(needle)`` in the file's newest version read, searching only the bytes past those
        already searched in an older version of its lineage."""
        v = self._data[path]
        found = self._found.setdefault(path, {})
        prev = found.get(needle)
        if prev is not None and prev[2] is v.lineage and prev[0] <= len(v.data):
            off = prev[1] if prev[1] >= 0 else v.data.find(needle, max(0, prev[0] - len(needle) + 1))
        else:
            off = v.data.find(needle)
        found[needle] = (len(v.data), off, v.lineage)
        return off

    def _line_at(self, path: str, off: int) -> int:
        """1-based line of byte ``off`` of the file's newest version read (no carriage return in it). The
        positions of its line breaks are found once a version, and only past the older version's bytes
        within a lineage: a fact's line no longer counts the breaks of the whole file for each fact asked
        of each version."""
        v = self._data[path]
        if v.breaks is None:
            older, v.older = v.older, None   # the older version is needed only here
            if older is not None and older.breaks is not None:
                n = len(older.data)
                new = np.flatnonzero(np.frombuffer(v.data, dtype=np.uint8, offset=n) == 10) + n
                v.breaks = np.concatenate((older.breaks, new))
            else:
                v.breaks = np.flatnonzero(np.frombuffer(v.data, dtype=np.uint8) == 10)
        return int(np.searchsorted(v.breaks, off)) + 1

    def _line_of(self, path: str, stamp: tuple[int, int], text: str) -> int:
        """1-based line of ``text`` (or of its JSON-escaped form) in the file as read in text mode
        (UTF-8, errors replaced, universal newlines), 0 if absent. Searched in the bytes: a valid
        UTF-8 needle with no line break and no replacement character is found in the raw bytes
        exactly where the decoded text holds it, so nothing is decoded."""
        needles = [text, json.dumps(text, ensure_ascii=False)[1:-1]]
        try:
            raw = [n.encode("utf-8") for n in needles]
        except UnicodeEncodeError:  # a lone surrogate: decode and search the text
            raw = None
        if raw is None or any(c in text for c in "\r\n\ufffd"):
            data = Path(path).read_text(encoding="utf-8", errors="replace")
            off = data.find(needles[0])
            if off < 0:
                off = data.find(needles[1])
            return data.count("\n", 0, off) + 1 if off >= 0 else 0
        data, cr = self._bytes(path, stamp)
        off = self._find(path, raw[0])
        if off < 0:
            off = self._find(path, raw[1])
        if off < 0:
            return 0
        if not cr:
            return self._line_at(path, off)
        # universal newlines: \r\n, \r and \n each end one line
        return data.count(b"\n", 0, off) + data.count(b"\r", 0, off) - data.count(b"\r\n", 0, off) + 1

    # --- scoring ---------------------------------------------------------------------------------------
    def score(self, probe: ProbeEvent, request: Request, before: Callable[[int], int],
              total_tokens: int) -> list[FactScore]:
        """One :class:`FactScore` per fact the probe needs, in the probe's order."""
        msgs = request.messages
        n = len(msgs)
        total = max(1, int(total_tokens))
        holders = self._holders(msgs)
        out = []
        for fid in probe.needs:
            fact = self.facts.get(fid)
            if fact is None:
                raise KeyError(f"probe {probe.id!r} needs fact {fid!r}, which the trace does not define")
            best: tuple[float, Where] | None = None
            for i in holders.get(fid, ()):
                if i >= n:
                    break
                m = msgs[i]
                off = self._offset(m, fact)
                if off < 0:
                    continue
                text = self._text(m)
                start = before(i)
                end = before(i + 1) if i + 1 < n else total
                pos = start + (end - start) * (off / max(1, len(text)))
                a = attention(pos / total, total, self.params)
                cand: tuple[float, Where] = ((self.params.summary_fidelity * a, "summary") if _is_summary(m, text)
                                             else (a, "window"))
                if best is None or cand[0] > best[0]:
                    best = cand
            if best is None and fact.category in GIST_FACTS:
                best = self._restated(msgs, fact, before, total)
            if best is not None:
                out.append(FactScore(fid, fact.category, best[1], round(best[0], 6), None, probe.id))
                continue
            found = self._find_pointer(msgs, fact)
            if found is None:
                out.append(FactScore(fid, fact.category, "lost", 0.0, None, probe.id))
            elif self.rng.random() < self.params.recover_probability:
                s = attention(1.0, total, self.params)  # read back fresh: at the end of the context
                out.append(FactScore(fid, fact.category, "recoverable", round(s, 6), found[0], probe.id, found[1]))
            else:   # named, not followed: nothing read back, nothing carried (the path kept for the table)
                out.append(FactScore(fid, fact.category, "unfollowed", 0.0, found[0], probe.id, found[1]))
        return out

    def _restated(self, msgs, fact: FactEvent, before: Callable[[int], int], total: int) -> tuple[float, Where] | None:
        """The best-placed summary in ``msgs`` that restates ``fact`` in its own words (harness/retention/gist.py):
        a model's summary paraphrases the user's request; a simulated one copies it and is found above."""
        from ctxsim.harness.retention.gist import content_words, restates

        best = None
        n = len(msgs)
        for i in self._holding(msgs, self._with_summaries, lambda m: _is_summary(m, self._text(m))):
            text = self._text(msgs[i])
            if not restates(fact.text, text, content_words(text), self.params.gist_recall):
                continue
            start = before(i)
            end = before(i + 1) if i + 1 < n else total
            a = self.params.summary_fidelity * attention((start + end) / 2 / total, total, self.params)
            if best is None or a > best[0]:
                best = (a, "summary")
        return best

    def _holders(self, msgs) -> dict[str, list[int]]:
        """fact id -> ascending indices of the messages of ``msgs`` whose text holds it (indices past
        ``len(msgs)`` may follow: callers stop there). Carried forward per history store: a store
        only grows, so its first k messages never change and each is looked at once."""
        store = getattr(msgs, "_s", None)
        if store is None:   # a plain sequence
            out: dict[str, list[int]] = {}
            for i in self._holding(msgs, self._with_facts, self._facts_in):
                for fid in self._facts_in(msgs[i]):
                    out.setdefault(fid, []).append(i)
            return out
        ent = self._by_fact.get(id(store))
        if ent is None or ent[0] is not store:
            if len(self._by_fact) >= 8:   # the histories a strategy still sends are few: drop the oldest
                self._by_fact.pop(next(iter(self._by_fact)))
            ent = self._by_fact[id(store)] = [store, 0, {}]
        n = len(msgs)
        for i in range(ent[1], n):
            for fid in self._facts_in(store.msgs[i]):
                ent[2].setdefault(fid, []).append(i)
        ent[1] = max(ent[1], n)
        return ent[2]

    def _find_pointer(self, msgs, fact: FactEvent) -> tuple[str, int] | None:
        """The smallest file named in the request that holds the fact (the cheapest read-back), and
        the fact's line in it."""
        best: tuple[int, str, int] | None = None
        seen: set[str] = set()
        for i in self._holding(msgs, self._with_paths, self._pointers):
            for p in self._pointers(msgs[i]):
                if p in seen:
                    continue
                seen.add(p)
                line, size = self._file_has(p, fact)
                if line and (best is None or (size, p) < best[:2]):
                    best = (size, p, line)
        return (best[1], best[2]) if best else None


def aggregate(scores: list[FactScore], params: RetentionParams | None = None) -> dict[str, Any]:
    """The ``retention`` object of ``run --json``: weighted mean, goal, per category, probes."""
    q = params or _DEFAULT
    if not scores:
        return {"score": None, "goal": None, "by_category": {}, "probes": 0, "facts_scored": 0, "where": {}}
    w = np.array([q.category_weights.get(s.category, 1.0) for s in scores], dtype=float)
    v = np.array([s.score for s in scores], dtype=float)
    by: dict[str, list[float]] = {}
    where: dict[str, int] = {}
    for s in scores:
        by.setdefault(s.category, []).append(s.score)
        where[s.where] = where.get(s.where, 0) + 1
    by_cat = {c: float(np.mean(by[c])) for c in ALL_CATEGORIES if c in by}
    probes = {s.probe for s in scores if s.probe is not None}
    return {
        "score": float((w * v).sum() / w.sum()) if w.sum() > 0 else float(v.mean()),
        "goal": by_cat.get("goal"),
        "by_category": by_cat,
        "probes": len(probes) if probes else len(scores),
        "facts_scored": len(scores),
        "where": {k: where[k] for k in ("window", "summary", "recoverable", "unfollowed", "lost") if k in where},
    }

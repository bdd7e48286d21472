"""The glue the NovaCode strategy calls for memory layers 1 and 2 (instruction files, auto memory).

The strategy owns the conversation and the transcript (layer 3); this class owns what crosses
sessions on disk and the side calls that maintain it. Hooks, in the order the strategy calls them:

* ``on_session_start`` loads the instruction files and the memory index into the resident block
  (N-INST-3, N-TRANS-6: instruction files are resident, memories are recalled);
* ``on_user`` starts the recall prefetch (N-MEM-5/6): a non-blocking selection call; its answer is
  ready at ``now + latency`` and dropped when the latency exceeds the 8-second timeout or the call
  fails (never delaying the main call, never raising);
* ``injection_messages(now)`` hands over the recalled memories whose prefetch is ready by ``now``,
  each memory once until the markers are reset (``on_compacted``, N-COMP-12; or a fresh session);
* ``on_response`` triggers extraction on turns without tool calls (N-MEM-4), never two at once,
  with one trailing run; an extraction's memories are written when its call completes;
* ``on_session_end`` drains pending extraction, then checks the consolidation gates (N-MEM-7) and,
  when they and the lock pass, merges duplicates and deletes stale memories.

Time is the strategy's clock (the simulator's in a replay, wall time in a real agent): a side call
made at ``now`` with latency ``L`` has its effect at ``now + L``. Background work is applied at the
first hook at or after that time. A trailing extraction starts at the first hook after the running
one completes (in a real agent: at completion), a difference of at most one turn.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ctxsim.harness.llm.services import (
    MEMORY_CONSOLIDATE,
    MEMORY_EXTRACT,
    MEMORY_SELECT,
    CallSpec,
    SideCallFailed,
)
from ctxsim.harness.model.conversation import History, Message, Request, SystemPrompt, ToolSet, Usage
from ctxsim.strategies.base import StrategyEnv
from ctxsim.strategies.novacode import instructions as inst
from ctxsim.strategies.novacode import memory as mm
from ctxsim.strategies.novacode.lock import DEFAULT_STALE_AFTER_S, LockFile


@dataclass(frozen=True)
class MemoryParams:
    """Every number of the memory layers, with the spec's defaults. A strategy config may override
    any of them with a field named ``memory_<name>``."""

    recall_max: int = mm.RECALL_MAX                                   # N-MEM-5
    recall_timeout_s: float = mm.RECALL_TIMEOUT_S                     # N-MEM-6
    manifest_max_files: int = mm.MANIFEST_MAX_FILES                   # N-MEM-5
    manifest_head_lines: int = mm.MANIFEST_HEAD_LINES                 # N-MEM-5
    index_max_lines: int = mm.INDEX_MAX_LINES                         # N-MEM-3
    index_max_bytes: int = mm.INDEX_MAX_BYTES                         # N-MEM-3
    consolidate_min_interval_s: float = mm.CONSOLIDATE_MIN_INTERVAL_S  # N-MEM-7
    consolidate_min_sessions: int = mm.CONSOLIDATE_MIN_SESSIONS       # N-MEM-7
    consolidate_scan_throttle_s: float = mm.CONSOLIDATE_SCAN_THROTTLE_S  # N-MEM-7
    lock_stale_after_s: float = DEFAULT_STALE_AFTER_S                 # N-MEM-7 (assumption, lock.py)
    # output budgets of the side calls (not in the seed; sized for their fixed formats)
    extract_max_output_tokens: int = 1_500
    select_max_output_tokens: int = 256
    consolidate_max_output_tokens: int = 4_000
    query_max_chars: int = 4_000

    @classmethod
    def from_config(cls, config: Any) -> MemoryParams:
        kw = {}
        for f in fields(cls):
            v = getattr(config, f"memory_{f.name}", None)
            if v is not None:
                kw[f.name] = type(f.default)(v)
        return cls(**kw)


@dataclass
class _Recall:
    ready_at: float
    files: list[Path]


@dataclass
class _Extraction:
    done_at: float
    memories: list[mm.Memory]


class MemoryLayer:
    """Instruction files (N-INST) and auto memory (N-MEM) for one agent, across its sessions."""

    def __init__(self, config: Any, env: StrategyEnv, counters: Counter | None = None) -> None:
        self.env = env
        self.use_memory = bool(getattr(config, "memory", False))
        self.use_instructions = bool(getattr(config, "instructions", False))
        self.params = MemoryParams.from_config(config)
        self.home = Path(env.home_dir) if env.home_dir is not None else env.session_dir / "home"
        self.project = Path(env.project_dir) if env.project_dir is not None else env.session_dir / "project"
        self.cwd = self.project
        self.dirs = mm.MemoryDirs(self.home, self.project)
        self.extra: Counter = counters if counters is not None else Counter()
        self.scheduler = mm.ExtractionScheduler()
        self.heads = mm.HeadCache()                 # memory files' first lines, read once a version
        self.session: str | None = None
        self.instructions: inst.InstructionSet | None = None
        self._resident: list[Message] = []
        self._dialogue: list[Message] = []          # said since the last extraction started
        self._recalls: list[_Recall] = []           # prefetches in flight or ready
        self._writes: list[_Extraction] = []        # extraction answers not yet on disk
        self.injected: set[Path] = set()            # N-COMP-12 markers: memories already injected
        self._order: list[Path] = []                # the same, in the order they were injected
        self._reinject: list[Path] = []             # reset by a compaction: injected again next request
        # a trace without session events is one launch that starts now: load what it starts with
        self._refresh_resident()

    # --- the resident block (N-INST-3) ------------------------------------------------------------
    def _refresh_resident(self) -> None:
        out: list[Message] = []
        if self.use_instructions:
            self.instructions = inst.load(self.home, self.cwd, top=self.env.session_dir)  # nothing outside the run
            m = self.instructions.message()
            if m is not None:
                out.append(m)
                self.extra["instruction_files"] = len(self.instructions.files)
                self.extra["instruction_includes"] = len(self.instructions.included)
        if self.use_memory:
            text = mm.render_index(self.dirs, self.params.index_max_lines, self.params.index_max_bytes)
            if text:
                out.append(Message.user(text, origin="memory_index"))
                if "WARNING:" in text:
                    self.extra["memory_index_truncated"] += 1
        self._resident = out

    def resident_messages(self) -> list[Message]:
        """The same message objects until the next refresh, so cached prefixes stay byte-stable."""
        return self._resident

    # --- sessions ----------------------------------------------------------------------------------
    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        self._tick(now)
        self.session = session
        if not resume:  # a fresh conversation: nothing injected in it yet
            self.injected.clear()
            self._order, self._reinject = [], []
            self._dialogue = []
            self._recalls = []
        self._refresh_resident()

    def on_session_end(self, session: str, now: float) -> None:
        if not self.use_memory:
            return
        self._drain(now)
        self._consolidate(session, now)

    def on_compacted(self) -> None:
        """N-COMP-12: the injection markers are reset and the memories are injected again on the
        very next request (not at the next user message, when a new recall would be ready): the
        ones injected so far, the most recently injected first, at most ``recall_max`` (the size of
        one injection block, N-MEM-5), read again from their files. The index is re-read (the prefix
        changed anyway, so a newer index costs no extra cache break)."""
        recent = list(dict.fromkeys(reversed(self._order)))
        self._reinject = recent[: self.params.recall_max]
        self.injected.clear()
        self._order = []
        self._refresh_resident()

    # --- recall (N-MEM-5, N-MEM-6) -----------------------------------------------------------------
    def on_user(self, message: Message, now: float) -> None:
        self._tick(now)
        self._dialogue.append(message)
        if not self.use_memory or message.meta.get("origin"):
            return
        p = self.params
        scan = mm.scan_manifests(self.dirs.all(), p.manifest_max_files, p.manifest_head_lines, self.heads)
        cands = [m for m in scan.manifests if m.path not in self.injected]
        if not cands:
            self.extra["memory_recall_empty"] += 1
            return
        query = message.text[: p.query_max_chars]
        req = _side_request(mm.SELECT_SYSTEM.format(k=p.recall_max), mm.selection_prompt(query, cands, p.recall_max))
        spec = CallSpec(kind=MEMORY_SELECT, instructions=mm.SELECT_INSTRUCTIONS,
                        max_output_tokens=p.select_max_output_tokens, blocking=False,
                        timeout_s=p.recall_timeout_s,
                        params={"candidates": [m.path.name for m in cands], "max": p.recall_max, "query": query})
        try:
            res = self.env.services.call(req, spec)
        except SideCallFailed:
            self.extra["memory_recall_failed"] += 1  # N-MEM-6: silently dropped
            return
        if res.late:
            self.extra["memory_recall_late"] += 1    # N-MEM-6: past the 8 s timeout, dropped
            return
        names = mm.parse_selection(res.text, [m.path.name for m in cands], p.recall_max)
        if names is None:
            self.extra["memory_select_fallback"] += 1
            names = mm.local_select(query, cands, p.recall_max)
        by_name = {m.path.name: m.path for m in cands}
        self._recalls.append(_Recall(now + res.latency_s, [by_name[n] for n in names]))
        self.extra["memory_recalls"] += 1

    def injection_messages(self, now: float) -> list[Message]:
        """Memories to inject into this request, as one block (or nothing): those a compaction
        reset (N-COMP-12), then recalled memories ready by ``now`` and not injected yet."""
        self._tick(now)
        reinject, self._reinject = self._reinject, []
        if not self._recalls and not reinject:
            return []
        ready = [r for r in self._recalls if r.ready_at <= now]
        if not ready and not reinject:
            return []
        self._recalls = [r for r in self._recalls if r.ready_at > now]
        chosen: list[mm.Memory] = []
        # at most recall_max of each: the reset ones, and the new recalls together (N-MEM-5)
        for files in (reinject, [p for r in ready for p in r.files]):
            cap = len(chosen) + self.params.recall_max
            for path in files:
                if path in self.injected or len(chosen) >= cap:
                    continue
                try:
                    chosen.append(mm.parse_memory(path.read_text(encoding="utf-8", errors="replace"), path))
                except (OSError, mm.MemoryFormatError):
                    self.extra["memory_recall_unreadable"] += 1
                    continue
                self.injected.add(path)
                self._order.append(path)
        if not chosen:
            return []
        if reinject:
            self.extra["memory_reinjected_after_compaction"] += sum(1 for m in chosen if m.path in reinject)
        self.extra["memory_injected"] += len(chosen)
        return [mm.render_injection(chosen)]

    # --- extraction (N-MEM-4) ---------------------------------------------------------------------
    def on_response(self, message: Message, usage: Usage | None, now: float) -> None:
        self._tick(now)
        self._dialogue.append(message)
        if not self.use_memory or not mm.ends_turn(message):
            return
        if self.scheduler.trigger(now):
            self._extract(now)
        else:
            self.extra["memory_extract_trailing_marked"] += 1

    def _extract(self, now: float) -> None:
        dialogue, self._dialogue = self._dialogue, []
        if not any(m.role == "user" and not m.meta.get("origin") for m in dialogue):
            self.scheduler.start(now, 0.0)  # nothing the user said: nothing to condense
            return
        p = self.params
        existing = mm.scan_manifests(self.dirs.all(), p.manifest_max_files, p.manifest_head_lines, self.heads).manifests
        req = _side_request(mm.EXTRACT_SYSTEM, mm.extraction_prompt(mm.render_dialogue(dialogue), existing))
        spec = CallSpec(kind=MEMORY_EXTRACT, instructions=mm.EXTRACT_INSTRUCTIONS,
                        max_output_tokens=p.extract_max_output_tokens, blocking=False,
                        params={"format": "memory-blocks-v1", "types": list(mm.MEMORY_TYPES),
                                "existing": [m.name for m in existing]})
        try:
            res = self.env.services.call(req, spec)
        except SideCallFailed:
            self.extra["memory_extract_failed"] += 1
            self._dialogue = dialogue + self._dialogue  # not condensed: the next run covers it
            self.scheduler.start(now, 0.0)
            return
        parsed = mm.parse_memory_blocks(res.text)
        if parsed is None:
            self.extra["memory_extract_fallback"] += 1
            memories = mm.local_extract(dialogue, existing)
        else:
            memories, bad = parsed
            self.extra["memory_extract_malformed"] += bad
        self.scheduler.start(now, res.latency_s)
        self.extra["memory_extractions"] += 1
        self._writes.append(_Extraction(now + res.latency_s, memories))

    # --- background work ------------------------------------------------------------------------------
    def _tick(self, now: float) -> None:
        """Apply extraction answers that have arrived by ``now``; start a due trailing run."""
        if not self._writes and not self.scheduler.trailing:
            return
        due = [w for w in self._writes if w.done_at <= now]
        self._writes = [w for w in self._writes if w.done_at > now]
        for w in due:
            self._write(w)
        if self.scheduler.due_trailing(now):
            self.extra["memory_extract_trailing_run"] += 1
            self._extract(now)

    def _write(self, w: _Extraction) -> None:
        for m in w.memories:
            try:
                mm.write_memory(self.dirs, m, w.done_at, self.heads)
            except (OSError, ValueError):
                self.extra["memory_write_failed"] += 1
                continue
            self.extra["memory_written"] += 1

    def _drain(self, now: float) -> None:
        """Session end: the agent waits for its background extraction, and runs a marked trailing
        one, before it exits, so nothing the turns said is lost."""
        for w in self._writes:
            self._write(w)
        self._writes = []
        if self.scheduler.trailing:
            self.scheduler.running_until = None
            self.extra["memory_extract_trailing_run"] += 1
            self._extract(now)
            for w in self._writes:
                self._write(w)
            self._writes = []

    # --- consolidation (N-MEM-7) -----------------------------------------------------------------------
    def _consolidate(self, session: str, now: float) -> None:
        p = self.params
        user_dir = self.dirs.user_dir
        assert user_dir is not None
        state_path = user_dir / mm.STATE_FILE
        state = mm.ConsolidationState.load(state_path)
        if session not in state.sessions:
            state.sessions.append(session)
        gate = mm.consolidation_gate(state, now, min_interval_s=p.consolidate_min_interval_s,
                                     min_sessions=p.consolidate_min_sessions,
                                     scan_throttle_s=p.consolidate_scan_throttle_s)
        if gate.scanned:
            state.last_scan_at = now
        self.extra[f"memory_consolidate_gate_{gate.reason}"] += 1
        if gate.open:
            lock = LockFile(user_dir / mm.LOCK_FILE, self.env.now, stale_after_s=p.lock_stale_after_s,
                            owner=f"novacode:{session}")
            if not lock.acquire():
                self.extra["memory_consolidate_locked"] += 1
            else:
                try:
                    if lock.took_over is not None:
                        self.extra["memory_consolidate_lock_takeover"] += 1
                    if self._run_consolidation(now):
                        state.last_consolidated_at = now
                        state.sessions = []
                finally:
                    lock.release()
        state.save(state_path, now)

    def _run_consolidation(self, now: float) -> bool:
        memories = mm.load_memories(self.dirs.all())
        if not memories:
            return True
        by_name = {m.path.name: m for m in memories if m.path is not None}
        req = _side_request(mm.CONSOLIDATE_SYSTEM, mm.consolidation_prompt(memories))
        spec = CallSpec(kind=MEMORY_CONSOLIDATE, instructions=mm.CONSOLIDATE_INSTRUCTIONS,
                        max_output_tokens=self.params.consolidate_max_output_tokens, blocking=False,
                        params={"files": list(by_name)})
        try:
            res = self.env.services.call(req, spec)
        except SideCallFailed:
            self.extra["memory_consolidate_failed"] += 1
            return False
        plan = mm.parse_consolidation(res.text, list(by_name))
        if plan is None:
            self.extra["memory_consolidate_fallback"] += 1
            plan = mm.local_consolidate(memories)
        merged, deleted = mm.apply_consolidation(plan, by_name, self.dirs, now + res.latency_s, self.heads)
        self.extra["memory_consolidations"] += 1
        self.extra["memory_consolidate_merged"] += merged
        self.extra["memory_consolidate_deleted"] += deleted
        return True


def _side_request(system: str, prompt: str) -> Request:
    """A standalone side request: its own system prompt, one user message, no tools."""
    return Request(SystemPrompt.of(system), ToolSet(), History([Message.user(prompt)]))

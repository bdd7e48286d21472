"""MemoryLayer with a scripted LLM service on real temporary directories: timing of the recall
prefetch, extraction scheduling, markers, consolidation gates and lock (N-INST-3, N-MEM-1…7)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from ctxsim.harness.llm.services import SideCallFailed, SideCallResult
from ctxsim.harness.model.conversation import Block, Message, SystemPrompt, ToolSet, Usage
from ctxsim.strategies.base import StrategyEnv
from ctxsim.strategies.novacode import memory as mm
from ctxsim.strategies.novacode.lock import LockInfo
from ctxsim.strategies.novacode.memory_layer import MemoryLayer


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Services:
    """Scripted side calls: per kind a list of (text, latency, late) or an exception."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.replies: dict[str, list] = {}

    def script(self, kind: str, *replies) -> None:
        self.replies.setdefault(kind, []).extend(replies)

    def call(self, request, spec):
        self.calls.append((spec.kind, request, spec))
        r = self.replies.get(spec.kind, [])
        item = r.pop(0) if r else ("", 1.0, False)
        if isinstance(item, Exception):
            raise item
        text, latency, late = item
        return SideCallResult(text, Usage(10, 0, 0, 0, 5), latency, late)

    def kinds(self) -> list[str]:
        return [k for k, *_ in self.calls]


def block(name: str, type: str, body: str) -> str:
    return f"<memory>\n---\nname: {name}\ndescription: {body[:40]}\ntype: {type}\n---\n{body}\n</memory>"


@pytest.fixture
def world(tmp_path):
    clock, services = Clock(), Services()
    env = StrategyEnv(session_dir=tmp_path, services=services, now=clock, window=200_000, max_output_tokens=32_000,
                      model="claude-sonnet-4-6", provider="anthropic", system=SystemPrompt(), tools=ToolSet(),
                      rng=np.random.default_rng(0), home_dir=tmp_path / "home", project_dir=tmp_path / "project")
    (tmp_path / "home").mkdir()
    (tmp_path / "project").mkdir()
    return SimpleNamespace(env=env, clock=clock, services=services, tmp=tmp_path)


def layer(world, memory=True, instructions=True, **over) -> MemoryLayer:
    cfg = SimpleNamespace(memory=memory, instructions=instructions, **over)
    return MemoryLayer(cfg, world.env)


def seed(world, name: str, type: str = "feedback", body: str = "") -> Path:
    dirs = mm.MemoryDirs(world.tmp / "home", world.tmp / "project")
    return mm.write_memory(dirs, mm.Memory(name, f"about {name}", type, body or f"BODY-{name}"), 1.0)


def answer(text: str = "done") -> Message:
    return Message("assistant", (Block.text_block(text),))


# --- N-INST-3 / resident block -------------------------------------------------------------------

def test_n_inst_3_resident_block_stable_and_refreshed(world):
    """N-INST-3: instruction files (and the memory index) are resident: the same message objects on
    every request of a session, re-read at the next session start."""
    (world.tmp / "project" / "NOVACODE.md").write_text("RULE: run ruff")
    seed(world, "tabs", "user")
    ml = layer(world)
    ml.on_session_start("s1", False, 0.0)
    r1 = ml.resident_messages()
    assert [m.meta["origin"] for m in r1] == ["instructions", "memory_index"]
    assert "RULE: run ruff" in r1[0].text and str((world.tmp / "home/.novacode/memory/tabs.md").resolve()) in r1[1].text
    assert ml.resident_messages() is r1
    (world.tmp / "project" / "NOVACODE.md").write_text("RULE: run black")
    assert "run ruff" in ml.resident_messages()[0].text  # not re-read mid-session (cache stability)
    ml.on_session_start("s2", False, 10.0)
    assert "run black" in ml.resident_messages()[0].text


def test_instructions_only_makes_no_side_calls(world):
    (world.tmp / "project" / "NOVACODE.md").write_text("R")
    seed(world, "tabs", "user")
    ml = layer(world, memory=False)
    ml.on_session_start("s", False, 0.0)
    ml.on_user(Message.user("hi"), 1.0)
    ml.on_response(answer(), Usage(), 2.0)
    ml.on_session_end("s", 3.0)
    assert [m.meta["origin"] for m in ml.resident_messages()] == ["instructions"]
    assert world.services.calls == [] and ml.injection_messages(5.0) == []


# --- N-MEM-5 / N-MEM-6: recall prefetch ----------------------------------------------------------

def test_n_mem_6_prefetch_injected_once_ready(world):
    """N-MEM-6: selection started at t=100 with a 2.5 s latency: not ready at t=101 (the main call is
    not delayed), injected at t=102.5, and only once."""
    p = seed(world, "tabs", "user", "I prefer tabs.")
    seed(world, "ci", "reference")
    ml = layer(world)
    ml.on_session_start("s", False, 0.0)
    world.services.script("memory_select", ('["tabs.md"]', 2.5, False))
    ml.on_user(Message.user("indent the file"), 100.0)
    kind, req, spec = world.services.calls[-1]
    assert kind == "memory_select" and not spec.blocking and spec.timeout_s == 8.0
    assert sorted(spec.params["candidates"]) == ["ci.md", "tabs.md"]
    assert "- tabs.md [user] tabs: about tabs" in req.messages[-1].text
    assert ml.injection_messages(101.0) == []
    got = ml.injection_messages(102.5)
    assert len(got) == 1 and "I prefer tabs." in got[0].text and str(p) in got[0].text
    assert got[0].meta["origin"] == "memory"
    assert ml.injection_messages(200.0) == []
    # the next prefetch does not offer the injected memory again
    ml.on_user(Message.user("more"), 300.0)
    assert world.services.calls[-1][2].params["candidates"] == ["ci.md"]


def test_n_mem_6_late_answer_dropped(world):
    """N-MEM-6: an answer after the 8 s timeout (latency 8.4 s) is dropped and counted."""
    seed(world, "tabs", "user")
    ml = layer(world)
    ml.on_session_start("s", False, 0.0)
    world.services.script("memory_select", ('["tabs.md"]', 8.4, True))
    ml.on_user(Message.user("x"), 10.0)
    assert ml.injection_messages(100.0) == []
    assert ml.extra["memory_recall_late"] == 1


def test_n_mem_6_failure_silently_dropped(world):
    seed(world, "tabs", "user")
    ml = layer(world)
    ml.on_session_start("s", False, 0.0)
    world.services.script("memory_select", SideCallFailed("injected"))
    ml.on_user(Message.user("x"), 10.0)  # no exception reaches the main loop
    assert ml.injection_messages(20.0) == [] and ml.extra["memory_recall_failed"] == 1


def test_n_mem_5_at_most_5_injected_and_no_call_without_memories(world):
    ml = layer(world)
    ml.on_session_start("s", False, 0.0)
    ml.on_user(Message.user("x"), 1.0)
    assert world.services.calls == [] and ml.extra["memory_recall_empty"] == 1
    for i in range(7):
        seed(world, f"m{i}", "user")
    world.services.script("memory_select", (str([f"m{i}.md" for i in range(7)]).replace("'", '"'), 1.0, False))
    ml.on_user(Message.user("y"), 2.0)
    (msg,) = ml.injection_messages(5.0)
    assert len(msg.meta["memories"]) == 5


def test_n_mem_5_unparseable_selection_falls_back(world):
    seed(world, "orders-db", "project")
    seed(world, "tabs", "user")
    seed(world, "ci", "reference")
    ml = layer(world)
    ml.on_session_start("s", False, 0.0)
    world.services.script("memory_select", ("(memory_select) acknowledged", 1.0, False))
    ml.on_user(Message.user("the orders db is slow"), 1.0)
    (msg,) = ml.injection_messages(3.0)
    assert ml.extra["memory_select_fallback"] == 1
    assert [Path(p).name for p in msg.meta["memories"]] == ["orders-db.md", "tabs.md"]


def test_n_comp_12_markers_reset_after_compaction(world):
    """N-COMP-12: after a compaction the memory injected before is injected again on the very next
    request, read again from its file, with no new selection call and before any user message; the
    next recall then does not offer it again (its marker is set once more)."""
    seed(world, "tabs", "user", "I prefer tabs.")
    ml = layer(world)
    ml.on_session_start("s", False, 0.0)
    world.services.script("memory_select", ('["tabs.md"]', 1.0, False))
    ml.on_user(Message.user("a"), 1.0)
    assert len(ml.injection_messages(2.0)) == 1
    assert ml.injection_messages(2.1) == []  # injected once
    calls = len(world.services.calls)
    ml.on_compacted()
    (again,) = ml.injection_messages(2.2)
    assert "I prefer tabs." in again.text and again.meta["origin"] == "memory"
    assert len(world.services.calls) == calls and ml.extra["memory_reinjected_after_compaction"] == 1
    ml.on_user(Message.user("b"), 3.0)
    assert len(world.services.calls) == calls and ml.extra["memory_recall_empty"] == 1


def test_n_comp_12_reinjects_the_5_most_recently_injected(world):
    """Seven memories injected over three recalls (m0..m2, then m3..m5, then m6): a compaction brings
    back the five most recently injected (N-MEM-5: one block holds at most 5), newest first."""
    for i in range(7):
        seed(world, f"m{i}", "user")
    ml = layer(world)
    ml.on_session_start("s", False, 0.0)
    t = 1.0
    for names in (["m0", "m1", "m2"], ["m3", "m4", "m5"], ["m6"]):
        world.services.script("memory_select", (str([f"{n}.md" for n in names]).replace("'", '"'), 0.5, False))
        ml.on_user(Message.user("q"), t)
        assert len(ml.injection_messages(t + 1.0)) == 1
        t += 10.0
    ml.on_compacted()
    (again,) = ml.injection_messages(t)
    assert [Path(p).name for p in again.meta["memories"]] == ["m6.md", "m5.md", "m4.md", "m3.md", "m2.md"]


def test_resume_keeps_markers_fresh_session_resets(world):
    seed(world, "tabs", "user")
    ml = layer(world)
    ml.on_session_start("s1", False, 0.0)
    world.services.script("memory_select", ('["tabs.md"]', 1.0, False))
    ml.on_user(Message.user("a"), 1.0)
    ml.injection_messages(2.0)
    ml.on_session_start("s2", True, 10.0)   # resumed: the injection is in the restored history
    assert ml.injected
    ml.on_session_start("s3", False, 20.0)  # fresh conversation
    assert not ml.injected


# --- N-MEM-4 / N-MEM-1: extraction ---------------------------------------------------------------

def test_n_mem_4_back_to_back_extractions_one_runs_one_trails(world):
    """N-MEM-4: turns end at t=10 and t=11; the first extraction takes 5 s, so the second trigger
    only marks a trailing run, which starts at the first hook after t=15 and covers what was said
    since the first started."""
    ml = layer(world, instructions=False)
    ml.on_session_start("s", False, 0.0)
    world.services.script("memory_extract", (block("tabs", "user", "I prefer tabs."), 5.0, False),
                          (block("no-force-push", "feedback", "Never force-push."), 2.0, False))
    ml.on_user(Message.user("I prefer tabs."), 9.0)
    ml.on_response(answer(), Usage(), 10.0)
    ml.on_user(Message.user("Never force-push."), 10.5)
    ml.on_response(answer(), Usage(), 11.0)
    assert world.services.kinds().count("memory_extract") == 1
    assert ml.scheduler.trailing and ml.extra["memory_extract_trailing_marked"] == 1
    assert not (world.tmp / "home/.novacode/memory/tabs.md").exists()  # answer not back before t=15
    ml.on_user(Message.user("next"), 15.0)
    assert (world.tmp / "home/.novacode/memory/tabs.md").exists()
    extracts = [c for c in world.services.calls if c[0] == "memory_extract"]
    assert len(extracts) == 2
    second = extracts[1][1].messages[-1].text
    assert "Never force-push." in second and "I prefer tabs." not in second.split("Existing memories:")[0]
    assert ml.extra["memory_extract_trailing_run"] == 1
    ml.on_session_end("s", 30.0)
    assert os.stat(world.tmp / "home/.novacode/memory/no-force-push.md").st_mtime == 17.0  # 15 + 2 s


def test_n_mem_4_no_extraction_on_tool_turns(world):
    ml = layer(world, instructions=False)
    ml.on_session_start("s", False, 0.0)
    ml.on_user(Message.user("go"), 1.0)
    ml.on_response(Message("assistant", (Block.tool_use("t1", "Read", {"path": "/a"}),)), Usage(), 2.0)
    assert "memory_extract" not in world.services.kinds()


def test_n_mem_1_extracted_memories_routed(world):
    """N-MEM-1 through the layer: a feedback memory lands in the home, a project one in the project."""
    ml = layer(world, instructions=False)
    ml.on_session_start("s", False, 0.0)
    world.services.script("memory_extract", (block("ruff", "feedback", "Run ruff first.") + "\n"
                                             + block("pg", "project", "We chose Postgres."), 1.0, False))
    ml.on_user(Message.user("Run ruff first. We chose Postgres."), 1.0)
    ml.on_response(answer(), Usage(), 2.0)
    ml.on_session_end("s", 5.0)
    assert (world.tmp / "home/.novacode/memory/ruff.md").exists()
    assert (world.tmp / "project/.novacode/memory/pg.md").exists()
    assert ml.extra["memory_written"] == 2


def test_n_mem_4_unparseable_extraction_falls_back(world):
    ml = layer(world, instructions=False)
    ml.on_session_start("s", False, 0.0)
    world.services.script("memory_extract", ("(memory_extract) acknowledged", 1.0, False))
    ml.on_user(Message.user("Preference: name new cache helpers with the prefix `cache7_`."), 1.0)
    ml.on_response(answer(), Usage(), 2.0)
    ml.on_session_end("s", 3.0)
    assert ml.extra["memory_extract_fallback"] == 1
    (f,) = [p for p in (world.tmp / "home/.novacode/memory").glob("*.md") if p.name != mm.INDEX_FILE]
    assert "Preference: name new cache helpers with the prefix `cache7_`." in f.read_text()


def test_n_mem_4_failed_extraction_keeps_dialogue(world):
    ml = layer(world, instructions=False)
    ml.on_session_start("s", False, 0.0)
    world.services.script("memory_extract", SideCallFailed("injected"), (block("a", "user", "A."), 1.0, False))
    ml.on_user(Message.user("first thing"), 1.0)
    ml.on_response(answer(), Usage(), 2.0)
    ml.on_user(Message.user("second thing"), 3.0)
    ml.on_response(answer(), Usage(), 4.0)
    second = [c for c in world.services.calls if c[0] == "memory_extract"][1][1].messages[-1].text
    assert "first thing" in second and "second thing" in second


# --- N-MEM-7: consolidation ------------------------------------------------------------------------

DAY = 24 * 3600.0


def run_sessions(ml: MemoryLayer, world, names: list[str], start: float, step: float) -> None:
    t = start
    for s in names:
        world.clock.t = t
        ml.on_session_start(s, False, t)
        ml.on_session_end(s, t + 1)
        t += step


def test_n_mem_7_consolidation_after_5_sessions_then_24h(world):
    """N-MEM-7: never consolidated → the 5th session end consolidates; the 6th (1 h later) is
    stopped by the 24 h gate; 5 more sessions after 24 h consolidate again."""
    seed(world, "a", body="Use tabs.")
    seed(world, "b", body="use tabs.")
    ml = layer(world, instructions=False)
    world.services.script("memory_consolidate", ("(memory_consolidate) acknowledged", 3.0, False))
    run_sessions(ml, world, ["s1", "s2", "s3", "s4"], 0.0, 3600.0)
    assert "memory_consolidate" not in world.services.kinds()
    assert ml.extra["memory_consolidate_gate_sessions"] == 4
    run_sessions(ml, world, ["s5"], 4 * 3600.0, 3600.0)
    assert world.services.kinds().count("memory_consolidate") == 1
    assert ml.extra["memory_consolidate_fallback"] == 1 and ml.extra["memory_consolidate_deleted"] == 1
    assert sorted(p.name for p in (world.tmp / "home/.novacode/memory").glob("*.md")) == [mm.INDEX_FILE, "a.md"]
    state = mm.ConsolidationState.load(world.tmp / "home/.novacode/memory" / mm.STATE_FILE)
    assert state.last_consolidated_at == 4 * 3600.0 + 1 and state.sessions == []
    assert not (world.tmp / "home/.novacode/memory" / mm.LOCK_FILE).exists()  # released
    run_sessions(ml, world, ["s6"], 5 * 3600.0, 3600.0)
    assert ml.extra["memory_consolidate_gate_interval"] == 1
    run_sessions(ml, world, [f"t{i}" for i in range(5)], 4 * 3600.0 + 1 + DAY, 3600.0)
    assert world.services.kinds().count("memory_consolidate") == 2


def test_n_mem_7_scan_throttle(world):
    """N-MEM-7: session ends 5 minutes apart: the session scan runs at most once per 10 minutes."""
    ml = layer(world, instructions=False)
    run_sessions(ml, world, ["a", "b", "c"], 0.0, 300.0)  # t = 1, 301, 601
    assert ml.extra["memory_consolidate_gate_sessions"] == 2  # scanned at 1 and 601
    assert ml.extra["memory_consolidate_gate_throttled"] == 1


def test_n_mem_7_fresh_lock_respected_stale_taken_over(world):
    """N-MEM-7 through the layer: a lock another live agent took 10 s ago blocks consolidation (and
    the sessions keep counting); once it is over an hour old it is taken over."""
    seed(world, "a")
    ml = layer(world, instructions=False)
    lock = world.tmp / "home/.novacode/memory" / mm.LOCK_FILE
    lock.write_text(LockInfo("other", os.getppid(), socket.gethostname(), 4 * 3600.0 - 10, "x").dump())
    run_sessions(ml, world, ["s1", "s2", "s3", "s4", "s5"], 0.0, 3600.0)  # 5th ends at 14,401
    assert ml.extra["memory_consolidate_locked"] == 1 and "memory_consolidate" not in world.services.kinds()
    assert len(mm.ConsolidationState.load(lock.parent / mm.STATE_FILE).sessions) == 5
    run_sessions(ml, world, ["s6"], 4 * 3600.0 - 10 + 3601, 60.0)  # 3,602 s after the lock was taken
    assert ml.extra["memory_consolidate_lock_takeover"] == 1
    assert world.services.kinds().count("memory_consolidate") == 1
    assert not lock.exists()

"""What a strategy sent, in order: every request (main and side calls) and the hooks that change
what the invariants may compare (session starts, sub-task spans).

The engine reports every request it sends to ``RunConfig.observer``; the hooks are seen by
wrapping the strategy class in a subclass that notes them and then does exactly what the class
does. Two ways to get a :class:`Recording`:

* :func:`record` replays a whole trace (the engine's own ``replay``);
* :class:`Stepper` feeds a trace to the engine a few events at a time, so a state machine can
  check the invariants after every step. Feeding a trace in chunks is the same replay as feeding it
  whole (tests/testing/test_recording.py): what the engine would still hold at a chunk's end (a
  group of tool results that may go on, probes waiting for their call) waits for the next chunk.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Block, Request
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.testing.inputs import InputGuard, SentGuard
from ctxsim.harness.testing.writes import watching
from ctxsim.strategies.base import Strategy

MAIN_KINDS = ("main", "readback", "subagent")  # requests that carry the conversation itself


@dataclass(frozen=True)
class Sent:
    """One request the engine sent, with what the engine made of it."""

    request: Request
    tokens: int       # true input tokens (the provider's count)
    window: int
    rejected: bool    # the API would have refused it (or an injected failure)
    error: str
    call: int         # row of RunResult.calls
    now: float
    tools_json: str = ""  # the tools array as sent, by value (a memoised digest hides in-place edits)

    @property
    def kind(self) -> str:
        return self.request.kind

    @property
    def main_line(self) -> bool:
        return self.request.kind in MAIN_KINDS


@dataclass(frozen=True)
class Mark:
    """A strategy hook the engine called: ``session_start`` (with ``resume``), ``session_end``,
    ``subtask_start`` (with ``isolated``), ``subtask_end`` (``text``: the sub-agent's conclusion), ``on_rejected`` (the API refused the
    request just sent for the reasons in ``id``; ``retried``: the strategy reacted and had it sent
    again); or ``side_result``: a side call of kind ``id`` answered ``text`` (after its :class:`Sent`);
    or ``outside_write``: the strategy wrote the file ``id`` outside the run's directory (``text``: the
    audit event, :mod:`ctxsim.harness.testing.writes`); or ``user``: a user message came in (``text``, and the
    ``message``); or ``message``: the engine gave the strategy the model's answer or a message of tool results
    (``message``: the conversation as it grows between requests, a compaction's tail measured against it)."""

    what: Literal["session_start", "session_end", "subtask_start", "subtask_end", "side_result", "on_rejected",
                  "outside_write", "user", "message"]
    id: str = ""
    resume: bool = False
    isolated: bool = False
    text: str = ""
    retried: bool = False
    message: Any = None
    usage: Any = None  # with ``message``: the usage the engine reported for the answer (its ``Usage``)


Entry = Sent | Mark


@dataclass
class Recording:
    """Everything the invariants need: the entries in order, what the trace fed the strategy (the
    original tool results, by tool_use id), and the run's directory (spill files, transcripts)."""

    strategy: type[Strategy]
    entries: list[Entry] = field(default_factory=list)
    originals: dict[str, str] = field(default_factory=dict)
    session_dir: Path | None = None
    window: int = 0
    model: str = ""   # the run's model (a request with no model of its own is sent on it)
    max_output: int = 0  # the strategy's env.max_output_tokens (what a declared trigger depends on)
    errors: dict[str, bool] = field(default_factory=dict)     # tool_use id -> is_error of its result
    thinking: dict[str, str] = field(default_factory=dict)    # tool_use id -> thinking of the answer that made the call
    trace_digests: set[bytes] = field(default_factory=set)    # digests of the blocks the trace fed
    input_changes: list[str] = field(default_factory=list)    # inputs the strategy changed in place (record())
    goals: dict[str, str] = field(default_factory=dict)       # launch id -> the user's first request of its conversation
    inputs: dict[str, Any] = field(default_factory=dict)      # tool_use id -> its input as the trace fed it (a copy)
    params: dict[str, Any] = field(default_factory=dict)      # the strategy's parameters (what it declares depends on them)
    conversation: dict[str, str] = field(default_factory=dict)  # launch id -> its conversation (the first launch of its resume chain)
    conv_ids: dict[str, set[str]] = field(default_factory=dict)  # conversation -> the tool_use ids fed in it
    conv_texts: dict[str, set[bytes]] = field(default_factory=dict)  # conversation -> digests of the text fed in it
    recorded_summaries: set[str] = field(default_factory=set)  # the summaries of the recorded agent's compactions
    _launch: tuple[str, bool] | None = None                    # the launch being fed, and whether its goal is set
    _depth: int = 0                                            # open sub-task spans (their prompts are no goal)

    @property
    def requests(self) -> list[Sent]:
        return [e for e in self.entries if isinstance(e, Sent)]

    def note_events(self, events) -> None:
        """What the invariants compare against, from the events fed to the strategy."""
        for e in events:
            if isinstance(e, tr.SessionStart):  # a resume keeps its conversation's goal
                prev = self.goals.get(self._launch[0]) if self._launch else None
                if e.resume and prev is not None:
                    self.goals[e.session] = prev
                last = self.conversation.get(self._launch[0]) if self._launch else None
                self.conversation[e.session] = last if e.resume and last is not None else e.session
                self._launch, self._depth = (e.session, e.session in self.goals), 0
            elif isinstance(e, tr.SubtaskStart):
                self._depth += 1
            elif isinstance(e, tr.SubtaskEnd):
                self._depth = max(0, self._depth - 1)
            elif isinstance(e, tr.UserEvent) and self._launch and not self._launch[1] and not self._depth:
                self.goals[self._launch[0]] = e.text
                self._launch = (self._launch[0], True)
            conv = self.conversation.get(self._launch[0], "") if self._launch else ""
            if isinstance(e, tr.CompactEvent) and e.summary and e.summary.strip():
                self.recorded_summaries.add(e.summary.strip())
            if isinstance(e, tr.ToolResultEvent):
                self.originals[e.tool_use_id] = e.content
                self.errors[e.tool_use_id] = e.is_error
            elif isinstance(e, tr.UserEvent):
                d = Block.text_block(e.text).digest
                self.trace_digests.add(d)
                self.conv_texts.setdefault(conv, set()).add(d)
            elif isinstance(e, tr.AssistantEvent):
                thinking = next((c.thinking for c in e.content if isinstance(c, tr.ThinkingContent)), None)
                for c in e.content:
                    if isinstance(c, tr.TextContent):
                        d = Block.text_block(c.text).digest
                        self.trace_digests.add(d)
                        self.conv_texts.setdefault(conv, set()).add(d)
                    elif isinstance(c, tr.ToolUseContent):
                        self.inputs[c.id] = copy.deepcopy(c.input)
                        self.conv_ids.setdefault(conv, set()).add(c.id)
                        if thinking is not None:
                            self.thinking[c.id] = thinking


_SCRATCH = [0]


def scratch_dir() -> Path:
    """A fresh directory for one run's files: in memory (/dev/shm) where there is one, since a
    state machine makes hundreds of short runs that each write spills and transcripts.

    Its name is ``ctxsim-check-`` and six digits: spill placeholders and transcript pointers name
    it, and a name of random letters would tokenise to a different count on every run (a request
    at the window's edge would pass once and fail the next time); six digits are two tokens
    whatever they are.
    """
    shm = Path("/dev/shm")
    root = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    while True:
        _SCRATCH[0] += 1
        d = root / f"ctxsim-check-{(os.getpid() * 1_000 + _SCRATCH[0]) % 1_000_000:06d}"
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue


def originals_of(events) -> dict[str, str]:
    """tool_use id -> the result the trace feeds the strategy."""
    return {e.tool_use_id: e.content for e in events if isinstance(e, tr.ToolResultEvent)}


class _NotedServices:
    """The engine's side-call service, noting each answer (the path-back check compares a summary's
    text with what the next request holds)."""

    def __init__(self, inner: Any, log: list[Entry]) -> None:
        self._inner, self._log = inner, log

    def call(self, request, spec):
        res = self._inner.call(request, spec)
        self._log.append(Mark("side_result", spec.kind, text=res.text))
        return res

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def observing(cls: type[Strategy], log: list[Entry], rec: Recording | None = None) -> type[Strategy]:
    """``cls`` with its session and sub-task hooks noted in ``log`` (before the hook runs), and the
    answers of its side calls; the model's output limit it is given noted in ``rec``."""

    def __init__(self, config, env):
        if env.services is not None and not isinstance(env.services, _NotedServices):
            env.services = _NotedServices(env.services, log)
        if rec is not None:
            rec.max_output = env.max_output_tokens
        cls.__init__(self, config, env)

    def on_session_start(self, session, resume, now):
        log.append(Mark("session_start", session, resume=resume))
        return cls.on_session_start(self, session, resume, now)

    def on_session_end(self, session, now):
        log.append(Mark("session_end", session))
        return cls.on_session_end(self, session, now)

    def on_user(self, message):
        log.append(Mark("user", text=message.text, message=message))
        return cls.on_user(self, message)

    def on_response(self, message, usage):
        log.append(Mark("message", message=message, usage=usage))
        return cls.on_response(self, message, usage)

    def on_tool_results(self, message):
        log.append(Mark("message", message=message))
        return cls.on_tool_results(self, message)

    def on_subtask_start(self, id, description, isolated):
        log.append(Mark("subtask_start", id, isolated=isolated))
        return cls.on_subtask_start(self, id, description, isolated)

    def on_subtask_end(self, id, conclusion):
        log.append(Mark("subtask_end", id, text=conclusion or ""))
        return cls.on_subtask_end(self, id, conclusion)

    def on_rejected(self, rejection, call):
        retried = bool(cls.on_rejected(self, rejection, call))
        log.append(Mark("on_rejected", ",".join(rejection.reasons), text=rejection.detail, retried=retried))
        return retried

    return type(cls.__name__, (cls,), {
        "__module__": __name__, "__doc__": cls.__doc__, "__init__": __init__, "on_rejected": on_rejected,
        "on_session_start": on_session_start, "on_session_end": on_session_end, "on_user": on_user,
        "on_response": on_response, "on_tool_results": on_tool_results,
        "on_subtask_start": on_subtask_start, "on_subtask_end": on_subtask_end,
    })


def fresh_at_launch(cls: type[Strategy]) -> type[Strategy]:
    """``cls`` whose instance is built again at each new launch after the first (a session start
    that does not resume), with the config and environment it was first given: what a new process
    of the agent starts with, the run's files and nothing else it held in memory. A resume keeps
    the instance (the simulator's conversation stands for the transcript a resumed agent reads)."""

    def __init__(self, config, env):
        cls.__init__(self, config, env)
        self.__dict__["_fresh_args"] = (config, env)

    def on_session_start(self, session, resume, now):
        args = self.__dict__["_fresh_args"]
        if not resume and self.__dict__.get("_fresh_launched"):
            self.__dict__.clear()
            cls.__init__(self, *args)
            self.__dict__["_fresh_args"] = args
        self.__dict__["_fresh_launched"] = True
        return cls.on_session_start(self, session, resume, now)

    return type(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                       "__doc__": cls.__doc__, "__init__": __init__,
                                       "on_session_start": on_session_start})


def relaunched_note(entries: list[Entry], sent: Sent) -> str:
    """Said of a difference at ``sent`` from a second replay built anew at each new launch
    (:func:`fresh_at_launch`): what it may be, where a new launch (not the first, not a resume) came before; else ""."""
    starts = 0
    for e in entries:
        if e is sent:
            break
        starts += isinstance(e, Mark) and e.what == "session_start" and not e.resume
    if starts < 2:
        return ""
    return (" (the second replay built the strategy anew at the new launch before it, as a new process of the agent starts "
            "with only the run's files: state kept in memory across launches, or a run not deterministic; a strategy "
            "that keeps something by design declares it: keeps_across_launches)")


def tools_json(request: Request) -> str:
    import json

    return json.dumps([t.to_api() for t in request.tools.tools], sort_keys=True, ensure_ascii=False, default=str)


def _observer(log: list[Entry], chain: Any = None, sent: tuple[SentGuard, Recording] | None = None):
    def observe(request: Request, info: Mapping[str, Any]) -> None:
        if info.get("fork"):   # a fork's request is the engine's (harness/replay/fork.py), no promise of the strategy's
            if chain is not None:
                chain(request, info)
            return
        log.append(Sent(request, int(info["tokens"]), int(info["window"]), bool(info.get("rejected")),
                        str(info.get("error", "")), int(info.get("call", -1)), float(info.get("now", 0.0)),
                        tools_json(request)))
        if sent is not None:   # the strategy's own tool_use inputs, as sent (the trace's: InputGuard)
            sent[0].sent(request, sent[1].inputs)
        if chain is not None:
            chain(request, info)
    return observe


def _noting(log: list[Entry]):
    def note(event: str, path: str) -> None:
        log.append(Mark("outside_write", path, text=event))
    return note


def record(trace: tr.Trace, strategy: type[Strategy], params: Mapping[str, Any] | None = None,
           config: RunConfig | None = None, session_dir: Path | None = None) -> Recording:
    """Replay ``trace`` through ``strategy`` and record what it sent.

    The run's files stay in ``session_dir`` (the path-back invariant reads them); without one, a
    temporary directory is made and left for the caller (``recording.session_dir``; remove it with
    :func:`shutil.rmtree` when done, or pass a pytest ``tmp_path``).
    """
    cfg = config or RunConfig()
    d = Path(session_dir) if session_dir is not None else scratch_dir()
    rec = Recording(strategy, session_dir=d, params=dict(params or {}))
    rec.note_events(trace.events)
    guard = InputGuard(trace.header)
    guard.add(trace.events)
    own = SentGuard()
    cfg = replace(cfg, observer=_observer(rec.entries, cfg.observer, (own, rec)), session_dir=d)
    with watching(d, _noting(rec.entries)):
        res = replay(trace, observing(strategy, rec.entries, rec), params, cfg)
    rec.window, rec.model = res.window, res.model
    rec.input_changes = guard.changes() + own.changes()
    return rec


def _ready(events: list[Any]) -> tuple[list[Any], list[Any]]:
    """``events`` split into what can be replayed now and what must wait for later events."""
    cut = len(events)
    while cut and isinstance(events[cut - 1], (tr.ToolResultEvent, tr.FactEvent)):
        cut -= 1
    last_call = max((i for i, e in enumerate(events) if tr.is_call(e)), default=-1)
    probe = next((i for i, e in enumerate(events) if i > last_call and isinstance(e, tr.ProbeEvent)), None)
    if probe is not None:
        cut = min(cut, probe)
    return events[:cut], events[cut:]


class Stepper:
    """Feeds a trace to the engine a chunk of events at a time, recording as it goes.

    Uses the engine's run object directly (``ctxsim.harness.replay.engine._Run``): one run, one strategy
    instance, one provider and cache state across all chunks, exactly as ``replay`` would have
    over the concatenated events.
    With ``fresh_launches`` the strategy is built again at each new launch (:func:`fresh_at_launch`).
    """

    def __init__(self, header: tr.Header, strategy: type[Strategy], params: Mapping[str, Any] | None = None,
                 config: RunConfig | None = None, session_dir: Path | None = None,
                 twin_of: Stepper | None = None, fresh_launches: bool = False) -> None:
        from ctxsim.harness.replay.engine import _Run

        cfg = config or RunConfig()
        # a twin replays the same chunks as ``twin_of``: it shares their trace objects, so the blocks
        # the engine makes of the trace's events (and their token counts) are made once
        self._chunks: list[tr.Trace] = []
        self._twin_of = twin_of
        self._own_dir = session_dir is None
        self.session_dir = Path(session_dir) if session_dir is not None else scratch_dir()
        self.header = header
        self.events: list[Any] = []
        self.recording = Recording(strategy, session_dir=self.session_dir, params=dict(params or {}))
        self.sent_guard = SentGuard()   # the strategy's own tool_use inputs, compared on demand
        cfg = replace(cfg, observer=_observer(self.recording.entries, cfg.observer, (self.sent_guard, self.recording)),
                      session_dir=self.session_dir)
        self.config = cfg
        self._note = _noting(self.recording.entries)
        with watching(self.session_dir, self._note):
            built = fresh_at_launch(strategy) if fresh_launches else strategy
            self._run = _Run(tr.Trace(header, []), observing(built, self.recording.entries, self.recording), params, cfg,
                             self.session_dir)
        self.recording.window = self._run.provider.window
        self.recording.model = self._run.provider.model
        self._held: list[Any] = []

    def feed(self, events: list[Any]) -> None:
        """Replay ``events`` (appended to what was fed before). Events the engine would still be
        holding at the end of a whole replay's step are held here too, until the next feed or
        :meth:`flush`: tool results whose group may go on (the engine makes one message of each
        group) and probes waiting for their model call."""
        self.events.extend(events)
        self.recording.note_events(events)
        facts = {e.id: e for e in events if isinstance(e, tr.FactEvent)}
        learn = getattr(self._run.backend, "learn", None)
        if facts and learn is not None:
            learn(facts)   # the facts a whole replay would have known from the trace's start
        now, self._held = _ready(self._held + list(events))
        self._replay(now)

    def flush(self) -> None:
        """Replay whatever is held (the trace is complete)."""
        held, self._held = self._held, []
        self._replay(held)

    def _replay(self, events: list[Any]) -> None:
        if events:
            k = len(self._chunks)
            shared = self._twin_of._chunks if self._twin_of is not None else []
            same = k < len(shared) and len(shared[k].events) == len(events) and all(
                a is b for a, b in zip(shared[k].events, events))
            chunk = shared[k] if same else tr.Trace(self.header, events)
            self._chunks.append(chunk)
            self._run.trace = chunk
            with watching(self.session_dir, self._note):
                self._run.run()

    def close(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.session_dir, ignore_errors=True)

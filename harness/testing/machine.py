"""A hypothesis state machine that drives any strategy with random agent events and checks the
invariants after every step.

Each rule is one thing an agent session does next (a user message, a model call with parallel
tool calls and their results, a final answer, a read-back of a file the strategy spilled, a
sub-agent, a restart, a crash and resume, a compaction the recorded agent did); the engine replays
it at once (:class:`~harness.testing.recording.Stepper`) and the invariants are checked on the
requests it made the strategy send. When one fails, hypothesis shrinks the session to a minimal
one, and the failure carries it as a trace file the user can replay.

The window is small (:data:`CHECK_WINDOW`), so a few dozen steps cross it several times. A
strategy whose default thresholds are absolute token counts tuned for a 200k window can say what
to use instead: a ``check_params`` attribute on the class, a mapping or a function of the window
(see docs/writing-a-strategy.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from harness import trace as tr
from harness.engine import RunConfig
from harness.llm import SUMMARY, VERIFY
from harness.testing import conversations as conv
from harness.testing.invariants import Checker, InvariantViolation, Violation, promises
from harness.testing.recording import Stepper
from strategies.base import Strategy

CHECK_WINDOW = 32_000  # tokens: small enough that ~40 steps cross it several times, fast to tokenise
CHECK_MODEL = "claude-sonnet-4-6"
FAILING_KINDS = (SUMMARY, VERIFY)  # side calls the machine fails by injection (the same call numbers)

# --- parameters for a small window -----------------------------------------------------------------

# NovaCode's numbers are absolute (spec/novacode.md, tuned for 200k): scaled by window / 200k so the
# same rules act at the same relative points of a small window.
_NOVACODE_SCALED = ("summary_reserve", "soft_margin", "hard_margin", "tail_min_tokens", "tail_max_tokens",
                    "min_compressible_tokens", "summary_max_output_tokens", "restore_file_tokens",
                    "restore_total_tokens", "restore_skill_tokens", "spill_threshold_chars",
                    "spill_budget_chars", "spill_preview_chars")


def _scaled(names: tuple[str, ...], base_window: int = 200_000) -> Callable[[type[Strategy], int], dict[str, Any]]:
    def params(cls: type[Strategy], window: int) -> dict[str, Any]:
        fields = cls.Config.model_fields
        missing = [n for n in names if n not in fields]
        if missing:
            raise ValueError(f"{cls.name}: the property kit scales {', '.join(missing)}, which the config no "
                             "longer has; give the class a check_params (docs/writing-a-strategy.md)")
        return {n: max(1, int(fields[n].default * window / base_window)) for n in names}
    return params


# strategies whose modules do not (yet) declare check_params themselves
KNOWN_PARAMS: dict[str, Callable[[type[Strategy], int], dict[str, Any]]] = {
    "novacode": _scaled(_NOVACODE_SCALED),
    # NovaCode's lines and tail, no summary (N-COMP-13): the same absolute numbers, scaled alike
    "cut_no_summary": _scaled(("summary_reserve_tokens", "soft_margin_tokens", "tail_min_tokens",
                               "tail_max_tokens", "min_prefix_tokens")),
}


def params_for(cls: type[Strategy], window: int = CHECK_WINDOW) -> dict[str, Any]:
    """The parameters the kit runs ``cls`` with at ``window``: the class's own ``check_params``
    (a mapping, or a callable taking the window), else the kit's table, else the defaults."""
    hook = getattr(cls, "check_params", None)
    if isinstance(hook, Mapping):
        return dict(hook)
    if callable(hook):
        return dict(hook(window))
    known = KNOWN_PARAMS.get(cls.name)
    return known(cls, window) if known else {}


# --- the failure -----------------------------------------------------------------------------------

@dataclass
class CheckFailure(AssertionError):
    """An invariant broken (or the strategy raised) on a generated session; ``trace`` is that
    session (after shrinking, the minimal one) with the run's settings in ``header.meta``."""

    violations: list[Violation]
    trace: tr.Trace
    settings: dict[str, Any] = field(default_factory=dict)
    first_events: int = 0  # events of the first failing session found, before shrinking

    def __post_init__(self) -> None:
        AssertionError.__init__(self, str(self))

    @property
    def invariants(self) -> set[str]:
        return {v.invariant for v in self.violations}

    def __str__(self) -> str:
        n = self.trace.calls
        lines = [f"{len(self.violations)} violation(s) on a session of {len(self.trace.events)} events "
                 f"({n} model calls):"]
        lines += [f"  {v}" for v in self.violations[:10]]
        return "\n".join(lines)


def _size(f: CheckFailure) -> tuple[int, int]:
    """Smaller failures first: fewer events, then fewer characters."""
    return len(f.trace.events), sum(len(getattr(e, "text", "") or getattr(e, "content", "") or "")
                                    for e in f.trace.events if not isinstance(e, tr.AssistantEvent))


# --- the machine -----------------------------------------------------------------------------------

class StrategyMachine(RuleBasedStateMachine):
    """Drives ``strategy`` (set by :func:`machine_for`) through a generated agent session."""

    strategy: type[Strategy]
    params: dict[str, Any] = {}
    window: int = CHECK_WINDOW
    crashes: bool = True
    promised: frozenset[str] = frozenset()
    max_result_size: int = 2_000_000
    # per machine class, i.e. per search: the first failure's size and the smallest failure seen
    first_events: int = 0
    best: CheckFailure | None = None

    def __init__(self) -> None:
        super().__init__()
        self.builder = conv.ConversationBuilder()
        self.stepper: Stepper | None = None
        self.checker: Checker | None = None
        self.fail_calls: tuple[int, ...] = ()
        self._seen = 0

    # --- plumbing ---------------------------------------------------------------------------------
    def _settings(self) -> dict[str, Any]:
        return {"strategy": f"{self.strategy.__module__}:{self.strategy.__qualname__}", "name": self.strategy.name,
                "params": self.params, "window": self.window, "model": CHECK_MODEL,
                "fail_calls": {k: list(self.fail_calls) for k in FAILING_KINDS}}

    def _failure(self, violations: list[Violation]) -> CheckFailure:
        cls = type(self)
        if not cls.first_events:
            cls.first_events = len(self.builder.events)
        meta = {"check_strategy": {**self._settings(), "violations": [str(v) for v in violations]}}
        header = self.builder.header.model_copy(update={"meta": meta})
        trace = tr.validate_events(header, self.builder.events, header.name)
        f = CheckFailure(list(violations), trace, self._settings())
        if cls.best is None or _size(f) < _size(cls.best):
            cls.best = f
        return f

    def _feed(self, events: list[Any]) -> None:
        if self.stepper is None:
            return
        try:
            self.stepper.feed(events)
            self.stepper.flush()  # a step ends a group of results: nothing the engine would hold
        except Exception as e:  # the strategy (or the engine) raised on this input: a finding too
            n = len(self.stepper.recording.requests)
            raise self._failure([Violation("crash", n, "", f"{type(e).__name__}: {e}")]) from e

    # --- rules ------------------------------------------------------------------------------------
    @initialize(fail=st.sets(st.integers(0, 5), max_size=3), first=st.integers(20, 3_000))
    def start(self, fail: set[int], first: int) -> None:
        self.fail_calls = tuple(sorted(fail))
        cfg = RunConfig(model=CHECK_MODEL, window=self.window, seed=0,
                        fail_calls={k: self.fail_calls for k in FAILING_KINDS})
        self.stepper = Stepper(self.builder.header, self.strategy, self.params, cfg)
        self.checker = Checker(self.promised, self.stepper.recording.originals, self.stepper.session_dir)
        self._feed(self.builder.start_session())
        self._feed(self.builder.user(first, first))

    @precondition(lambda self: self.builder.phase == "user")
    @rule(size=st.integers(1, 4_000), seed=st.integers(0, 999))
    def user_says(self, size: int, seed: int) -> None:
        self._feed(self.builder.user(size, seed))

    @precondition(lambda self: self.builder.phase == "call")
    @rule(data=st.data())
    def model_calls_tools(self, data) -> None:
        self._feed(self.builder.call(data.draw(conv.turns(max_size=self.max_result_size, with_calls=True))))

    @precondition(lambda self: self.builder.phase == "call")
    @rule(data=st.data())
    def model_calls_tools_again(self, data) -> None:
        """Tool loops are the bulk of agent traffic: two rules make them twice as likely."""
        self._feed(self.builder.call(data.draw(conv.turns(max_size=self.max_result_size, with_calls=True))))

    @precondition(lambda self: self.builder.phase == "call")
    @rule(turn=conv.turns(with_calls=False))
    def model_answers(self, turn: conv.Turn) -> None:
        self._feed(self.builder.call(turn))

    @precondition(lambda self: self.builder.phase == "call" and bool(self.checker and self.checker.spills))
    @rule(data=st.data())
    def model_reads_back_a_spill(self, data) -> None:
        """The model follows a placeholder's path back to the file (N-SPILL-3's read-back)."""
        if self.checker is None:
            return
        path = data.draw(st.sampled_from(sorted(self.checker.spills)), label="path")
        content = self.checker.originals[self.checker.spills[path]]
        limit = data.draw(st.integers(1_000, 24_000), label="limit")
        self._feed(self.builder.read_back(path, content, 0, limit))

    @precondition(lambda self: self.builder.phase == "call")
    @rule(data=st.data(), isolated=st.booleans())
    def sub_agent(self, data, isolated: bool) -> None:
        inner = data.draw(st.lists(conv.turns(max_parallel=3, max_size=min(100_000, self.max_result_size),
                                              with_calls=True), max_size=3))
        self._feed(self.builder.subtask(inner, isolated=isolated))

    @precondition(lambda self: self.builder.phase == "user")
    @rule(resume=st.booleans(), size=st.integers(1, 1_000))
    def restart(self, resume: bool, size: int) -> None:
        self._feed(self.builder.end_session() + self.builder.start_session(resume=resume))
        self._feed(self.builder.user(size, size))

    @precondition(lambda self: self.crashes and self.builder.phase == "call")
    @rule(turn=conv.turns(max_parallel=3, max_size=4_000, with_calls=True), size=st.integers(1, 500))
    def crash_and_resume(self, turn: conv.Turn, size: int) -> None:
        """The agent dies with calls unanswered; the user resumes it (N-TRANS-5)."""
        self._feed(self.builder.call(turn, crash=True) + self.builder.start_session(resume=True))
        self._feed(self.builder.user(size, size))

    @precondition(lambda self: self.builder.phase in ("user", "call"))
    @rule()
    def recorded_compaction(self) -> None:
        self._feed(self.builder.recorded_compact())

    # --- the check --------------------------------------------------------------------------------
    @invariant()
    def invariants_hold(self) -> None:
        if self.stepper is None or self.checker is None:
            return
        entries = self.stepper.recording.entries
        new = self.checker.feed(entries[self._seen:])
        self._seen = len(entries)
        if new:
            raise self._failure(self.checker.violations)

    def teardown(self) -> None:
        if self.stepper is not None:
            self.stepper.close()


def machine_for(cls: type[Strategy], params: Mapping[str, Any] | None = None, window: int = CHECK_WINDOW,
                crashes: bool = True, promised: frozenset[str] | None = None,
                max_result_size: int = 2_000_000) -> type[StrategyMachine]:
    """A state machine class for ``cls``. A test module can expose it to pytest directly::

        M = machine_for(MyStrategy)
        M.TestCase.settings = selected_settings()
        TestMyStrategy = M.TestCase

    (:func:`find_failure` does the same and returns the smallest failure instead of raising.)"""
    return type(f"{cls.__name__}Machine", (StrategyMachine,), {
        "strategy": cls,
        "params": dict(params) if params is not None else params_for(cls, window),
        "window": window,
        "crashes": crashes,
        "promised": promised if promised is not None else promises(cls),
        "max_result_size": max_result_size,
        "__module__": __name__,
    })


@contextmanager
def _shrink_budget(seconds: float | None):
    """Bound the time hypothesis spends shrinking (its own bound is 5 minutes, a module constant of
    its engine: each shrink attempt here replays a session, so the default is far too long for a
    test suite)."""
    from hypothesis.internal.conjecture import engine

    if seconds is None or not hasattr(engine, "MAX_SHRINKING_SECONDS"):
        yield
        return
    old = engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKING_SECONDS = seconds
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = old


def find_failure(cls: type[Strategy], params: Mapping[str, Any] | None = None, *, settings=None,
                 window: int = CHECK_WINDOW, crashes: bool = True, promised: frozenset[str] | None = None,
                 max_result_size: int | None = None, shrink_seconds: float | None = None,
                 profile: str | None = None) -> CheckFailure | None:
    """Run the machine on ``cls``; the minimal failure hypothesis found, or None if every
    generated session kept every invariant.

    ``profile`` (default: ``$HYPOTHESIS_PROFILE``, else ci) sets the defaults of ``settings``,
    ``max_result_size`` and ``shrink_seconds`` (:data:`harness.testing.LIMITS`). Of every failure
    seen while searching and shrinking, the smallest (fewest events, then characters) is returned:
    hypothesis orders by its choice sequence, which may keep a session with more, tinier events.
    """
    from harness.testing import LIMITS, selected_profile, selected_settings

    name = selected_profile(profile)
    limits = LIMITS[name]
    size = max_result_size if max_result_size is not None else limits["max_result_size"]
    s = settings or selected_settings(name)
    machine = machine_for(cls, params, window, crashes, promised, size)
    budget = shrink_seconds if shrink_seconds is not None else limits["shrink_seconds"]
    try:
        with _shrink_budget(budget):
            run_state_machine_as_test(machine, settings=s)
    except CheckFailure as f:
        best = machine.best if machine.best is not None and _size(machine.best) < _size(f) else f
        best.first_events = machine.first_events or len(best.trace.events)
        return best
    except InvariantViolation as e:  # raised by a user's own invariant code
        return CheckFailure(e.violations, tr.validate_events(conv.default_header(), []))
    return None

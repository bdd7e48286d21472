"""A hypothesis state machine that drives any strategy with random agent events and checks the
invariants after every step.

Each rule is one thing an agent session does next (a user message, a model call with parallel
tool calls and their results, several mid-sized reads at once, output dense in tokens, a final
answer, a read-back of a file the strategy spilled, one or several sub-agents, a restart a minute
or a night later, a chain of crashes and resumes, a compaction the recorded agent did); the engine
replays it at once (:class:`~ctxsim.harness.testing.recording.Stepper`), a second engine replays it again
(the ``deterministic`` invariant), and the invariants are checked on the requests the strategy sent.
Each run starts shortly before midnight and injects failures into a few scattered summary calls or
a burst of them. When an invariant fails, hypothesis shrinks the session to a minimal one, and the
failure carries it as a trace file the user can replay.

The window is small (:data:`CHECK_WINDOW`), so a few dozen steps cross it several times. A
strategy whose default thresholds are absolute token counts tuned for a 200k window can say what
to use instead: a ``check_params`` attribute on the class, a mapping or a function of the window
(see docs/writing-a-strategy.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ctxsim.harness.llm.services import SUMMARY, VERIFY
from ctxsim.harness.model import trace as tr
from ctxsim.harness.replay.engine import RunConfig
from ctxsim.harness.testing import clock
from ctxsim.harness.testing import conversations as conv
from ctxsim.harness.testing.crash import crash_site
from ctxsim.harness.testing.declared import fresh_at_launches
from ctxsim.harness.testing.determinism import Canon, request_difference
from ctxsim.harness.testing.inputs import InputGuard
from ctxsim.harness.testing.invariants import Checker, InvariantViolation, Violation, promises
from ctxsim.harness.testing.params import CHECK_MODEL, CHECK_WINDOW, params_for
from ctxsim.harness.testing.recording import Stepper, relaunched_note
from ctxsim.strategies.base import Strategy
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

FAILING_KINDS = (SUMMARY, VERIFY)  # side calls the machine fails by injection (the same call numbers)
BREAKER_BURST = 3  # consecutive injected failures: N-COMP-4's breaker opens after 3 (the kit's bursts reach it)
NIGHT_S = 8 * 3_600  # a night between two launches  # assumed

# --- the failure -----------------------------------------------------------------------------------

@dataclass
class CheckFailure(AssertionError):
    """An invariant broken (or the strategy raised) on a generated session; ``trace`` is that
    session (after shrinking, the minimal one) with the run's settings in ``header.meta``."""

    violations: list[Violation]
    trace: tr.Trace
    settings: dict[str, Any] = field(default_factory=dict)
    first_events: int = 0  # events of the first failing session found, before shrinking
    first_session: int = 0  # sessions generated until the first failure (time to first failure)
    shrink_runs: int = 0  # sessions replayed while shrinking
    seed: int | None = None  # the seed of the search that found it

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

_DENSE_CALLS = st.lists(st.builds(conv.ToolCall, name=st.sampled_from(("Bash", "Read")),
                                  result_size=st.integers(2_000, 12_000), seed=st.integers(0, 10_000),
                                  dense=st.just(True)), min_size=1, max_size=4)
_BURSTS = st.integers(0, 3).map(lambda s: frozenset(range(s, s + BREAKER_BURST)))


class StrategyMachine(RuleBasedStateMachine):
    """Drives ``strategy`` (set by :func:`machine_for`) through a generated agent session, and a
    second copy of it through the same session (``deterministic``)."""

    strategy: type[Strategy]
    params: dict[str, Any] = {}
    window: int = CHECK_WINDOW
    crashes: bool = True
    promised: frozenset[str] = frozenset()
    max_result_size: int = 2_000_000
    twin: bool = True
    fresh_launches: bool = True  # the twin is built anew at each new launch (not where keeps_across_launches says why)
    known: tuple[tuple[str, str], ...] = ()  # (invariant, regex of the detail): findings reported, not failed on
    # per machine class, i.e. per search: the first failure's size and the smallest failure seen, and
    # the known findings met
    first_events: int = 0
    best: CheckFailure | None = None
    seen_known: list[Violation] = []
    # shrinking keeps the defect first found: a session counts as failing only if it breaks the
    # first failure's first invariant (hypothesis would slip to any other failure it meets on the
    # way, and report a re-spill as "deterministic"); and it replays at most shrink_examples
    # sessions after the first failure (later ones are drawn but not run, so they cannot fail and
    # the shrinker stalls): the minimal session is a function of the seed, not of the machine's load
    first_invariant: str | None = None
    sessions: int = 0        # sessions started (all phases)
    first_session: int = 0   # the session that failed first (time to first failure, in sessions)
    shrink_examples: int | None = None
    shrinking: bool = False  # set by find_failure while hypothesis shrinks
    shrink_runs: int = 0     # sessions run while shrinking
    longest: tuple[int, Any] | None = None  # (events, machine) of the longest session run: the cross-process check's
    # (files, machine) of the session whose run wrote the most files (saved outputs, spills, transcripts): the
    # cross-process check's too, since a file named from hash() or id() shows only where the strategy writes one
    most_files: tuple[int, Any] | None = None

    def __init__(self) -> None:
        super().__init__()
        self.builder = conv.ConversationBuilder()
        self._header = self.builder.header.model_copy(deep=True)  # as generated (a strategy may edit the live one)
        self.stepper: Stepper | None = None
        self.other: Stepper | None = None
        self.checker: Checker | None = None
        self.guard = InputGuard(self.builder.header)
        self.fail_calls: tuple[int, ...] = ()
        self.dense = False
        self._seen = 0
        self._compared = 0
        self._canon: tuple[Canon, Canon] | None = None
        self._pending: list[Violation] = []
        self._known_hit: set[str] = set()
        self._dead = False

    # --- plumbing ---------------------------------------------------------------------------------
    def _settings(self) -> dict[str, Any]:
        return {"prompt": "default" if self._header.system == conv.SYSTEM else "realistic","strategy": f"{self.strategy.__module__}:{self.strategy.__qualname__}", "name": self.strategy.name,
                "params": self.params, "window": self.window, "model": CHECK_MODEL,
                "fail_calls": {k: list(self.fail_calls) for k in FAILING_KINDS}, "dense": self.dense}

    def _failure(self, violations: list[Violation]) -> CheckFailure:
        cls = type(self)
        if not cls.first_events:
            cls.first_events = len(self.builder.events)
        if cls.first_invariant is None:
            cls.first_invariant = violations[0].invariant
            cls.first_session = cls.sessions
        meta = {"check_strategy": {**self._settings(), "violations": [str(v) for v in violations]}}
        # the session as generated: the pristine header and tool inputs, whatever the strategy edited in place
        header = _with_check_meta(self._header, meta)
        events = [self.guard.pristine(e) for e in self.builder.events]
        trace = tr.validate_events(header, events, header.name)
        f = CheckFailure(list(violations), trace, self._settings())
        if cls.best is None or _size(f) < _size(cls.best):
            cls.best = f
        return f

    def _where(self) -> str:
        return self.checker.where() if self.checker is not None else ""

    def _feed(self, events: list[Any]) -> None:
        if self.stepper is None or self._dead:
            return
        self.guard.add(events)
        try:
            self.stepper.feed(events)
            self.stepper.flush()  # a step ends a group of results: nothing the engine would hold
        except Exception as e:  # the strategy (or the engine) raised on this input: a finding too
            self._check_entries()  # what was sent before it raised, for the report's context
            at = crash_site(e)
            if not self._counts("crash"):  # shrinking another defect: this session is no example of it
                self._stop()
                return
            raise self._failure([Violation("crash", self._last_call(), "", f"{type(e).__name__}: {e}"
                                           + (f" at {at}" if at else ""), self._where())]) from e
        if self.other is not None:
            try:
                self.other.feed(events)
                self.other.flush()
            except Exception as e:
                self._pending.append(Violation("deterministic", self._last_call(), "", "the same session replayed "
                                               f"again raised {type(e).__name__}: {e} (the first run did not)",
                                               self._where()))
                self.other.close()
                self.other = None

    def _counts(self, invariant: str) -> bool:
        """Whether a violation of ``invariant`` makes this session a failure (see first_invariant)."""
        first = type(self).first_invariant
        return first is None or invariant == first

    def _stop(self) -> None:
        """Run and check nothing more of this session (it passes); the rules still draw as they
        would (a precondition that changed would make hypothesis' replays inconsistent)."""
        self._dead = True

    def _last_call(self) -> int:
        reqs = self.stepper.recording.requests if self.stepper else []
        return reqs[-1].call if reqs else -1

    def _check_entries(self) -> list[Violation]:
        if self.stepper is None or self.checker is None:
            return []
        entries = self.stepper.recording.entries
        new = self.checker.feed(entries[self._seen:])
        self._seen = len(entries)
        return new

    def _compare_twin(self) -> list[Violation]:
        """The second run's requests, one by one, against the first's."""
        if self.other is None or self._canon is None or "deterministic" not in self.promised:
            return []
        a = self.stepper.recording.requests
        b = self.other.recording.requests
        ca, cb = self._canon
        out = []
        for k in range(self._compared, min(len(a), len(b))):
            diff = request_difference(a[k].request, b[k].request, ca, cb)
            if diff:
                out.append(Violation("deterministic", a[k].call, a[k].kind,
                                     f"the same session replayed again sent another request: {diff}"
                                     + (relaunched_note(self.stepper.recording.entries, a[k]) if self.fresh_launches
                                        else ""), self._where()))
                break
        else:
            if len(a) != len(b):
                out.append(Violation("deterministic", a[-1].call if a else -1, "",
                                     f"the same session replayed again sent {len(b)} requests where the first run "
                                     f"sent {len(a)}", self._where()))
        self._compared = min(len(a), len(b))
        if out:  # one report is enough: stop comparing
            # what the second run broke, if anything, says why the two differ (a read-back recognised in one
            # run directory and not the other re-spills there): reported first, with the difference
            held = self.checker.promised if self.checker is not None else self.promised
            seen = Checker.for_recording(held, self.other.recording).feed(self.other.recording.entries)
            out = [replace(v, detail=f"{v.detail} (in the second replay of the session, in another run directory)")
                   for v in seen[:3]] + out
            self.other.close()
            self.other = None
        return out

    # --- rules ------------------------------------------------------------------------------------
    @initialize(fail=st.one_of(st.sets(st.integers(0, 5), max_size=3), _BURSTS),
                first=st.integers(20, 3_000), before_midnight=st.integers(0, 120),
                dense=st.sampled_from([False, False, False, True]),
                prompt=st.sampled_from([None, None, *conv.PROMPT_SHARE]),
                edge=st.sampled_from(clock.EDGES))
    def start(self, fail: set[int], first: int, before_midnight: int, dense: bool, prompt: float | None,
              edge: clock.Edge) -> None:
        """A run whose injected side-call failures are a few scattered calls or a burst of
        consecutive ones (enough to open a breaker), starting at most two and a half minutes
        before one of the clock's edges (:data:`clock.EDGES`: midnight UTC or local, a DST change;
        a launch crosses it: a date or time stamped at its start is stale by its end); in one run of four
        the tools print text dense in tokens (see :meth:`tools_print_dense_text`); in one of two
        the agent's prompt is a real one's size (10-25k tokens on 200k, scaled to the window, part
        of it opaque: :func:`conversations.realistic_header`), and the user has instruction files and
        memories on disk, loaded at each launch."""
        self.dense = dense
        self.fail_calls = tuple(sorted(fail))
        if prompt is not None:
            self.builder.header = conv.realistic_header(self.window, prompt, seed=first, files=True)
            self._header = self.builder.header.model_copy(deep=True)
            self.guard = InputGuard(self.builder.header)
        self.builder.t = edge.t - 60 - before_midnight  # the launch starts 30-150 s before the edge
        cls = type(self)
        cls.sessions += 1
        if cls.shrinking:
            cls.shrink_runs += 1
        cfg = RunConfig(model=CHECK_MODEL, window=self.window, seed=0,
                        fail_calls={k: self.fail_calls for k in FAILING_KINDS})
        self.stepper = Stepper(self.builder.header, self.strategy, self.params, cfg)
        if self.twin and "deterministic" in self.promised:
            # the copy is built again at each new launch, as a new process of the agent is: what the strategy
            # kept in memory across a launch shows as a difference from the first run (one instance throughout)
            self.other = Stepper(self.builder.header, self.strategy, self.params, cfg, twin_of=self.stepper,
                                 fresh_launches=self.fresh_launches)
            self._canon = (Canon(), Canon(str(self.other.session_dir), str(self.stepper.session_dir)))
        # an estimate from characters cannot be held to the truth on text dense in tokens: judged on
        # the other sessions (dense text is there to exercise on_rejected)
        held = self.promised - {"estimate"} if dense else self.promised
        self.checker = Checker.for_recording(held, self.stepper.recording)
        self._feed(self.builder.start_session())
        self._feed(self.builder.user(first, first))

    @precondition(lambda self: self.builder.phase == "user")
    @rule(size=st.integers(1, 4_000), seed=st.integers(0, 999))
    def user_says(self, size: int, seed: int) -> None:
        self._feed(self.builder.user(size, seed))

    @precondition(lambda self: self.builder.phase == "user")
    @rule(size=st.integers(1, 2_000), pause=st.sampled_from([120, 400, 1_500, 4_000]))
    def user_comes_back(self, size: int, pause: int) -> None:
        """The user reads a diff, takes a call, comes back minutes or an hour later, in the same
        launch (past a cache TTL; past midnight when the launch started before it)."""
        self.builder._tick(pause)
        self._feed(self.builder.user(size, pause))

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
    @rule(calls=st.lists(st.builds(conv.ToolCall, name=st.sampled_from(("Read", "Grep", "Bash")),
                                   result_size=st.integers(2_000, 12_000), seed=st.integers(0, 10_000)),
                         min_size=2, max_size=5), thinking=st.booleans())
    def model_reads_files(self, calls: list[conv.ToolCall], thinking: bool) -> None:
        """Several mid-sized reads at once, each under a spill threshold: how a session fills its
        window fast, so that it is compacted (or cut) several times."""
        self._feed(self.builder.call(conv.Turn(calls=tuple(calls), thinking=400 if thinking else 0)))

    @precondition(lambda self: self.dense and self.builder.phase == "call")
    @rule(calls=_DENSE_CALLS)
    def tools_print_dense_text(self, calls: list[conv.ToolCall]) -> None:
        """Output of about a token per character (a log in Chinese, a dump of escapes), mostly
        under a spill threshold: a characters-per-token estimate undercounts it, so the request can
        pass the window unforeseen, and the strategy's reaction to the refusal (on_rejected) is
        what keeps the session going."""
        self._feed(self.builder.call(conv.Turn(calls=tuple(calls))))

    @precondition(lambda self: self.dense and self.builder.phase == "call")
    @rule(calls=_DENSE_CALLS)
    def tools_print_dense_text_again(self, calls: list[conv.ToolCall]) -> None:
        """In a session of such output, most of it is (two rules make it twice as likely)."""
        self._feed(self.builder.call(conv.Turn(calls=tuple(calls))))

    @precondition(lambda self: self.builder.phase == "call")
    @rule(turn=conv.turns(with_calls=False))
    def model_answers(self, turn: conv.Turn) -> None:
        self._feed(self.builder.call(turn))

    @precondition(lambda self: self.builder.phase == "call" and bool(self.checker and self.checker.spills))
    @rule(data=st.data())
    def model_reads_back_a_spill(self, data) -> None:
        """The model follows a placeholder's path back to the file (N-SPILL-3's read-back): by the
        path the placeholder gives, or relative to the run directory (as the recorded agent's own
        paths are), with Read or ``cat``, alone or beside other calls; the result is what the file
        holds now."""
        if self.checker is None or self.stepper is None:
            return
        path = data.draw(st.sampled_from(sorted(self.checker.spills)), label="path")
        p = Path(path)
        style = data.draw(st.sampled_from(["absolute", "relative", "dot", "cat"]), label="style")
        name = {"absolute": path, "relative": f"{p.parent.name}/{p.name}", "dot": f"./{p.parent.name}/{p.name}",
                "cat": f"{p.parent.name}/{p.name}"}[style]
        try:
            content = p.read_text(encoding="utf-8", errors="surrogatepass")
        except OSError:
            content = None
        # a slice, or most of the file: a read-back over a message's aggregate budget is the case N-SPILL-3 is for
        limit = data.draw(st.sampled_from([(1_000, 8_000), (20_000, 60_000)]).flatmap(lambda b: st.integers(*b)),
                          label="limit")
        siblings = data.draw(st.lists(conv.tool_calls(max_size=min(60_000, self.max_result_size)), max_size=3),
                             label="siblings")
        self._feed(self.builder.read_back(name, content, 0, limit, tool="Bash" if style == "cat" else "Read",
                                          siblings=tuple(siblings)))

    @precondition(lambda self: self.builder.phase == "call" and bool(self.checker and self.checker.spills))
    @rule(data=st.data())
    def model_reads_back_again(self, data) -> None:
        """Read-backs follow spills in real sessions: two rules make them twice as likely."""
        self.model_reads_back_a_spill(data)

    @precondition(lambda self: self.builder.phase == "call")
    @rule(data=st.data(), isolated=st.booleans(), more=st.integers(0, 2))
    def sub_agent(self, data, isolated: bool, more: int) -> None:
        """One sub-agent, or up to three launched together (parallel ``Task`` calls)."""
        def work():
            return st.lists(conv.turns(max_parallel=3, max_size=min(100_000, self.max_result_size), with_calls=True),
                            max_size=3)
        inner = data.draw(work())
        parallel = [data.draw(work()) for _ in range(more)] if isolated else []
        self._feed(self.builder.subtask(inner, isolated=isolated, parallel=parallel))

    @precondition(lambda self: self.builder.phase == "user")
    @rule(resume=st.booleans(), size=st.integers(1, 1_000), night=st.booleans())
    def restart(self, resume: bool, size: int, night: bool) -> None:
        """The user quits and starts again (a new conversation, or resuming the last one), a
        minute or a night later."""
        self._feed(self.builder.end_session() + self.builder.start_session(resume=resume,
                                                                           pause=NIGHT_S if night else 30.0))
        self._feed(self.builder.user(size, size))

    @precondition(lambda self: self.crashes and self.builder.phase == "call")
    @rule(turns=st.lists(conv.turns(max_parallel=3, max_size=4_000, with_calls=True), min_size=1, max_size=3),
          size=st.integers(1, 500))
    def crash_and_resume(self, turns: list[conv.Turn], size: int) -> None:
        """The agent dies with calls unanswered and the user resumes it (N-TRANS-5), up to three
        times in a row, saying "continue" each time. Of a turn's parallel calls, the first ``size``
        mod 3 had returned and been written (a value already drawn: a draw of its own would move every
        session of the seeded corpus)."""
        for k, turn in enumerate(turns):
            if k:
                self._feed(self.builder.user(size, size + k))
            self._feed(self.builder.call(turn, crash=True, answered=min(size % 3, len(turn.calls) - 1))
                       + self.builder.start_session(resume=True))
        self._feed(self.builder.user(size, size))

    @precondition(lambda self: self.builder.phase in ("user", "call"))
    @rule()
    def recorded_compaction(self) -> None:
        self._feed(self.builder.recorded_compact())

    # --- the check --------------------------------------------------------------------------------
    @invariant()
    def invariants_hold(self) -> None:
        if self.stepper is None or self.checker is None or self._dead:
            return
        new = self._check_entries()
        if "inputs" in self.promised:
            new += [Violation("inputs", self._last_call(), "", d, self._where())
                    for d in self.guard.changes() + self.stepper.sent_guard.changes()]
        new += self._compare_twin() + self._pending
        self._pending = []
        if new and type(self).first_invariant is not None and not any(self._counts(v.invariant) for v in new):
            return  # shrinking another defect: not an example of it (the session goes on)
        if self.known:
            kept = []
            for v in new:
                # a known finding, or what follows from one (the same invariant, later in that session)
                if v.invariant in self._known_hit or any(v.invariant == inv and re.search(rx, v.detail)
                                                         for inv, rx in self.known):
                    self._known_hit.add(v.invariant)
                    type(self).seen_known.append(v)
                else:
                    kept.append(v)
            new = kept
        if new:
            raise self._failure(new)

    def teardown(self) -> None:
        cls = type(self)
        if self.stepper is not None and (cls.longest is None or len(self.builder.events) > cls.longest[0]):
            cls.longest = (len(self.builder.events), (self._header, list(self.builder.events), self._settings()))
        if self.stepper is not None:
            files = sum(1 for p in self.stepper.session_dir.rglob("*") if p.is_file())
            if files and (cls.most_files is None or files > cls.most_files[0]):
                cls.most_files = (files, (self._header, list(self.builder.events), self._settings()))
        for s in (self.stepper, self.other):
            if s is not None:
                s.close()


def machine_for(cls: type[Strategy], params: Mapping[str, Any] | None = None, window: int = CHECK_WINDOW,
                crashes: bool = True, promised: frozenset[str] | None = None,
                max_result_size: int = 2_000_000, twin: bool = True,
                known: tuple[tuple[str, str], ...] = (), seed: int | None = None,
                shrink_examples: int | None = None) -> type[StrategyMachine]:
    """A state machine class for ``cls``. A test module can expose it to pytest directly::

        M = machine_for(MyStrategy)
        M.TestCase.settings = selected_settings()
        TestMyStrategy = M.TestCase

    (:func:`find_failure` does the same and returns the smallest failure instead of raising.)
    ``seed``: the seed of its sessions (default :data:`ctxsim.harness.testing.CORPUS_SEED`: the same for
    every strategy, whatever its name)."""
    from ctxsim.harness.testing import CORPUS_SEED

    params = dict(params) if params is not None else params_for(cls, window)
    return type(f"{cls.__name__}Machine", (StrategyMachine,), {
        "strategy": cls,
        "params": params,
        "fresh_launches": fresh_at_launches(cls, params, window),
        "window": window,
        "crashes": crashes,
        "promised": promised if promised is not None else promises(cls),
        "max_result_size": max_result_size,
        "twin": twin,
        "known": tuple(known),
        "seen_known": [],
        "shrink_examples": shrink_examples,
        "_hypothesis_internal_use_seed": CORPUS_SEED if seed is None else seed,
        "__module__": __name__,
    })


@contextmanager
def _no_local_constants():
    """Hypothesis biases some draws towards literal constants it finds in the modules loaded so
    far (``hypothesis.internal.conjecture.providers``): a derandomized search would then depend on
    what was imported before it (the strategies a test run checked first, a module the engine
    imports lazily), and the same strategy would meet other sessions in another process. The kit
    draws with none, so its searches are a function of the strategy and the settings alone."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - another hypothesis layout: nothing to pin
        yield
        return
    real = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if real is None or cache is None or not hasattr(cache, "cache"):
        yield
        return
    empty = providers.Constants()
    cache.cache.clear()
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = real
        cache.cache.clear()


def _leaves(g: BaseExceptionGroup):
    for e in g.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from _leaves(e)
        else:
            yield e


@contextmanager
def _shrink_budget(seconds: float | None, machine: type[StrategyMachine] | None = None):
    """Bound the time hypothesis spends shrinking (its own bound is 5 minutes, a module constant of
    its engine: a safety net here, the bound that matters is the machine's ``shrink_examples``), and
    tell ``machine`` when the shrink phase runs (its budget counts the sessions of that phase only:
    hypothesis replays the minimal session once more after it, and that replay must run)."""
    from hypothesis.internal.conjecture import engine

    runner = getattr(engine, "ConjectureRunner", None)
    real = getattr(runner, "shrink_interesting_test_cases", None)
    real_test = getattr(runner, "test_function", None)
    patched = machine is not None and real is not None and real_test is not None and hasattr(engine, "ExitReason")
    if patched:
        def shrink(self, *a, **k):
            machine.shrinking = True
            try:
                return real(self, *a, **k)
            finally:
                machine.shrinking = False

        def test_function(self, data):
            if (machine.shrinking and machine.shrink_examples is not None
                    and machine.shrink_runs >= machine.shrink_examples):
                self.exit_with(engine.ExitReason.max_shrinks)  # the budget is spent: shrinking ends here
            return real_test(self, data)
        runner.shrink_interesting_test_cases = shrink
        runner.test_function = test_function
    old = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if seconds is not None and old is not None:
        engine.MAX_SHRINKING_SECONDS = seconds
    try:
        yield
    finally:
        if old is not None:
            engine.MAX_SHRINKING_SECONDS = old
        if patched:
            runner.shrink_interesting_test_cases = real
            runner.test_function = real_test


def _stamped(f: CheckFailure, machine: type[StrategyMachine]) -> CheckFailure:
    f.first_session, f.shrink_runs = machine.first_session, machine.shrink_runs
    f.seed = machine._hypothesis_internal_use_seed
    f.settings["seed"] = f.seed
    return f


def find_failure(cls: type[Strategy], params: Mapping[str, Any] | None = None, *, settings=None,
                 window: int = CHECK_WINDOW, crashes: bool = True, promised: frozenset[str] | None = None,
                 max_result_size: int | None = None, shrink_seconds: float | None = None,
                 profile: str | None = None, twin: bool = True, known: tuple[tuple[str, str], ...] = (),
                 seen_known: list[Violation] | None = None, seed: int | None = None,
                 shrink_examples: int | None = None, cross_process: bool | None = None,
                 scenarios: bool = True) -> CheckFailure | None:
    """Run the machine on ``cls``; the minimal failure hypothesis found, or None if every
    generated session kept every invariant.

    ``profile`` (default: ``$HYPOTHESIS_PROFILE``, else default) sets the defaults of ``settings``,
    ``max_result_size`` and ``shrink_seconds`` (:data:`ctxsim.harness.testing.LIMITS`). Of every failure
    seen while searching and shrinking, the smallest (fewest events, then characters) is returned:
    hypothesis orders by its choice sequence, which may keep a session with more, tinier events.
    Hypothesis prints nothing: the failure carries what there is to say. ``twin=False`` skips the
    second replay of each session (and so the ``deterministic`` invariant). ``known`` lists
    findings already reported, as (invariant, regular expression of the detail): violations that
    match are not failures, and are appended to ``seen_known`` (a list of the caller's) instead.
    ``seed``: the sessions' seed (default: the corpus, :data:`ctxsim.harness.testing.CORPUS_SEED`);
    ``shrink_examples``: sessions replayed while shrinking (default: the profile's).
    ``cross_process`` (default: the profile's): when every session passed, the longest one is
    replayed in two processes with different string-hash seeds (:mod:`ctxsim.harness.testing.crossprocess`);
    a difference is a ``deterministic`` failure on that session. The process's local time zone is
    pinned to :data:`clock.KIT_TZ` while it runs. ``scenarios``: first the
    hand-written sessions of :mod:`ctxsim.harness.testing.scenarios` (the corpus's fixed part).
    """
    with clock.pinned_zone():  # the same local time on every machine (a strategy may read it)
        return _find_failure(cls, params, settings, window, crashes, promised, max_result_size, shrink_seconds,
                             profile, twin, known, seen_known, seed, shrink_examples, cross_process, scenarios)


def _find_failure(cls, params, settings, window, crashes, promised, max_result_size, shrink_seconds, profile, twin,
                  known, seen_known, seed, shrink_examples, cross_process, scenarios) -> CheckFailure | None:
    from ctxsim.harness.testing import LIMITS, selected_profile, selected_settings
    from hypothesis.reporting import with_reporter

    name = selected_profile(profile)
    limits = LIMITS[name]
    size = max_result_size if max_result_size is not None else limits["max_result_size"]
    s = settings or selected_settings(name)
    machine = machine_for(cls, params, window, crashes, promised, size, twin, known, seed,
                          shrink_examples if shrink_examples is not None else limits["shrink_examples"])
    if scenarios:
        found = _scenarios(machine, known, seen_known)
        if found is not None:
            return found
    if seen_known is not None:
        machine.seen_known = seen_known
    budget = shrink_seconds if shrink_seconds is not None else limits["shrink_seconds"]
    try:
        with _shrink_budget(budget, machine), _no_local_constants(), with_reporter(lambda *a, **k: None):
            run_state_machine_as_test(machine, settings=s)
    except CheckFailure as f:
        best = machine.best if machine.best is not None and _size(machine.best) < _size(f) else f
        best.first_events = machine.first_events or len(best.trace.events)
        return _stamped(best, machine)
    except BaseExceptionGroup as g:  # hypothesis' FlakyFailure: a failure that did not replay the same way
        found = g.subgroup(lambda e: isinstance(e, CheckFailure))
        if found is None:
            raise
        f = machine.best or next(e for e in _leaves(found))
        f.first_events = machine.first_events or len(f.trace.events)
        _stamped(f, machine)
        f.violations.append(Violation("deterministic", -1, "", "the same session did not fail the same way when "
                                      "hypothesis replayed it: the strategy keeps state across runs (a class "
                                      "attribute, a module global) or is not a function of its inputs"))
        return f
    except InvariantViolation as e:  # raised by a user's own invariant code
        return CheckFailure(e.violations, tr.validate_events(conv.default_header(), []))
    xproc = cross_process if cross_process is not None else limits["cross_process"]
    if xproc and twin and machine.longest is not None and "deterministic" in machine.promised:
        return _cross_process(cls, machine)
    return None


def _with_check_meta(header: tr.Header, meta: dict) -> tr.Header:
    """A failing session's header: the check's settings and violations added to its meta, the session's own (the
    user's instruction files and memories) kept, so ``--replay`` runs it as it was checked."""
    return header.model_copy(update={"meta": {**header.meta, **meta}})


def _scenarios(machine: type[StrategyMachine], known, seen_known) -> CheckFailure | None:
    from ctxsim.harness.testing.scenarios import SCENARIOS, check_scenario

    for name, (_build, dense) in SCENARIOS.items():
        trace, found = check_scenario(name, machine.strategy, machine.params, machine.window, machine.promised,
                                      CHECK_MODEL)
        kept = []
        for v in found:
            if any(v.invariant == inv and re.search(rx, v.detail) for inv, rx in known):
                if seen_known is not None:
                    seen_known.append(v)
            else:
                kept.append(v)
        if kept:
            settings = {"strategy": f"{machine.strategy.__module__}:{machine.strategy.__qualname__}",
                        "name": machine.strategy.name, "params": machine.params, "window": machine.window,
                        "model": CHECK_MODEL, "fail_calls": {}, "dense": dense, "scenario": name}
            meta = {"check_strategy": {**settings, "violations": [str(v) for v in kept]}}
            f = CheckFailure(kept, tr.validate_events(_with_check_meta(trace.header, meta), trace.events, trace.header.name),
                             settings)
            f.first_events = len(trace.events)
            f.seed = None
            return f
    return None


def _cross_process(cls: type[Strategy], machine: type[StrategyMachine]) -> CheckFailure | None:
    """The hand-written sessions (one of them made for this check: parallel results, tools, spills,
    restored files, sub-agents and resumes, whose order a set would shuffle), the longest
    generated one and the one whose run wrote the most files, replayed in two processes (:mod:`ctxsim.harness.testing.crossprocess`)."""
    from ctxsim.harness.testing import crossprocess
    from ctxsim.harness.testing.scenarios import SCENARIOS, build

    if "<locals>" in cls.__qualname__ or cls.__module__ == "__main__":
        return None  # not importable by another process
    sessions: list[tuple[str, tr.Trace, dict[str, Any]]] = []
    base = {"strategy": f"{cls.__module__}:{cls.__qualname__}", "name": cls.name, "params": machine.params,
            "window": machine.window, "model": CHECK_MODEL, "fail_calls": {}}
    for name, (_build, dense) in SCENARIOS.items():
        trace = build(name, machine.window, cls, machine.params)
        if trace is not None:
            sessions.append((f"the scenario {name}", trace, {**base, "dense": dense, "scenario": name}))
    picked = [("the longest generated session", machine.longest)]
    if machine.most_files is not None and (machine.longest is None or machine.most_files[1] is not machine.longest[1]):
        picked.append(("the generated session that wrote the most files", machine.most_files))
    for what, found in picked:
        if found is None:
            continue
        header, events, settings = found[1]
        try:
            sessions.append((what, tr.validate_events(header, events, header.name), settings))
        except tr.TraceError:  # a session without a model call: nothing was sent
            pass
    if not sessions:
        return None
    found = crossprocess.difference_at([(t, st["fail_calls"]) for _, t, st in sessions],
                                       f"{cls.__module__}:{cls.__qualname__}", machine.params, machine.window)
    if found is None:
        return None
    i, diff = found
    what, trace, settings = sessions[i]
    v = Violation("deterministic", -1, "", f"on {what}: {diff}")
    meta = {"check_strategy": {**settings, "violations": [str(v)]}}
    f = CheckFailure([v], tr.validate_events(_with_check_meta(trace.header, meta), trace.events, trace.header.name),
                     settings)
    f.first_events = len(trace.events)
    return _stamped(f, machine)

"""One-spot bugs in NovaCode (strategies/novacode), each a subclass that changes one thing, and the
correct twin where the twin is not NovaCode itself.

Each mutant is the kind of slip a strategy author makes in a real code base: a wrapper or an
override of one hook, the rest of NovaCode untouched. A mutant keeps the registered name
(``novacode``), so the kit runs it with NovaCode's small-window parameters.
"""

from __future__ import annotations

import random
import shutil
import types
import uuid
from contextlib import contextmanager
from pathlib import Path

from ctxsim.harness.model.conversation import Block, Breakpoint, Message
from ctxsim.harness.testing.params import CHECK_WINDOW
from ctxsim.strategies.novacode import restore
from ctxsim.strategies.novacode import spill as spilling
from ctxsim.strategies.novacode import strategy as nc_module
from ctxsim.strategies.novacode.accounting import TokenLedger, chars_to_tokens, message_chars
from ctxsim.strategies.novacode.caching import cache_control, mark_last_tool
from ctxsim.strategies.novacode.strategy import NovaCode

# --- cache breakpoints (N-CACHE-1) ------------------------------------------------------------------


def _previous_user(messages, last: int | None) -> int | None:
    for i in range((last if last is not None else len(messages)) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return None


class FiveBreakpoints(NovaCode):
    """'More markers, more hits': the first message and the previous user turn are marked too, on
    top of tools, system and the last user message. Five cache_control blocks: every request a 400."""

    def _breakpoints(self, messages):
        bps = super()._breakpoints(messages)
        last = next((b.at for b in reversed(bps) if isinstance(b.at, int)), None)
        prev = _previous_user(messages, last)
        if last is None or prev is None:
            return bps
        ttl = self.config.cache_ttl
        return (*bps[:-1], Breakpoint(0, ttl), Breakpoint(prev, ttl), bps[-1]) if prev > 0 else bps


class FourBreakpoints(NovaCode):
    """Twin: the previous user turn marked too (a rolling pair of markers), four in all."""

    def _breakpoints(self, messages):
        bps = super()._breakpoints(messages)
        last = next((b.at for b in reversed(bps) if isinstance(b.at, int)), None)
        prev = _previous_user(messages, last)
        if last is None or prev is None:
            return bps
        return (*bps[:-1], Breakpoint(prev, self.config.cache_ttl), bps[-1])


class SharedSchemaMarker(NovaCode):
    """N-CACHE-2 broken: the marker for the live request is written in place into the last tool's
    schema dict, which is the trace's (and every session's) shared tool definition."""

    def build_request(self, call):
        tools = self.env.tools.tools
        if tools:
            tools[-1].input_schema["cache_control"] = cache_control(self.config.cache_ttl)  # type: ignore[index]
        return super().build_request(call)


class CopiedSchemaMarker(NovaCode):
    """Twin: the marked tools array is a copy (caching.mark_last_tool), the shared dicts untouched."""

    def build_request(self, call):
        self.api_tools = mark_last_tool([t.to_api() for t in self.env.tools.tools], self.config.cache_ttl)
        return super().build_request(call)


# --- compaction ------------------------------------------------------------------------------------

def _without_environment(window: int) -> dict:
    return {**NovaCode.check_params(window), "environment": False}


class NovaCodeWithoutEnvironment(NovaCode):
    """Twin: NovaCode run without its environment block (``environment = false``), so that nothing
    resident comes before history and history's first message is the request's first."""

    check_params = staticmethod(_without_environment)


class SummaryAsAssistant(NovaCodeWithoutEnvironment):
    """The summary goes in as the model's own message ('the model wrote it'): after a compaction the
    request starts with an assistant message. (With the environment block on, a user message
    resident before history hides the slip from the API; the configuration without it shows it.)"""

    def _apply(self, choice, text, est, now, resident):
        done = super()._apply(choice, text, est, now, resident)
        if done:
            first = self.history[0]
            self.history = self.history.replace_at(0, Message("assistant", first.blocks, first.meta))
        return done


@contextmanager
def _patched_rules(**changes):
    """Swap functions of ctxsim.strategies.novacode.compaction as the strategy module sees them, for one
    call (the kit runs one strategy at a time in this process)."""
    real = nc_module.rules
    nc_module.rules = types.SimpleNamespace(**{**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")},
                                               **changes})
    try:
        yield
    finally:
        nc_module.rules = real


class TailOnResult(NovaCode):
    """N-COMP-7 skipped: the tail is chosen by tokens alone, so its first message may be a
    tool_result whose tool_use goes into the summary."""

    def _maybe_compact(self, now, resident, force=False):
        real = nc_module.rules.select_tail

        def select_tail(tokens, has_tool_result, *a, **k):
            return real(tokens, [False] * len(tokens), *a, **k)

        with _patched_rules(select_tail=select_tail):
            return super()._maybe_compact(now, resident, force)


class HardLineBehindBreaker(NovaCode):
    """N-COMP-3 broken: an open breaker stops the hard line too, so after three failed summaries
    nothing keeps the request under the window."""

    def _maybe_compact(self, now, resident, force=False):
        if not self.breaker.allows(now):
            self.counters.extra["compaction_skipped_breaker_open"] += 1
            return False
        return super()._maybe_compact(now, resident, force)


# --- accounting (N-COMP-5) -------------------------------------------------------------------------

class _DoubleCountLedger(TokenLedger):
    def estimate(self, history, *, system, tools, prefix=(), extra=(), cpt=None):
        if self.anchor is not None and self.anchor_len <= len(history):
            # bug: every message counted on top of the anchor, not only those added after it
            return self.anchor + chars_to_tokens(message_chars(history) + message_chars(extra),
                                                 cpt or self.chars_per_token)
        return super().estimate(history, system=system, tools=tools, prefix=prefix, extra=extra, cpt=cpt)


class _LastUsageLedger(TokenLedger):
    def estimate(self, history, *, system, tools, prefix=(), extra=(), cpt=None):
        if self.anchor is not None and self.anchor_len <= len(history):
            return self.anchor  # bug: only the last reported usage, nothing added since
        return super().estimate(history, system=system, tools=tools, prefix=prefix, extra=extra, cpt=cpt)


class DoubleCountEstimate(NovaCode):
    """The anchored estimate counts the whole history again on top of the reported usage."""

    def _new_ledger(self):
        return _DoubleCountLedger(self.config.chars_per_token, self.config.calibrate_unanchored)


class LastUsageTrigger(NovaCode):
    """The trigger reads only the last reported usage: what arrived since (a large result) is not
    counted until the next answer."""

    def _new_ledger(self):
        return _LastUsageLedger(self.config.chars_per_token, self.config.calibrate_unanchored)


# --- spill (N-SPILL-*) ------------------------------------------------------------------------------

class BudgetRespill(NovaCode):
    """N-SPILL-3 applied to the size threshold only: a read-back is spilled again when the
    message's aggregate budget (N-SPILL-2) is over."""

    def _spill(self, message):
        c = self.config
        ids = {i for i in message.tool_result_ids() if i in self.readback_ids}
        first = spilling.spill_message(message, self._launch_dir(), ids, threshold=c.spill_threshold_chars,
                                       budget=10 ** 15, preview_chars=c.spill_preview_chars)
        second = spilling.spill_message(first.message, self._launch_dir(), frozenset(), threshold=10 ** 15,
                                        budget=c.spill_budget_chars, preview_chars=c.spill_preview_chars)
        self.counters.spills += len(first.spilled) + len(second.spilled)
        return second.message


class AbsolutePathReadback(NovaCode):
    """A read-back is recognised only when the call names the spill file by its absolute path; the
    model's relative ``tool-results/…`` read is spilled again."""

    def on_response(self, message, usage):
        super().on_response(message, usage)
        for b in message.blocks:
            spill_dir = self._launch_dir() / spilling.SPILL_DIR
            if b.id in self.readback_ids and str(spill_dir) not in str(dict(b.input or {})):
                self.readback_ids.discard(b.id)


class _Renamed(NovaCode):
    """Spill files moved to names of the strategy's choosing in one directory for the whole run
    (the placeholder follows)."""

    def spill_name(self, block: Block) -> str:
        raise NotImplementedError

    def _spill(self, message):
        out = super()._spill(message)
        blocks = []
        for b in out.blocks:
            old = b.meta.get("spilled")
            if old:
                new = self.env.session_dir / spilling.SPILL_DIR / self.spill_name(b)
                new.parent.mkdir(parents=True, exist_ok=True)
                Path(old).replace(new)
                b = b.with_text(b.text.replace(str(old), str(new)), spilled=str(new))
            blocks.append(b)
        return Message(out.role, tuple(blocks), out.meta)


class RandomSpillNames(_Renamed):
    """Spill files named by uuid4: the same session gives other requests on every run."""

    def spill_name(self, block):
        return f"{uuid.uuid4().hex[:12]}.txt"


class SpillCounterPerLaunch(_Renamed):
    """Spill files numbered by a counter that restarts at every launch: after a resume the next
    spill overwrites a file that a placeholder still in the window points to."""

    n = 0

    def on_session_start(self, session, resume, now):
        super().on_session_start(session, resume, now)
        self.n = 0

    def spill_name(self, block):
        self.n += 1
        return f"result-{self.n:04d}.txt"


class SpillCounterFromDisk(SpillCounterPerLaunch):
    """Twin: at each launch the counter goes on from the files the run's one directory holds: what a new process of
    the agent does, knowing only its files."""

    def on_session_start(self, session, resume, now):
        super().on_session_start(session, resume, now)
        d = self.env.session_dir / spilling.SPILL_DIR
        self.n = max((int(p.stem.split("-")[1]) for p in d.glob("result-*.txt")), default=0) if d.is_dir() else 0


class _UnseededRandom:
    def random(self):
        return random.random()


def _params_with(**extra):
    def check_params(window: int = CHECK_WINDOW) -> dict:
        return {**NovaCode.check_params(window), **extra}
    return staticmethod(check_params)


class UnseededSpillFailures(NovaCode):
    """N-SPILL-4's injected write failures drawn from the global ``random`` instead of the run's
    seeded generator: a run is not a function of its inputs."""

    check_params = _params_with(spill_failure_rate=0.3)

    def _spill(self, message):
        rng, self.env.rng = self.env.rng, _UnseededRandom()
        try:
            return super()._spill(message)
        finally:
            self.env.rng = rng


class SeededSpillFailures(NovaCode):
    """Twin: the same failure rate, drawn from ``env.rng``."""

    check_params = _params_with(spill_failure_rate=0.3)


class CappedSpillFile(NovaCode):
    """N-SPILL-5 broken: a spill file keeps at most four times the threshold ('nobody reads more'),
    so the placeholder names a file that does not hold the result."""

    def _spill(self, message):
        out = super()._spill(message)
        cap = 4 * self.config.spill_threshold_chars
        for b in out.blocks:
            p = b.meta.get("spilled")
            if p and b.meta.get("spilled_chars", 0) > cap:
                text = Path(p).read_text(encoding="utf-8", errors="surrogatepass")
                Path(p).write_text(text[:cap], encoding="utf-8", errors="surrogatepass")
        return out


class CleanupOnExit(NovaCode):
    """Spill files deleted when a launch ends ('clean up after ourselves'): a resumed session's
    placeholders point to files that are gone."""

    def on_session_end(self, session, now):
        super().on_session_end(session, now)
        shutil.rmtree(self._launch_dir() / spilling.SPILL_DIR, ignore_errors=True)


class ReminderBeforeResults(NovaCode):
    """A reminder block put in front of the tool results of a message: the user turn no longer
    starts with its tool_results."""

    def on_tool_results(self, message):
        note = Block.text_block(f"<system-reminder>{len(message.blocks)} tool result(s) follow.</system-reminder>")
        super().on_tool_results(Message(message.role, (note, *message.blocks), message.meta))


class ReminderAfterResults(NovaCode):
    """Twin: the reminder after the results (what the API asks for)."""

    def on_tool_results(self, message):
        note = Block.text_block(f"<system-reminder>{len(message.blocks)} tool result(s) above.</system-reminder>")
        super().on_tool_results(Message(message.role, (*message.blocks, note), message.meta))


# --- restore (N-COMP-11) -----------------------------------------------------------------------------

class _SkillKeyTracker(restore.ReadTracker):
    def on_assistant(self, message):
        for b in message.blocks:
            if b.type == "tool_use" and b.name in self.skill_tools:
                self._pending[b.id] = ("skill", b.input["skill"])  # bug: Claude Code's Skill input is {"command": ...}
        super().on_assistant(message)


class SkillInputKey(NovaCode):
    """The restore tracker reads a Skill call's name from one input key only and raises on the
    other spelling."""

    def __init__(self, config, env):
        super().__init__(config, env)
        self.reads = _SkillKeyTracker()


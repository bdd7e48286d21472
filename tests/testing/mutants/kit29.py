"""Mutants for the checks of issue #29 (the escapes of the held-out set, written afresh), each a
realistic one-spot bug with its correct twin: a date stamped in the system prompt (UTC, or the machine's local date and zone per request or per launch), results and tools
ordered by a set of strings, an estimate that leaves out the system prompt, a 1-hour marker after a
5-minute one, a compaction whose summary never sees the user's first request, spill names from
``hash()``, restored files in set order, a read-back recognised only in this launch's directory, and
the seed's literal 3.5-chars/token budgets on dense output."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

from ctxsim.harness.model.conversation import (
    Block,
    Breakpoint,
    History,
    Message,
    Request,
    SystemPrompt,
    ToolSet,
)
from ctxsim.strategies.base import CallInfo
from ctxsim.strategies.novacode import restore as rs
from ctxsim.strategies.novacode import spill as sp
from ctxsim.strategies.novacode.strategy import NovaCode

from tests.testing.mutants.keep_recent import KeepRecent


def _day(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")


# --- the clock ------------------------------------------------------------------------------------

def stamped(req: Request, text: str) -> Request:
    """``req`` with ``text`` appended to its system prompt as one more block."""
    return replace(req, system=SystemPrompt((*req.system.blocks, Block.text_block(text)), req.system.opaque_tokens))


class DateInNovaCodeSystem(NovaCode):
    """Today's date appended to the system prompt of every request ("the model should know the
    date"): the cached prefix changes at midnight, in the middle of a launch, undeclared."""

    def build_request(self, call: CallInfo) -> Request:
        return stamped(super().build_request(call), f"Today's date: {_day(call.now)}")


class DateAtLaunchInNovaCodeSystem(NovaCode):
    """Twin: the date of the launch, read once when it starts (a new launch is a new prefix anyway)."""

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        self._launch_day = _day(now)

    def build_request(self, call: CallInfo) -> Request:
        day = getattr(self, "_launch_day", _day(call.now))
        return stamped(super().build_request(call), f"Session started on: {day}")


def _local(now: float) -> str:
    """The date and zone of the machine's local time (what an agent's environment block shows)."""
    local = datetime.fromtimestamp(now).astimezone()
    return f"{local:%Y-%m-%d} ({local.tzname()}, UTC{local:%z})"


class LocalTimeInNovaCodeSystem(NovaCode):
    """The local date and time zone ("the model should know the user's day and zone") stamped in the
    system prompt of every request: the prefix changes when the launch crosses a DST change or local
    midnight, undeclared (and the stamp is the machine's, not the session's)."""

    def build_request(self, call: CallInfo) -> Request:
        return stamped(super().build_request(call), f"Local date: {_local(call.now)}")


class LocalDateAtLaunch(NovaCode):
    """The local date and zone read once at launch (the prefix is stable within a launch), from the
    machine's local time: another machine, in another zone, sends other bytes (a run is no longer a
    function of its inputs)."""

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        self._launch_local = _local(now)

    def build_request(self, call: CallInfo) -> Request:
        day = getattr(self, "_launch_local", None) or _local(call.now)
        return stamped(super().build_request(call), f"Session started on: {day}")


class MachineDateAtLaunch(NovaCode):
    """Today's date on the machine's own clock (``date.today()``), read at launch: not a function of the
    trace at all; it shows only when the day differs, as it does between two zones 10.5 hours apart
    for 10.5 hours a day."""

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        self._today = date.today().isoformat()

    def build_request(self, call: CallInfo) -> Request:
        return stamped(super().build_request(call), f"Today: {getattr(self, '_today', '')}")


class NamedZoneAtLaunch(NovaCode):
    """Twin of both: the date and zone of the launch in a named zone (the user's setting, not the
    machine's), read once when it starts."""

    ZONE = "America/New_York"

    def on_session_start(self, session: str, resume: bool, now: float) -> None:
        super().on_session_start(session, resume, now)
        local = datetime.fromtimestamp(now, ZoneInfo(self.ZONE))
        self._launch_local = f"{local:%Y-%m-%d} ({local.tzname()}, UTC{local:%z})"

    def build_request(self, call: CallInfo) -> Request:
        day = getattr(self, "_launch_local", "unknown")
        return stamped(super().build_request(call), f"Session started on: {day}")


# --- the hash seed --------------------------------------------------------------------------------

class ResultsInSetOrder(KeepRecent):
    """Parallel results de-duplicated through a set of ids ("a result may be reported twice"): they
    go out in the set's order, which follows the string hash seed of the process."""

    def on_tool_results(self, message: Message) -> None:
        by_id = {b.id: b for b in message.blocks}
        ids = set(by_id)
        super().on_tool_results(Message(message.role, tuple(by_id[i] for i in ids), message.meta))


class ResultsInCallOrder(KeepRecent):
    """Twin: de-duplicated in arrival order (a dict keeps it)."""

    def on_tool_results(self, message: Message) -> None:
        by_id = {b.id: b for b in message.blocks}
        super().on_tool_results(Message(message.role, tuple(by_id.values()), message.meta))


class ToolsFromSet(KeepRecent):
    """The tools array rebuilt from a set of names (an MCP registry merged with the built-ins)."""

    def build_request(self, call: CallInfo) -> Request:
        req = super().build_request(call)
        by_name = {t.name: t for t in req.tools.tools}
        return replace(req, tools=ToolSet(tuple(by_name[n] for n in set(by_name))))


class ToolsSortedByName(KeepRecent):
    """Twin: the merged registry sorted by name."""

    def build_request(self, call: CallInfo) -> Request:
        req = super().build_request(call)
        by_name = {t.name: t for t in req.tools.tools}
        return replace(req, tools=ToolSet(tuple(by_name[n] for n in sorted(by_name))))


class SpillNamedByHash(NovaCode):
    """Spill files named by ``hash()`` of the result ("the same output is stored once"): the names,
    so the placeholders, change from process to process."""

    def _spill(self, message: Message) -> Message:
        real = sp.spill_file_name
        sp.spill_file_name = lambda tid: f"{hash(tid) & 0xFFFFFFFF:08x}.txt"
        try:
            return super()._spill(message)
        finally:
            sp.spill_file_name = real


class RestoreInSetOrder(NovaCode):
    """The restore attachment lists the recently read files through a set of paths."""

    def _apply(self, choice, text, est, now, resident):
        files = self.reads.files
        keep = list(files.items())
        files.clear()
        for p in {p for p, _ in keep}:
            files[p] = dict(keep)[p]
        return super()._apply(choice, text, est, now, resident)


# --- the estimate and the window ------------------------------------------------------------------

class EstimateWithoutPrompt(KeepRecent):
    """The estimate counts the messages only: the system prompt and tools "are cached anyway"."""

    def fixed_tokens(self) -> int:
        return 0


class OneHourAfterFiveMinutes(NovaCode):
    """The conversation's marker written for an hour ("it lives longest"), the tools' and system's
    for five minutes: a 1-hour entry after a 5-minute one, which the API refuses."""

    def _breakpoints(self, messages: History):
        bps = super()._breakpoints(messages)
        return tuple(Breakpoint(b.at, "1h" if isinstance(b.at, int) else "5m") for b in bps)


class OneHourPrefix(NovaCode):
    """Twin: the stable prefix (tools, system) for an hour, the conversation for five minutes."""

    def _breakpoints(self, messages: History):
        bps = super()._breakpoints(messages)
        return tuple(Breakpoint(b.at, "5m" if isinstance(b.at, int) else "1h") for b in bps)


class SeedRatioBudgets(NovaCode):
    """The seed's literal budgets: tail, restore attachment and summary request at 3.5 chars/token
    (finding #17 on dense output)."""

    @staticmethod
    def check_params(window: int) -> dict:
        return {**NovaCode.check_params(window), "calibrate_budgets": False}


# --- the goal and the spills ----------------------------------------------------------------------

class SummaryWithoutFirstRequest(NovaCode):
    """The summary request leaves out the conversation's first user message ("it is the task
    description, the transcript has it"): the summary never sees the goal, and the transcript path
    keeps path_back satisfied."""

    def _summarise(self, choice, resident, fired, est):
        first = next((i for i, m in enumerate(self.history) if m.role == "user" and not m.has_tool_result
                      and m.meta.get("origin") is None), None)
        if first is None:
            return super()._summarise(choice, resident, fired, est)
        h = self.history
        blank = Message.user("(the task description is in the transcript)", origin="elided")
        self.history = h.replace_at(first, blank)
        self._req = None  # the request is rebuilt from the blanked history
        try:
            return super()._summarise(choice, resident, fired, est)
        finally:
            self.history = h
            self._req = None  # the request cache saw the blanked history


class ReadbackOnlyThisLaunch(NovaCode):
    """A read-back recognised only under this launch's own spill directory: after a restart the
    model reads an earlier launch's spill, and it is spilled again (N-SPILL-3)."""

    def on_response(self, message: Message, usage) -> None:
        real = sp.names_spill_file
        here = str(self._launch_dir() / sp.SPILL_DIR)
        sp.names_spill_file = lambda inp, d: any(here in str(v) for v in (inp or {}).values())
        try:
            super().on_response(message, usage)
        finally:
            sp.names_spill_file = real


__all__ = [n for n in dir() if n[:1].isupper() and n not in ("Block", "Breakpoint", "History", "Message", "Request",
                                                             "SystemPrompt", "ToolSet", "CallInfo", "NovaCode",
                                                             "KeepRecent", "UTC", "ZoneInfo")]
_ = rs  # the restore module is what RestoreInSetOrder exercises

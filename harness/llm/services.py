"""LLM services: the side calls a strategy makes (summaries, memory selection and extraction,
judging), behind one interface.

Two sides:

* :class:`LLMServices` is what a strategy holds. The engine implements it (``ctxsim.harness.replay.engine``): every
  side call is validated like a main call (a summary request over the window is a 400 and a failed
  compaction), can fail by seeded injection, is billed by the provider model, takes simulated time
  (blocking calls advance the clock) and becomes a row of the per-call table.
* :class:`LLMBackend` is what produces the *text* of a side call: the simulated backend here
  (deterministic, seeded, real output text), or a live one on the anthropic SDK (``ctxsim.harness.llm.live``).
  A backend may return the usage the real API reported; the simulated one leaves billing to the
  provider model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ctxsim.harness.model.conversation import Request, Usage

# kinds of side calls (the ``kind`` column of the per-call table)
SUMMARY = "summary"
VERIFY = "verify"
MEMORY_SELECT = "memory_select"
MEMORY_EXTRACT = "memory_extract"
MEMORY_CONSOLIDATE = "memory_consolidate"
JUDGE = "judge"
SUBAGENT = "subagent"
READBACK = "readback"
RECOVERY = "recovery"  # a lost need at risk re-acquired (harness/retention/recovery.py)
RESTATE = "restate"  # a violated goal/constraint: the user restates it, the call is sent again (harness/retention/recovery.py)


class SideCallFailed(Exception):
    """A side call that did not produce a usable answer. ``reason`` is one of ``injected``,
    ``prompt_too_long``, ``pairing``, ``too_many_breakpoints``, ``rate_limited``, ``overloaded``,
    ``timeout``, ``api_error``."""

    def __init__(self, reason: str, detail: str = "", tokens: int = 0) -> None:
        # tokens: the request's input as the API counted it, where a prompt_too_long refusal states it (0: unknown)
        self.reason, self.detail, self.tokens = reason, detail, tokens
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclass(frozen=True)
class CallSpec:
    """What a side call asks for.

    ``instructions`` is the strategy's own prompt, sent as the final user message after the
    request's messages (so the call reuses the conversation's cached prefix, as Claude Code's
    compaction calls do). ``sections`` names the parts a summary must have (each strategy has its
    own). ``max_output_tokens`` bounds the answer. A non-blocking call (a prefetch) does not
    advance the session clock; ``timeout_s`` drops an answer that arrives later than that.
    """

    kind: str = SUMMARY
    instructions: str = ""
    sections: tuple[str, ...] = ()
    max_output_tokens: int = 20_000
    blocking: bool = True
    timeout_s: float | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SideCallResult:
    text: str
    usage: Usage
    latency_s: float
    late: bool = False  # a non-blocking call whose answer came after its timeout (dropped)


@dataclass(frozen=True)
class BackendReply:
    text: str
    usage: Usage | None = None  # set by live backends: what the API really reported


@runtime_checkable
class LLMServices(Protocol):
    """What a strategy calls. Each method may raise :class:`SideCallFailed`."""

    def call(self, request: Request, spec: CallSpec) -> SideCallResult: ...


class LLMBackend(Protocol):
    """Produces the answer text of a side call (simulated or live)."""

    name: str

    def respond(self, request: Request, spec: CallSpec) -> BackendReply: ...

"""Test helpers for the peer strategies: a strategy built outside the engine, fed by hand, with a
scripted side-call service (what it is asked, what it answers or raises)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from ctxsim.harness.llm.services import CallSpec, SideCallFailed, SideCallResult
from ctxsim.harness.model.conversation import Block, Message, SystemPrompt, ToolDef, ToolSet, Usage
from ctxsim.strategies.base import CallInfo, Rejection, StrategyEnv
from ctxsim.strategies.registry import build


class FakeServices:
    """Answers side calls from a script: each item is a text (answer) or an exception (raised)."""

    def __init__(self, *script) -> None:
        self.script = list(script)
        self.calls: list[tuple] = []  # (request, spec)

    def call(self, request, spec: CallSpec) -> SideCallResult:
        self.calls.append((request, spec))
        item = self.script.pop(0) if self.script else f"<summary>summary {len(self.calls)}</summary>"
        if isinstance(item, Exception):
            raise item
        return SideCallResult(item, Usage(output=10), 1.0)


def make(name: str, params: dict | None = None, *, window: int = 200_000, services=None,
         session_dir: Path | None = None, system: str = "sys", tools: tuple[str, ...] = ("Bash", "Read")):
    env = StrategyEnv(session_dir=session_dir or Path("/nonexistent"), services=services or FakeServices(),
                      now=lambda: 0.0, window=window, max_output_tokens=64_000, model="claude-sonnet-4-6",
                      provider="anthropic", system=SystemPrompt.of(system),
                      tools=ToolSet(tuple(ToolDef(t) for t in tools)), rng=np.random.default_rng(0))
    return build(name, params, env)


def use(i: int, tool: str = "Bash", **inp) -> Block:
    return Block.tool_use(f"tu_{i}", tool, inp or {"command": f"c{i}"})


def step(s, i: int, result: str, *, tool: str = "Bash", usage: Usage | None = None, text: str = "") -> None:
    """One agent step: the strategy is asked for a request, the assistant answers with one tool use
    (usage as given), then the result arrives."""
    s.build_request(CallInfo(i, float(i)))
    blocks = ((Block.text_block(text),) if text else ()) + (use(i, tool),)
    s.on_response(Message("assistant", blocks), usage)
    s.on_tool_results(Message("user", (Block.tool_result(f"tu_{i}", result),)))


def fail(reason: str = "injected") -> SideCallFailed:
    return SideCallFailed(reason, "scripted")



def reject(s, *, call: int = 0, tokens: int | None = None, attempt: int = 1, reasons=("overflow",)) -> bool:
    """Tell ``s`` the API rejected the request built for main call ``call`` (as too long unless
    told); returns the strategy's answer (True: rebuild and retry)."""
    w = s.env.window
    tokens = w + 1 if tokens is None else tokens
    r = Rejection(tuple(reasons), f"prompt is too long: {tokens} tokens > {w} maximum", tokens, w, attempt)
    return s.on_rejected(r, CallInfo(call, float(call)))

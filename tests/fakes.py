"""Fakes for driving a strategy by hand, outside the engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from ctxsim.harness.llm.services import SideCallFailed, SideCallResult
from ctxsim.harness.model.conversation import SystemPrompt, ToolDef, ToolSet, Usage
from ctxsim.strategies.base import StrategyEnv


class IndexedServices:
    """Side calls answered with one text; the calls whose 0-based numbers are in ``fail`` raise an
    injected failure. ``calls`` keeps (request, spec) of each."""

    def __init__(self, text: str = "", fail: set[int] | None = None) -> None:
        self.calls: list = []
        self.text, self.fail = text, fail or set()

    def call(self, request, spec):
        n = len(self.calls)
        self.calls.append((request, spec))
        if n in self.fail:
            raise SideCallFailed("injected", f"#{n}")
        return SideCallResult(self.text, Usage(), 1.0)


def strategy_env(session_dir: Path, services, window: int = 200_000) -> StrategyEnv:
    """A minimal environment: clock at 0, one Read tool, a one-line system prompt."""
    return StrategyEnv(session_dir=session_dir, services=services, now=lambda: 0.0, window=window,
                       max_output_tokens=64_000, model="m", provider="anthropic", system=SystemPrompt.of("sys"),
                       tools=ToolSet((ToolDef("Read", "read"),)), rng=np.random.default_rng(0))
